"""benchmarks/suite.py: the call-model scenario's check, the goal ratio to FastMCP,
and the scenario table's consistency."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

import suite

BENCHMARKS = Path(suite.__file__).parent


def stored(**changes: Any) -> dict[str, Any]:
    structured = {**suite.STORED, "id": 1, **changes}
    return {
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
    }


def test_a_right_answer_passes_however_its_text_is_laid_out() -> None:
    assert suite.stored_item_problem(stored()) is None
    indented = stored(id=42)  # the Python SDK indents the text and may order keys otherwise
    indented["content"][0]["text"] = json.dumps(
        dict(reversed(indented["structuredContent"].items())), indent=2
    )
    assert suite.stored_item_problem(indented) is None


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (None, "no result"),
        ({**stored(), "isError": True}, "an error"),
        ({"content": stored()["content"]}, "no structuredContent"),
        (stored(id=0), "positive integer"),
        (stored(id=True), "positive integer"),
        (stored(id="1"), "positive integer"),
        (stored(total=7.0), "not the stored item"),
        (stored(extra=1), "not the stored item"),
        ({**stored(), "content": [{"type": "text", "text": "{}"}]}, "JSON text"),
        ({**stored(), "content": []}, "JSON text"),
    ],
)
def test_a_wrong_answer_is_named(result: Any, problem: str) -> None:
    found = suite.stored_item_problem(result)
    assert found is not None and problem in found


def test_suite_lua_posts_the_item_the_check_expects() -> None:
    lua = (BENCHMARKS / "suite.lua").read_text()
    (literal,) = re.findall(r"local ITEM = ((?:'[^']*'(?:\s*\.\.\s*)?)+)", lua)
    assert json.loads("".join(re.findall(r"'([^']*)'", literal))) == suite.ITEM
    assert suite.STORED["total"] == suite.ITEM["quantity"] * suite.ITEM["price"]


def run(scenario: str, server: str, round_no: int, ops: float) -> dict[str, Any]:
    return {"scenario": scenario, "server": server, "round": round_no, "operations_per_s": ops}


def test_the_goal_ratio_is_taken_round_by_round() -> None:
    runs = [
        run("call-model", "trio-mcp", 1, 300.0),
        run("call-model", "fastmcp", 1, 10.0),
        run("call-model", "trio-mcp", 2, 200.0),
        run("call-model", "fastmcp", 2, 20.0),
        run("call-model", "trio-mcp", 3, 100.0),
        {"scenario": "call-model", "server": "fastmcp", "round": 3, "failure": "died"},
        run("tools-list", "trio-mcp", 1, 100.0),  # FastMCP did not run it
    ]
    goal = suite.goal_ratios(runs, ["call-model", "tools-list"])
    assert list(goal) == ["call-model"]
    assert goal["call-model"]["by_round"] == pytest.approx([30.0, 10.0])
    assert goal["call-model"]["median"] == pytest.approx(20.0)


def test_every_scenario_names_known_servers_that_have_its_tools() -> None:
    for scenario in suite.SCENARIOS.values():
        assert scenario.name in suite.CHECKS
        assert set(scenario.servers) <= set(suite.SERVERS)
        assert not set(scenario.absent) & set(scenario.servers)
    model = suite.SCENARIOS["call-model"]
    assert all(suite.SERVERS[name].model for name in model.servers)
    assert "fastmcp" in model.servers and "fastmcp" in suite.SCENARIOS["call"].servers


def test_not_run_rows_are_only_for_the_chosen_servers() -> None:
    scenario = suite.SCENARIOS["call-model"]
    assert [r["server"] for r in suite.summary_rows([], [scenario])] == ["ts-sdk"]
    assert suite.summary_rows([], [scenario], ["trio-mcp", "fastmcp"]) == []
