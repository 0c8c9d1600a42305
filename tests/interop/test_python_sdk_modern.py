"""The official Python SDK `Client` on the 2026-07-28 wire, beside a 2025-11-25 client."""

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


async def _run(script: str, *args: str) -> dict:
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(PEER_PYTHON), str(HERE / script), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
async def test_modern_client_beside_a_legacy_one(start_mcp, mode: str) -> None:
    server = await start_mcp()
    url = f"http://127.0.0.1:{server.ports[0]}/mcp"
    results: dict[str, dict] = {}

    async def modern() -> None:
        results["modern"] = await _run("python_sdk_modern_client.py", url, mode)

    async def legacy() -> None:
        results["legacy"] = await _run("python_sdk_client.py", url, "streamable")

    async with trio.open_nursery() as nursery:  # both eras on one endpoint, at once
        nursery.start_soon(modern)
        nursery.start_soon(legacy)
    seen = results["modern"]
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["echo"] == ["modern"]
    assert seen["progress"] == [0.0, 50.0, 100.0]
    assert seen["x_mcp_header"] == ["region=eu-west ü count=1"]  # a non-ASCII header value
    assert seen["mrtr"] == ["Hello, Grace!"]
    assert seen["honored"] is True
    assert seen["listen_event"] == "ToolsListChanged"
    assert results["legacy"]["protocol_version"] == "2025-11-25"
    assert results["legacy"]["echo"] == ["hello"]
