"""benchmarks/instructions.py: reading the instruction total of a callgrind dump."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

import instructions

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  python benchmarks/_suite_server.py --port 1
part: 2

events: Ir
summary: 2554321098

fn=(1) main
0 5
totals: 2554321098
"""


def test_the_total_comes_from_the_totals_or_summary_line() -> None:
    assert instructions.total_instructions(DUMP) == 2_554_321_098
    without_totals = DUMP.replace("totals: 2554321098\n", "")
    assert instructions.total_instructions(without_totals) == 2_554_321_098


def test_a_dump_without_a_total_is_an_error() -> None:
    with pytest.raises(ValueError, match="no totals"):
        instructions.total_instructions("events: Ir\nfn=(1) main\n0 5\n")
