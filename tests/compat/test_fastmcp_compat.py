"""Servers written for FastMCP run on trio-mcp with only their imports
changed, and see the schemas FastMCP 4.2.3 gives them (issue 23).

FastMCP runs in its own interpreter, installed by ``scripts/peers`` (CI runs
it first): ``fastmcp_schemas.py`` prints what FastMCP derives for every case
of ``type_cases.py`` and for the servers (``notes_server.py``,
``inventory_server.py``), and these tests derive the same with trio-mcp and
compare. The official Python client (``plan_client.py``) then uses every
tool, resource and prompt of each server on trio-mcp, over HTTP and over
stdio (the client starting ``trio-mcp run FILE --transport stdio``).

Every difference is named in `KNOWN_DIFFERENCES`, with its reason; the README's
type table lists the same. A new difference fails the test.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import MCPConfig, Server, ServerConfig, serve_mcp
from trio_mcp._cli import load_server

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
FASTMCP_PYTHON = PEERS / "fastmcp" / "bin" / "python"
CLIENT_PYTHON = PEERS / "py" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not (FASTMCP_PYTHON.exists() and CLIENT_PYTHON.exists()) and os.environ.get("CI") != "true",
    reason="run scripts/peers to install FastMCP and the official client (CI always does)",
)

#: The output schemas that differ from FastMCP's, and why.
KNOWN_DIFFERENCES = {
    # A str result is the text content itself: FastMCP also declares
    # {"result": string} and sends every text twice (as text and structured).
    "t_str": "text results have no output schema",
    "with_defaults": "text results have no output schema",
    # FastMCP sends bytes as content without a schema; trio-mcp keeps the
    # declared type, a string in pydantic's JSON form.
    "t_bytes": "bytes results are structured",
    # A model's aliases name its output fields as they name its input
    # (pydantic's by_alias), so a result read back validates as the model;
    # FastMCP's output schema uses the field names.
    "t_nested_model": "model results use their aliases",
}

OUR_IMPORTS = "from trio_mcp import Context\nfrom trio_mcp import Server as FastMCP"
FASTMCP_IMPORTS = "from fastmcp import Context, FastMCP  # the import line the tests swap"


async def _fastmcp_listings() -> dict[str, Any]:
    with trio.fail_after(120):
        done = await trio.run_process(
            [
                str(FASTMCP_PYTHON),
                str(HERE / "fastmcp_schemas.py"),
                *(str(HERE / name) for name in PLANS),
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    listings: dict[str, Any] = json.loads(done.stdout)
    return listings


def _type_cases() -> Server:
    sys.path.insert(0, str(HERE))
    try:
        import type_cases
    finally:
        sys.path.remove(str(HERE))
    app = Server("cases")
    for name, fn in type_cases.tools():
        app.add_tool(fn, name=name)
    app.add_tool(type_cases.with_defaults)
    return app


def _ours(name: str, tmp_path: Path) -> Path:
    """The server file `name` with trio-mcp's import line in place of FastMCP's."""
    text = (HERE / name).read_text()
    assert FASTMCP_IMPORTS in text
    target = tmp_path / name
    target.write_text(text.replace(FASTMCP_IMPORTS, OUR_IMPORTS))
    return target


def _schemas(app: Server) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "inputSchema": tool.listing["inputSchema"],
            "outputSchema": tool.listing.get("outputSchema"),
        }
        for name, tool in app.tools.items()
    }


def _prompt_arguments(app: Server) -> dict[str, list[list[Any]]]:
    return {
        name: [[a["name"], a["required"]] for a in prompt.listing.get("arguments", [])]
        for name, prompt in app.prompts.items()
    }


async def test_every_type_gets_fastmcps_schemas() -> None:
    theirs = (await _fastmcp_listings())["cases"]["tools"]
    ours = _schemas(_type_cases())
    assert ours.keys() == theirs.keys()
    inputs_differ = [
        name for name in ours if ours[name]["inputSchema"] != theirs[name]["inputSchema"]
    ]
    assert inputs_differ == []
    outputs_differ = {
        name for name in ours if ours[name]["outputSchema"] != theirs[name]["outputSchema"]
    }
    assert outputs_differ == KNOWN_DIFFERENCES.keys()
    # and each known difference is the one named
    assert ours["t_str"]["outputSchema"] is None
    assert ours["t_bytes"]["outputSchema"]["properties"]["result"] == {
        "type": "string",
        "format": "binary",
    }
    assert "ownerId" in ours["t_nested_model"]["outputSchema"]["properties"]
    assert "owner_id" in theirs["t_nested_model"]["outputSchema"]["properties"]


@pytest.mark.parametrize("name", ["notes_server.py", "inventory_server.py"])
async def test_a_server_runs_with_only_its_imports_changed(name: str, tmp_path: Path) -> None:
    theirs = (await _fastmcp_listings())["servers"][name]
    app = load_server(str(_ours(name, tmp_path)))
    assert _schemas(app) == theirs["tools"]
    assert sorted(app.resource_templates) == sorted(theirs["templates"])
    assert _prompt_arguments(app) == {
        prompt: [[a["name"], a["required"]] for a in arguments]
        for prompt, arguments in theirs["prompts"].items()
    }


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("name", ["notes_server.py", "inventory_server.py"])
async def test_the_official_client_uses_every_tool_resource_and_prompt(
    name: str, transport: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    ours = _ours(name, tmp_path)
    app = load_server(str(ours))
    plan, expected = PLANS[name]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    client = [str(CLIENT_PYTHON), str(HERE / "plan_client.py"), str(plan_file)]
    server = None
    if transport == "http":
        config = MCPConfig(http=ServerConfig(port=0))
        server = await nursery.start(
            lambda task_status: serve_mcp(app, config, task_status=task_status)
        )
        client += ["http", f"http://127.0.0.1:{server.ports[0]}/mcp"]
    else:  # the client starts the server: trio-mcp run FILE --transport stdio
        client += ["stdio", sys.executable, "-m", "trio_mcp", "run", str(ours)]
        client += ["--transport", "stdio"]
    try:
        with trio.fail_after(120):
            done = await trio.run_process(
                client, capture_stdout=True, capture_stderr=True, check=False
            )
    finally:
        if server is not None:
            server.shutdown()
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    seen = json.loads(done.stdout)
    assert seen["schemas"] == _schemas(app)
    assert seen["templates"] == sorted(app.resource_templates)
    assert seen["prompt_arguments"] == _prompt_arguments(app)
    covered = {step.get("call") or step.get("read") or step.get("prompt") for step in plan}
    assert set(app.tools) | set(app.prompts) <= covered  # every tool and prompt is used
    assert len(seen["outcomes"]) == len(expected)
    for step, outcome, want in zip(plan, seen["outcomes"], expected, strict=True):
        assert want(outcome), (step, outcome)
    assert seen["logs"] == LOGS[name]
    assert seen["progress"] == PROGRESS[name]


# ---- the plans: each step, and what its outcome must be ------------------------------

NAMESPACE = uuid.UUID("12345678-1234-5678-1234-567812345678")
ALPHA_ID = str(uuid.uuid5(NAMESPACE, "alpha"))
ALPHA = {
    "title": "alpha",
    "body": "",
    "priority": "high",
    "due": "2026-12-24",
    "tags": ["x"],
    "id": ALPHA_ID,
    "created": "2026-12-03T12:00:00Z",
}
ALPHA_IN = {"title": "alpha", "priority": "high", "due": "2026-12-24", "tags": ["x"]}


def _structured(value: Any) -> Any:
    return lambda outcome: outcome["structured"] == value and outcome["is_error"] is False


def _tool_error(*words: str) -> Any:
    return lambda outcome: (
        outcome["is_error"] is True and all(word in outcome["text"][0] for word in words)
    )


def _contents(*texts: str) -> Any:
    return lambda outcome: outcome == {"contents": list(texts)}


def _error(code: int) -> Any:
    return lambda outcome: outcome.get("error") == code


def _messages(*texts: str) -> Any:
    return lambda outcome: outcome == {"messages": list(texts)}


LINES = [
    {"sku": "apple", "quantity": 4},
    {"sku": "flour", "quantity": 2, "unit": 2},
]

PLANS: dict[str, tuple[list[dict[str, Any]], list[Any]]] = {
    "notes_server.py": (
        [
            {"call": "create_note", "arguments": {"note": ALPHA_IN}},
            {"call": "create_note", "arguments": {"note": {"title": "beta"}}},
            {"call": "find_notes", "arguments": {"priority": "high", "limit": 5}},
            {"call": "find_notes", "arguments": {"due_before": "2027-01-01"}},
            {"call": "note_stats"},
            {"call": "days_until", "arguments": {"when": "2026-12-31"}},
            {"call": "create_note", "arguments": {"note": {"title": ""}, "colour": "red"}},
            {"call": "find_notes", "arguments": {"limit": 0}},
            {"read": f"notes://{ALPHA_ID}"},
            {"read": "notes://by-priority/high/5"},
            {"read": "notes://by-priority/urgent/5"},
            {"prompt": "summarize", "arguments": {"priority": "high", "words": "20"}},
            {"prompt": "summarize", "arguments": {"priority": "urgent"}},
        ],
        [
            _structured(ALPHA),
            lambda o: o["structured"]["title"] == "beta" and o["structured"]["due"] is None,
            _structured({"result": [ALPHA]}),
            _structured({"result": [ALPHA]}),
            _structured({"count": 2, "high": 1}),
            _structured({"result": 28}),
            _tool_error(
                "note.title: String should have at least 1 character",
                "unexpected argument 'colour'",
            ),
            _tool_error("limit: Input should be greater than or equal to 1 (got 0)"),
            lambda o: json.loads(o["contents"][0])["title"] == "alpha",
            _contents('["alpha"]'),
            _error(-32002),  # "urgent" is no Priority: the template does not match
            _messages("In at most 20 words, summarize these high notes: alpha"),
            _error(-32602),
        ],
    ),
    "inventory_server.py": (
        [
            {"call": "summarize_order", "arguments": {"lines": LINES}},
            {
                "call": "price_order",
                "arguments": {"lines": LINES, "unit_price": {"amount": "1.25"}},
            },
            {
                "call": "schedule_delivery",
                "arguments": {
                    "order_id": ALPHA_ID,
                    "day": "2026-12-24",
                    "window": ["09:30:00", "12:00:00"],
                },
            },
            {"call": "schedule_delivery", "arguments": {"order_id": "nope", "day": "soon"}},
            {"read": "stock://all"},
            {"read": "stock://apple/5"},
            {"read": "stock://flour/5"},
            {"read": "stock://flour/many"},
            {"prompt": "reorder", "arguments": {"sku": "flour", "below": "3"}},
        ],
        [
            _structured({"lines": 2, "pieces": 4, "kilos": 2}),
            _structured({"amount": "7.50", "currency": "EUR"}),
            _structured({"result": "2026-12-24T09:30:00Z"}),
            _tool_error(
                "order_id: Input should be a valid UUID", "missing required argument 'window'"
            ),
            _contents('{"apple":10,"flour":3}'),
            _contents("yes"),
            _contents("no"),
            _error(-32002),
            _messages("Reorder flour when fewer than 3 are left."),
        ],
    ),
}
LOGS = {
    "notes_server.py": ["creating alpha", "creating beta"],
    "inventory_server.py": ["pricing 2 lines"],
}
PROGRESS = {"notes_server.py": [[1, 2], [2, 2]], "inventory_server.py": [[1, 2], [2, 2]]}
