"""benchmarks/suite.py --rounds: medians, and ratios taken round by round."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

import suite


def run(
    server: str, round_no: int, ops: float, p99: float = 1.0, errors: int = 0
) -> dict[str, Any]:
    return {
        "scenario": "call",
        "server": server,
        "round": round_no,
        "operations_per_s": ops,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "p999_ms": p99 * 2,
        "errors": errors,
        "server_cpu_percent": 100.0,
        "server_cpu_us_per_operation": 1e6 / ops,
    }


def test_the_ratio_is_the_median_of_round_by_round_ratios() -> None:
    # the machine is faster in round 2 for both: 10x then 15x, median 12.5x
    # (the ratio of the medians would be 110 / 9)
    runs = [
        run("trio-mcp", 1, 100.0, p99=2.0),
        run("python-sdk", 1, 10.0),
        run("trio-mcp", 2, 120.0, p99=4.0, errors=1),
        run("python-sdk", 2, 8.0),
    ]
    (ours, sdk) = suite.median_runs(runs)
    assert ours["ratio_to_python_sdk"] == pytest.approx(12.5)
    assert ours["ratio_to_python_sdk_by_round"] == pytest.approx([10.0, 15.0])
    assert (ours["operations_per_s"], ours["p99_ms"], ours["errors"]) == (110.0, 3.0, 1)
    assert ours["operations_per_s_by_round"] == [100.0, 120.0]
    assert sdk["ratio_to_python_sdk"] == 1.0
    scenario = suite.SCENARIOS["call"]
    rows = suite.summary_rows([ours, sdk], [scenario])
    assert [r["ratio_to_python_sdk"] for r in rows[:2]] == pytest.approx([12.5, 1.0])


def test_failed_rounds_are_left_out_and_counted() -> None:
    runs = [
        run("trio-mcp", 1, 100.0),
        run("python-sdk", 1, 10.0),
        {"scenario": "call", "server": "trio-mcp", "round": 2, "failure": "died"},
        run("python-sdk", 2, 20.0),
        {"scenario": "call", "server": "ts-sdk", "round": 1, "failure": "no node"},
    ]
    ours, sdk, ts = suite.median_runs(runs)
    assert (ours["operations_per_s"], ours["failed_rounds"], ours["rounds"]) == (100.0, 1, 2)
    assert ours["ratio_to_python_sdk"] == 10.0  # round 2 has no run of ours to pair
    assert sdk["operations_per_s"] == 15.0
    assert ts["failure"] == "no node" and "operations_per_s" not in ts


def test_one_round_gives_the_run_itself() -> None:
    runs = [run("trio-mcp", 1, 100.0, p99=2.0), run("python-sdk", 1, 4.0)]
    ours, _ = suite.median_runs(runs)
    assert (ours["operations_per_s"], ours["p99_ms"], ours["ratio_to_python_sdk"]) == (
        100.0,
        2.0,
        25.0,
    )
