"""The official Python SDK client (mcp 2.3.0, legacy session mode) against our server.

The client runs in its own interpreter, installed by ``scripts/peers`` (CI runs
it first); the server runs in this test, on a loopback port.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
PEER_PYTHON = PEERS / "py" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PEER_PYTHON.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the official clients (CI always does)",
)


@pytest.mark.parametrize(("transport", "path"), [("streamable", "/mcp"), ("sse", "/sse")])
async def test_python_sdk_client_full_tour(start_mcp, transport: str, path: str) -> None:
    server = await start_mcp()
    url = f"http://127.0.0.1:{server.ports[0]}{path}"
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(PEER_PYTHON), str(HERE / "python_sdk_client.py"), url, transport],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    seen = json.loads(result.stdout)
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["server_name"] == "trio-mcp-everything"
    assert {"echo", "add", "test_tool_with_progress"} <= set(seen["tools"])
    assert seen["echo"] == ["hello"]
    assert seen["add"] == {"result": 42}
    assert seen["progress_result"] == ["Progress test completed"]
    assert seen["progress"] == [[0.0, 100.0], [50.0, 100.0], [100.0, 100.0]]
    assert seen["error_is_error"] is True
    assert seen["bad_args_is_error"] is True
    assert seen["logs"] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert seen["static_text"] == ["This is the content of the static text resource."]
    assert seen["template"]["id"] == "42"
    assert "test://static-text" in seen["resources"]
    assert seen["templates"] == ["test://template/{id}/data"]
    assert seen["prompt"] == ["Prompt with arguments: arg1='a', arg2='b'"]
    assert seen["ping"] is True
    assert seen["sampling"] == ["LLM response: echo of 2+2"]
    assert seen["elicitation"] == [
        "User response: action=accept, content={'username': 'ann', 'email': 'a@b.c'}"
    ]
    assert seen["roots"] == ["file:///tmp/project"]
    assert seen["notifications"] == [
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]
    if transport == "streamable":
        assert seen["reconnection"] == ["Reconnection test completed successfully"]
