"""The official Python SDK client (mcp 2.3.0) against our server over https.

The client trusts the test's CA through ``SSL_CERT_FILE``, which the SDK's
default HTTP client (httpx2, trusting the environment) reads; both
transports, Streamable HTTP and the 2024-11-05 HTTP+SSE pair, whose endpoint
event names a path the client resolves against its https URL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio
from _tls_files import make_tls_files

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
PEER_PYTHON = PEERS / "py" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not PEER_PYTHON.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the official clients (CI always does)",
)


@pytest.mark.parametrize(("transport", "path"), [("streamable", "/mcp"), ("sse", "/sse")])
async def test_python_sdk_client_over_https(
    start_mcp, tmp_path: Path, transport: str, path: str
) -> None:
    tls = make_tls_files(tmp_path)
    server = await start_mcp(http=tls.settings())
    url = f"https://127.0.0.1:{server.ports[0]}{path}"
    env = {**os.environ, "SSL_CERT_FILE": str(tls.ca_file), "NO_PROXY": "127.0.0.1"}
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(PEER_PYTHON), str(HERE / "python_sdk_client.py"), url, transport],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    seen = json.loads(result.stdout)
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["server_name"] == "trio-mcp-everything"
    assert seen["echo"] == ["hello"]
    assert seen["progress"] == [[0.0, 100.0], [50.0, 100.0], [100.0, 100.0]]
    assert seen["sampling"] == ["LLM response: echo of 2+2"]
    assert seen["notifications"] == [
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]
    if transport == "streamable":
        assert seen["reconnection"] == ["Reconnection test completed successfully"]


async def test_the_sdk_client_refuses_a_server_it_does_not_trust(start_mcp, tmp_path: Path) -> None:
    """Without the CA the client fails: the https is real, not skipped."""
    tls = make_tls_files(tmp_path)
    server = await start_mcp(http=tls.settings())
    url = f"https://127.0.0.1:{server.ports[0]}/mcp"
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(PEER_PYTHON), str(HERE / "python_sdk_client.py"), url, "streamable"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**env, "NO_PROXY": "127.0.0.1"},
        )
    assert result.returncode != 0
    assert b"CERTIFICATE_VERIFY_FAILED" in result.stderr
