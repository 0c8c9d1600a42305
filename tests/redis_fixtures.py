"""A real redis-server on loopback for tests/redis/, and replicas sharing it.

`start_redis` runs Debian's ``redis-server`` in the foreground on a free
127.0.0.1 port with its own directory under the test's ``tmp_path`` and no
persistence (``--save "" --appendonly no``), or with AOF written on every
command (``aof=True``); it waits (bounded) until the server answers, and
kills it by its PID at teardown. `RedisServer.kill` (SIGKILL) and `restart`
(same port, same directory) are the failure drills. Without redis-server or
coredis the tests skip, unless ``TRIO_MCP_REQUIRE_REDIS=1`` (CI sets it),
which makes them fail.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from _support import MCP, EventReader, connect, free_port

from trio_mcp import HTTPServer, MCPConfig, Server, ServerConfig, serve_mcp
from trio_mcp._stores._redis import RedisLink
from trio_mcp._stores._redis_events import RedisEventStore

#: How long redis-server may take to answer, and to stop.
START_S = 10.0
STOP_S = 5.0


def redis_binary() -> str:
    """The redis-server to run; skips (fails under TRIO_MCP_REQUIRE_REDIS=1)
    when it or coredis is missing."""
    required = os.environ.get("TRIO_MCP_REQUIRE_REDIS") == "1"
    found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")
    missing = None
    if found is None:
        missing = "redis-server is not installed (apt-get install redis-server)"
    else:
        try:
            import coredis  # noqa: F401
        except ImportError:
            missing = "coredis is not installed (pip install 'trio-mcp[redis]')"
    if missing is not None:
        if required:
            pytest.fail(f"{missing}, and TRIO_MCP_REQUIRE_REDIS=1")
        pytest.skip(missing)
    assert found is not None
    return found


@dataclass
class RedisServer:
    binary: str
    directory: Path
    port: int
    aof: bool
    proc: subprocess.Popen[bytes] | None = None
    log: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.aof
            else ["--appendonly", "no"]
        )
        return [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            *persistence,
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
        ]

    async def start(self) -> None:
        log = self.directory / f"redis-{len(self.log)}.log"
        self.log.append(log)
        with log.open("wb") as out:
            self.proc = subprocess.Popen(self.arguments(), stdout=out, stderr=subprocess.STDOUT)
        with trio.fail_after(START_S):
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"redis-server exited: {log.read_text()}")
                if await self.answers():
                    return
                await trio.sleep(0.05)

    async def answers(self) -> bool:
        """Whether the server answers PING (and has loaded its data)."""
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        except OSError:
            return False
        async with stream:
            await stream.send_all(b"PING\r\n")
            with trio.move_on_after(1):
                return (await stream.receive_some(64)).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        """SIGKILL, by PID."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    async def restart(self) -> None:
        self.kill()
        await self.start()

    async def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        with trio.move_on_after(STOP_S):
            while self.proc.poll() is None:
                await trio.sleep(0.05)
        self.kill()


StartRedis = Callable[..., Awaitable[RedisServer]]


@pytest.fixture
async def start_redis(tmp_path: Path) -> AsyncIterator[StartRedis]:
    """``await start_redis(aof=False)``: a running `RedisServer` on loopback."""
    binary = redis_binary()
    servers: list[RedisServer] = []

    async def start(aof: bool = False) -> RedisServer:
        directory = tmp_path / f"redis-{len(servers)}"
        directory.mkdir()
        server = RedisServer(binary, directory, free_port(), aof)
        servers.append(server)
        await server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            await server.stop()


async def event_store(
    start_redis: StartRedis, config: MCPConfig | None = None
) -> tuple[RedisLink, RedisEventStore]:
    """A link to a new redis-server (not opened yet) and an event store on it."""
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    return link, RedisEventStore(link, config or MCPConfig(), 0.0)


class Replicas:
    """``await start_replica(app, redis_url, **MCPConfig settings)``: the port
    of one more endpoint in this trio run sharing the Redis at `redis_url`;
    ``start_replica.stop(port)`` shuts that one down (its leases lapse)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.servers: dict[int, HTTPServer] = {}

    async def __call__(
        self, app: Server, redis_url: str, authenticate: Any = None, **config: object
    ) -> int:
        mcp_config = MCPConfig(
            http=ServerConfig(port=0),
            redis_url=redis_url,
            **config,  # type: ignore[arg-type]
        )
        server: HTTPServer = await self.nursery.start(
            lambda task_status: serve_mcp(
                app, mcp_config, authenticate=authenticate, task_status=task_status
            )
        )
        self.servers[server.ports[0]] = server
        return server.ports[0]

    def stop(self, port: int) -> None:
        self.servers.pop(port).shutdown()


StartReplica = Replicas


@pytest.fixture
async def start_replica(nursery: trio.Nursery) -> AsyncIterator[Replicas]:
    """Endpoints sharing one Redis (`Replicas`)."""
    replicas = Replicas(nursery)
    yield replicas
    for server in replicas.servers.values():
        server.shutdown()


#: coredis leaves the buffers of the connections a killed Redis dropped
#: unclosed (anyio warns when they are collected); nothing of ours leaks.
COREDIS_LEFTOVERS = "ignore:Unclosed <MemoryObject:ResourceWarning"


@pytest.fixture(autouse=True)
def collect_coredis_leftovers() -> Iterator[None]:
    """Collect those after each test (once its trio run is over), where their
    warning is known, rather than in whichever test the collector next runs in."""
    yield
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unclosed <MemoryObject", ResourceWarning)
        gc.collect()


# ---- a client's GET stream ----------------------------------------------------

#: How long a test waits for an event that should come (they come in ms).
EVENT_WAIT_S = 10.0

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)


def get_request(mcp: MCP, last_event_id: str | None = None) -> bytes:
    lines = [
        b"GET /mcp HTTP/1.1",
        b"Host: 127.0.0.1",
        b"Accept: text/event-stream",
        b"Mcp-Session-Id: " + mcp.session.encode(),  # type: ignore[union-attr]
        b"MCP-Protocol-Version: " + mcp.version.encode(),  # type: ignore[union-attr]
    ]
    if last_event_id is not None:
        lines.append(b"Last-Event-ID: " + last_event_id.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def open_get(port: int, mcp: MCP, last_event_id: str | None = None) -> EventReader:
    """A GET stream (retried while another replica's lease on it lapses: 409)."""
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            reader = EventReader(await connect(port))
            head = await reader.head(get_request(mcp, last_event_id))
            if head.status_code != 409:
                assert head.status_code == 200, head
                return reader
            await reader.client.stream.aclose()
            await trio.sleep(0.1)


async def next_message(reader: EventReader) -> tuple[str | None, dict]:
    with trio.fail_after(EVENT_WAIT_S):
        return await reader.message()


async def alive_processes(url: str) -> int:
    """How many processes sharing the Redis at `url` keep their alive key."""
    from urllib.parse import urlsplit

    import coredis

    parts = urlsplit(url)
    async with coredis.Redis(parts.hostname, parts.port) as client:
        return len(await client.keys("trio-mcp:alive:*"))
