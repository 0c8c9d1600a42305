"""Servers written for FastMCP run on trio-mcp with only their imports
changed, and see the schemas FastMCP 4.2.3 gives them (issue 23).

FastMCP runs in its own interpreter, installed by ``scripts/peers`` (CI runs
it first): ``fastmcp_schemas.py`` prints what FastMCP derives for every case
of ``type_cases.py`` and for ``notes_server.py``, and these tests derive the
same with trio-mcp and compare. The official Python client
(``notes_client.py``) then uses the notes server on trio-mcp, over HTTP.

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
            [str(FASTMCP_PYTHON), str(HERE / "fastmcp_schemas.py"), str(HERE / "notes_server.py")],
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


def _notes_server(tmp_path: Path) -> Server:
    """notes_server.py with trio-mcp's import line in place of FastMCP's."""
    text = (HERE / "notes_server.py").read_text()
    assert FASTMCP_IMPORTS in text
    target = tmp_path / "notes_server.py"
    target.write_text(text.replace(FASTMCP_IMPORTS, OUR_IMPORTS))
    return load_server(str(target))


def _schemas(app: Server) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "inputSchema": tool.listing["inputSchema"],
            "outputSchema": tool.listing.get("outputSchema"),
        }
        for name, tool in app.tools.items()
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


async def test_the_notes_server_runs_with_only_its_imports_changed(tmp_path: Path) -> None:
    theirs = (await _fastmcp_listings())["notes"]
    app = _notes_server(tmp_path)
    assert _schemas(app) == theirs["tools"]
    assert sorted(app.resource_templates) == sorted(theirs["templates"])
    ours_prompts = {
        name: [[a["name"], a["required"]] for a in prompt.listing.get("arguments", [])]
        for name, prompt in app.prompts.items()
    }
    assert ours_prompts == {
        name: [[a["name"], a["required"]] for a in arguments]
        for name, arguments in theirs["prompts"].items()
    }


async def test_the_official_client_uses_the_notes_server(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    app = _notes_server(tmp_path)
    config = MCPConfig(http=ServerConfig(port=0))
    server = await nursery.start(
        lambda task_status: serve_mcp(app, config, task_status=task_status)
    )
    url = f"http://127.0.0.1:{server.ports[0]}/mcp"
    try:
        with trio.fail_after(120):
            done = await trio.run_process(
                [str(CLIENT_PYTHON), str(HERE / "notes_client.py"), "http", url],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    seen = json.loads(done.stdout)
    assert seen["schemas"] == _schemas(app)
    alpha, beta = seen["created"]
    namespace = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert alpha == {
        "title": "alpha",
        "body": "",
        "priority": "high",
        "due": "2026-12-24",
        "tags": ["x"],
        "id": str(uuid.uuid5(namespace, "alpha")),
        "created": "2026-12-03T12:00:00Z",
    }
    assert beta["priority"] == "low" and beta["due"] is None
    assert seen["logs"] == ["creating alpha", "creating beta"]
    assert seen["found"] == {"result": [alpha]}
    assert seen["due"] == {"result": [alpha]}
    assert seen["stats"] == {"count": 2, "high": 1}
    assert seen["days"] == {"result": 28}
    assert seen["progress"] == [[1, 2], [2, 2]]
    assert seen["bad"]["is_error"] is True
    (message,) = seen["bad"]["text"]
    assert "note.title: String should have at least 1 character" in message
    assert "unexpected argument 'colour'" in message
    assert seen["read"]["title"] == "alpha"
    assert seen["by_priority"] == ["alpha"]
    assert seen["no_match"] == -32002  # "urgent" is no Priority: the template does not match
    assert seen["templates"] == ["notes://by-priority/{priority}/{limit}", "notes://{note_id}"]
    assert seen["prompt_arguments"] == {"summarize": [["priority", True], ["words", False]]}
    assert seen["prompt"] == ["In at most 20 words, summarize these high notes: alpha"]
