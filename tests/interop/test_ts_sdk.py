"""The official TypeScript SDK client (@modelcontextprotocol/sdk 1.x) against our server.

Node and the SDK are installed by ``scripts/peers`` (CI runs it first).
"""

from __future__ import annotations

import pytest
from interop_tours import check_typescript_tour, needs_ts_sdk, typescript_tour

pytestmark = needs_ts_sdk


@pytest.mark.parametrize(("transport", "path"), [("streamable", "/mcp"), ("sse", "/sse")])
async def test_typescript_sdk_client_tour(start_mcp, transport: str, path: str) -> None:
    server = await start_mcp()
    seen = await typescript_tour(f"http://127.0.0.1:{server.ports[0]}{path}", transport)
    check_typescript_tour(seen, transport)
