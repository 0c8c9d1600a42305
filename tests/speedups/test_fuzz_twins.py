"""A bounded sample of ``benchmarks/fuzz_twins.py``: every compiled function
agrees with its twin on generated inputs (the full run, 100,000 inputs per
function, is in benchmarks/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fuzz_twins

SAMPLE = 3000


def test_every_compiled_function_agrees_with_its_twin(compiled_impl: Any) -> None:
    found = fuzz_twins.fuzz(SAMPLE, seed=7)
    assert set(found) == {name for _, name, _ in fuzz_twins.TARGETS}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_mutations_reach_both_outcomes() -> None:
    """The generated inputs are not all accepted, nor all refused."""
    import random

    from trio_mcp import _httphead_py

    rng = random.Random(3)
    cases = fuzz_twins.parse_head_cases(rng)
    kinds = {fuzz_twins.outcome(_httphead_py.parse_head, *next(cases)[0])[0] for _ in range(500)}
    assert kinds == {"ok", "error"}
