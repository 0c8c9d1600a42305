"""nginx in front of a trio-mcp server, both on loopback, for tests/proxy/.

`start_nginx` runs Debian's nginx (``/usr/sbin/nginx``) as one foreground
process (``daemon off; master_process off``) with its own prefix, pid, temp
directories and logs under the test's ``tmp_path``, configured with
``deploy/nginx.conf`` (the file the README documents) whose ports and
timeouts are substituted, and stops it by its PID. Without nginx these tests
skip, unless ``TRIO_MCP_REQUIRE_NGINX=1`` (CI sets it), which makes them fail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trio
from _support import free_port

from trio_mcp import HTTPServer, MCPConfig, Server, ServerConfig, serve_mcp

DEPLOYED = Path(__file__).resolve().parents[1] / "deploy" / "nginx.conf"
#: How long nginx may take to start listening, and to stop.
START_S = 10.0
STOP_S = 5.0

StartNginx = Callable[..., Awaitable[int]]
StartMCP = Callable[..., Awaitable[int]]


def nginx_binary() -> str:
    """The nginx to run; skips the test (fails it under TRIO_MCP_REQUIRE_NGINX=1)
    when there is none."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None:
        if os.environ.get("TRIO_MCP_REQUIRE_NGINX") == "1":
            pytest.fail("nginx is required (TRIO_MCP_REQUIRE_NGINX=1) but not installed")
        pytest.skip("nginx is not installed (apt-get install nginx)")
    return found


def _substitute(text: str, pattern: str, replacement: str) -> str:
    """`text` with the one line `pattern` matches replaced (the deployed file
    must still have it: a test of another configuration proves nothing)."""
    new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    assert count == 1, f"deploy/nginx.conf has {count} lines matching {pattern!r}"
    return new


def site_config(upstream_port: int, listen_port: int, read_timeout_s: int | None = None) -> str:
    """deploy/nginx.conf for these loopback ports (and another read timeout)."""
    text = DEPLOYED.read_text()
    text = _substitute(
        text, r"^(\s*)server 127\.0\.0\.1:8000;", rf"\g<1>server 127.0.0.1:{upstream_port};"
    )
    text = _substitute(text, r"^(\s*)listen 80;", rf"\g<1>listen 127.0.0.1:{listen_port};")
    if read_timeout_s is not None:
        text = _substitute(
            text,
            r"^(\s*)proxy_read_timeout 60s;",
            rf"\g<1>proxy_read_timeout {read_timeout_s}s;",
        )
    return text


def main_config(prefix: Path, site: Path) -> str:
    """An nginx.conf that keeps everything under `prefix` and includes `site`."""
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""daemon off;
master_process off;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} info;
events {{
    worker_connections 256;
}}
http {{
    access_log {prefix / "access.log"};
{temp}
    include {site};
}}
"""


@pytest.fixture
async def start_nginx(tmp_path: Path) -> AsyncIterator[StartNginx]:
    """``await start_nginx(upstream_port, read_timeout_s=None)``: the port of an
    nginx proxying to trio-mcp on `upstream_port` with deploy/nginx.conf."""
    binary = nginx_binary()
    processes: list[subprocess.Popen[bytes]] = []

    async def start(upstream_port: int, read_timeout_s: int | None = None) -> int:
        prefix = tmp_path / f"nginx-{len(processes)}"
        prefix.mkdir()
        port = free_port()
        site = prefix / "trio-mcp.conf"
        site.write_text(site_config(upstream_port, port, read_timeout_s))
        conf = prefix / "nginx.conf"
        conf.write_text(main_config(prefix, site))
        error_log = prefix / "error.log"
        proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-e", str(error_log), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        processes.append(proc)
        with trio.fail_after(START_S):
            while True:
                if proc.poll() is not None:
                    assert proc.stderr is not None
                    problem = proc.stderr.read().decode(errors="replace")
                    log = error_log.read_text() if error_log.exists() else ""
                    raise AssertionError(f"nginx exited ({proc.returncode}): {problem}{log}")
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                return port

    try:
        yield start
    finally:
        for proc in processes:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)  # (nginx's fast shutdown)
            with trio.move_on_after(STOP_S):
                while proc.poll() is None:
                    await trio.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()


@pytest.fixture
async def start_mcp_upstream(nursery: trio.Nursery) -> AsyncIterator[StartMCP]:
    """``await start_mcp_upstream(app, **MCPConfig settings)``: the port of a
    trio-mcp server on 127.0.0.1 that trusts the proxy's forwarding headers."""
    servers: list[HTTPServer] = []

    async def start(app: Server, **config: object) -> int:
        http = ServerConfig(port=0, forwarded_allow_ips=("127.0.0.1",))
        mcp_config = MCPConfig(http=http, **config)  # type: ignore[arg-type]
        server: HTTPServer = await nursery.start(
            lambda task_status: serve_mcp(app, mcp_config, task_status=task_status)
        )
        servers.append(server)
        return server.ports[0]

    yield start
    for server in servers:
        server.shutdown()
