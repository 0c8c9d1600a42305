"""The official Python SDK client (mcp 2.3.0, legacy session mode) against our server.

The client runs in its own interpreter, installed by ``scripts/peers`` (CI runs
it first); the server runs in this test, on a loopback port.
"""

from __future__ import annotations

import pytest
from interop_tours import check_python_tour, needs_python_sdk, python_tour

pytestmark = needs_python_sdk


@pytest.mark.parametrize(("transport", "path"), [("streamable", "/mcp"), ("sse", "/sse")])
async def test_python_sdk_client_full_tour(start_mcp, transport: str, path: str) -> None:
    server = await start_mcp()
    seen = await python_tour(f"http://127.0.0.1:{server.ports[0]}{path}", transport)
    check_python_tour(seen, transport)
