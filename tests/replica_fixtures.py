"""Three trio-mcp replicas behind a real nginx or HAProxy, on loopback.

The proxies run the deployed files (``deploy/nginx-replicas.conf``,
``deploy/haproxy.cfg``, which the README documents) with the replicas' ports
and the listen port substituted; the replicas are `serve_mcp` servers in the
test's trio run, named r1, r2 and r3 as the files expect, sharing one
``requestState`` key ring. Without the proxy binary a test skips, unless
``TRIO_MCP_REQUIRE_NGINX=1`` (CI sets it), which makes it fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trio
from _support import free_port
from nginx_fixtures import main_config, nginx_binary

from trio_mcp import HTTPServer, MCPConfig, Server, ServerConfig, serve_mcp

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
NGINX_REPLICAS = DEPLOY / "nginx-replicas.conf"
HAPROXY = DEPLOY / "haproxy.cfg"
NAMES = ("r1", "r2", "r3")
#: The replicas' ports in the deployed files.
DEPLOYED_PORTS = {"r1": 8001, "r2": 8002, "r3": 8003}
KEYS = ("the replicas' shared requestState key",)
START_S = 10.0
STOP_S = 5.0


class Replica:
    """One replica: its server, and a scope that stops it (its port then
    refuses connections, as a dead process's would)."""

    def __init__(self, name: str, server: HTTPServer, scope: trio.CancelScope) -> None:
        self.name = name
        self.server = server
        self.scope = scope

    @property
    def port(self) -> int:
        return self.server.ports[0]

    def stop(self) -> None:
        self.scope.cancel()


StartReplicas = Callable[..., Awaitable[dict[str, Replica]]]
StartProxy = Callable[[str, dict[str, int]], Awaitable[int]]


def replica_app(name: str) -> Server:
    server = Server(f"replica-{name}")

    @server.tool()
    def whoami() -> str:
        """Which replica answered."""
        return name

    return server


@pytest.fixture
async def start_replicas(nursery: trio.Nursery) -> AsyncIterator[StartReplicas]:
    """``await start_replicas(**MCPConfig settings)``: r1, r2 and r3, by name."""
    replicas: list[Replica] = []

    async def start(**settings: object) -> dict[str, Replica]:
        started = {}
        for name in NAMES:
            http = ServerConfig(port=0, forwarded_allow_ips=("127.0.0.1",))
            config = MCPConfig(
                http=http,
                owner_name=name,
                request_state_keys=KEYS,
                **settings,  # type: ignore[arg-type]
            )
            scope = trio.CancelScope()
            server: HTTPServer = await nursery.start(_serve, replica_app(name), config, scope)
            started[name] = Replica(name, server, scope)
        replicas.extend(started.values())
        return started

    yield start
    for replica in replicas:
        replica.stop()


async def _serve(
    app: Server,
    config: MCPConfig,
    scope: trio.CancelScope,
    task_status: trio.TaskStatus[HTTPServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    with scope:
        await serve_mcp(app, config, task_status=task_status)


def proxy_binary(name: str) -> str:
    if name == "nginx":
        return nginx_binary()
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        if os.environ.get("TRIO_MCP_REQUIRE_NGINX") == "1":
            pytest.fail(f"{name} is required (TRIO_MCP_REQUIRE_NGINX=1) but not installed")
        pytest.skip(f"{name} is not installed (apt-get install {name})")
    return found


def substituted(text: str, ports: dict[str, int], listen_port: int, *, kind: str) -> str:
    """The deployed file for these ports (every deployed line must still be
    there: a test of another configuration proves nothing)."""
    for name, deployed in DEPLOYED_PORTS.items():
        old = f"127.0.0.1:{deployed}"
        assert old in text, f"the deployed file names no {old}"
        text = text.replace(old, f"127.0.0.1:{ports[name]}")
    listen = "    listen 80;\n" if kind == "nginx" else "    bind :80\n"
    assert text.count(listen) == 1, f"the deployed file has no single {listen.strip()!r}"
    new = (
        f"    listen 127.0.0.1:{listen_port};\n"
        if kind == "nginx"
        else (f"    bind 127.0.0.1:{listen_port}\n")
    )
    return text.replace(listen, new)


def round_robin(text: str) -> str:
    """The nginx file with its owner lines removed: every request to any replica."""
    lines = [line for line in text.splitlines(keepends=True) if "~^r" not in line]
    assert len(lines) == len(text.splitlines()) - len(NAMES)
    return "".join(lines)


@pytest.fixture
async def start_proxy(tmp_path: Path) -> AsyncIterator[StartProxy]:
    """``await start_proxy(kind, ports)``: the port of a proxy (``nginx``,
    ``nginx-round-robin`` or ``haproxy``) in front of the replicas' `ports`."""
    processes: list[subprocess.Popen[bytes]] = []

    async def start(kind: str, ports: dict[str, int]) -> int:
        prefix = tmp_path / f"proxy-{len(processes)}"
        prefix.mkdir()
        port = free_port()
        log = prefix / "error.log"
        if kind.startswith("nginx"):
            text = substituted(NGINX_REPLICAS.read_text(), ports, port, kind="nginx")
            if kind == "nginx-round-robin":
                text = round_robin(text)
            site = prefix / "replicas.conf"
            site.write_text(text)
            conf = prefix / "nginx.conf"
            conf.write_text(main_config(prefix, site))
            command = [proxy_binary("nginx"), "-p", str(prefix), "-e", str(log), "-c", str(conf)]
        else:
            conf = prefix / "haproxy.cfg"
            conf.write_text(substituted(HAPROXY.read_text(), ports, port, kind="haproxy"))
            command = [proxy_binary("haproxy"), "-db", "-f", str(conf)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        processes.append(proc)
        with trio.fail_after(START_S):
            while True:
                if proc.poll() is not None:
                    assert proc.stderr is not None
                    problem = proc.stderr.read().decode(errors="replace")
                    logged = log.read_text() if log.exists() else ""
                    raise AssertionError(f"{kind} exited ({proc.returncode}): {problem}{logged}")
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
                os.kill(proc.pid, signal.SIGTERM)
            with trio.move_on_after(STOP_S):
                while proc.poll() is None:
                    await trio.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()


# ---- replicas as processes of their own, sharing a Redis -----------------------

#: The application the replica processes serve: the interop tests' target.
EVERYTHING = f"{Path(__file__).resolve().parents[1] / 'examples' / 'everything.py'}:server"
#: How long three processes may take to start answering (imports on a busy machine).
PROCESSES_START_S = 60.0


class ReplicaProcess:
    """One ``trio-mcp run --redis-url`` process; `kill` is the SIGKILL drill."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], port: int) -> None:
        self.name = name
        self.proc = proc
        self.port = port

    def kill(self) -> None:
        """SIGKILL, by PID."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


StartReplicaProcesses = Callable[..., Awaitable[dict[str, ReplicaProcess]]]


@pytest.fixture
async def start_replica_processes(tmp_path: Path) -> AsyncIterator[StartReplicaProcesses]:
    """``await start_replica_processes(redis_url, *flags, target=EVERYTHING)``: r1, r2
    and r3 as ``trio-mcp run`` processes of their own, each with its owner
    name, one requestState key ring (from a file, as the deployed file says)
    and the Redis at `redis_url`, trusting the proxy's forwarding headers;
    answering once this returns, and killed by PID at teardown."""
    keys = tmp_path / "request-state-keys"
    keys.write_text("\n".join(KEYS) + "\n")
    started: list[ReplicaProcess] = []

    async def start(
        redis_url: str, *flags: str, target: str = EVERYTHING
    ) -> dict[str, ReplicaProcess]:
        replicas = {}
        for name in NAMES:
            port = free_port()
            log = (tmp_path / f"replica-{name}.log").open("wb")
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "trio_mcp", "run", target),
                    *("--port", str(port), "--owner-name", name),
                    *("--redis-url", redis_url, "--request-state-keys-file", str(keys)),
                    *("--forwarded-allow-ips", "127.0.0.1", "--log-level", "warning"),
                    *flags,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            replicas[name] = ReplicaProcess(name, proc, port)
            started.append(replicas[name])
        with trio.fail_after(PROCESSES_START_S):
            for replica in replicas.values():
                while True:
                    if replica.proc.poll() is not None:
                        logged = (tmp_path / f"replica-{replica.name}.log").read_text()
                        raise AssertionError(f"replica {replica.name} exited: {logged}")
                    try:
                        stream = await trio.open_tcp_stream("127.0.0.1", replica.port)
                    except OSError:
                        await trio.sleep(0.05)
                        continue
                    await stream.aclose()
                    break
        return replicas

    try:
        yield start
    finally:
        for replica in started:
            replica.kill()
