"""A rolling restart of three replicas sharing a real redis-server, behind the
deployed nginx and HAProxy (issue 24, item 3): each replica in turn gets
SIGTERM, drains, exits and starts again (same name, same port) while
clients keep calling, and no request fails. And a GET stream whose replica
drains ends with a ``retry:`` hint; its client resumes on another replica
with Last-Event-ID and gets what came after. The replicas are real
``trio-mcp run`` processes, killed by PID at the end whatever happened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio
from _support import (
    MCP,
    Client,
    connect,
    connect_when_up,
    free_port,
    initialize_body,
    mcp_post,
    modern_body,
    modern_headers,
    sse_messages,
    tool_call,
)
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis, next_message, open_get
from replica_fixtures import KEYS, NAMES, StartProxy

pytestmark = [
    pytest.mark.filterwarnings(COREDIS_LEFTOVERS),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals by PID"),
]

#: The replicas' application: ``whoami`` answers the pid of the process.
TARGET = f"{Path(__file__).parents[1] / 'redis' / 'replica_app.py'}:server"
VERSION = "2025-11-25"
#: Concurrent clients of each kind in the load.
CLIENTS = 2
#: How long a replica may take to start listening, and to drain and exit.
START_S = 20.0
EXIT_S = 20.0
#: Calls a restarted replica must answer (through the proxy) before the next goes.
SERVED_AFTER_RESTART = 3
#: The replicas' drain delay behind each proxy, as the README asks (its
#: rolling restart, in "Several processes"). Behind HAProxy, what deploy/haproxy.cfg needs: the
#: listener closes only once HAProxy's /readyz checks (inter 1 s, fastinter
#: 250 ms, fall 2) have marked the draining replica down; without it HAProxy
#: may connect just as the listener closes, and that connection is reset after
#: it sent the request: a 502. Behind nginx (no active health checks): during
#: the delay every answer closes its connection, so the kept-alive connections
#: nginx holds to the replica are used up before the listener closes; without
#: it nginx may send a request on an idle one just as the server closes it (a
#: 502, seen once in CI).
DRAIN_DELAY_S = {"nginx": 1.0, "nginx-round-robin": 1.0, "haproxy": 3.0}


class ReplicaProcess:
    """``trio-mcp run`` as replica `name` on a fixed port; restartable."""

    def __init__(self, name: str, redis_url: str, logs: Path, drain_delay_s: float = 0.0) -> None:
        self.name = name
        self.redis_url = redis_url
        self.logs = logs
        self.drain_delay_s = drain_delay_s
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "trio_mcp",
            "run",
            TARGET,
            "--port",
            str(self.port),
            "--owner-name",
            self.name,
            "--redis-url",
            self.redis_url,
            "--forwarded-allow-ips",
            "127.0.0.1",
            "--log-level",
            "warning",
            "--drain-delay-s",
            str(self.drain_delay_s),
        ]
        env = {**os.environ, "TRIO_MCP_REQUEST_STATE_KEYS": ",".join(KEYS)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
        self.pids.append(self.proc.pid)

    @property
    def log(self) -> Path:
        return self.logs / f"{self.name}.log"

    async def up(self) -> None:
        with trio.fail_after(START_S):
            await (await connect_when_up(self.port)).stream.aclose()

    async def drained(self) -> int:
        """SIGTERM; the exit status once it has drained and exited."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(EXIT_S):
            while self.proc.poll() is None:
                await trio.sleep(0.05)
        return self.proc.returncode

    def errors(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def replica_processes(start_redis: StartRedis) -> Iterator[list[ReplicaProcess]]:
    """The replicas a test started (killed before its Redis stops)."""
    started: list[ReplicaProcess] = []
    yield started
    for replica in started:
        replica.kill()


async def three_replicas(
    start_redis: StartRedis,
    started: list[ReplicaProcess],
    logs: Path,
    drain_delay_s: float = 0.0,
) -> dict[str, ReplicaProcess]:
    redis = await start_redis()
    replicas = {name: ReplicaProcess(name, redis.url, logs, drain_delay_s) for name in NAMES}
    started.extend(replicas.values())
    for replica in replicas.values():
        replica.start()
    for replica in replicas.values():
        await replica.up()
    return replicas


def answer_of(body: bytes, content_type: bytes | None) -> dict:
    if content_type == b"text/event-stream":
        return sse_messages(body)[-1]  # type: ignore[return-value]
    if content_type == b"application/json":
        return orjson.loads(body)
    return {"not JSON": body.decode(errors="replace")}


class Load:
    """Clients calling ``whoami`` through the proxy until told to stop; every
    answer's pid is counted, every failure kept."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answered: dict[int, int] = {}
        self.failures: list[str] = []
        self.stopping = trio.Event()

    def count(self, what: str, status: int, answer: dict | None) -> None:
        if status != 200 or answer is None or "result" not in answer:
            self.failures.append(f"{what}: {status} {answer}")
            return
        pid = int(answer["result"]["content"][0]["text"])
        self.answered[pid] = self.answered.get(pid, 0) + 1

    async def exchange(self, client: Client, data: bytes) -> tuple[int, dict | None, bool]:
        """(status, answer, whether the connection stays open)."""
        await client.send(data)
        with trio.fail_after(30):
            reply = await client.read_reply()
        answer = answer_of(reply.body, reply.header(b"content-type")) if reply.body else None
        return reply.status, answer, reply.header(b"connection") != b"close"

    async def sessions(self, kept_alive: bool) -> None:
        """A 2025-11-25 session's calls, on one kept-alive connection (a new
        one when the proxy closes it) or each on a new connection."""
        client = await connect(self.port)
        try:
            await client.send(mcp_post(initialize_body(VERSION)))
            with trio.fail_after(30):
                reply = await client.read_reply()
            assert reply.status == 200, reply
            session = reply.header(b"mcp-session-id").decode()  # type: ignore[union-attr]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await client.send(mcp_post(initialized, session=session, version=VERSION))
            with trio.fail_after(30):
                assert (await client.read_reply()).status == 202
            id = 1
            while not self.stopping.is_set():
                id += 1
                if not kept_alive:
                    await client.stream.aclose()
                    client = await connect(self.port)
                data = mcp_post(tool_call("whoami", id), session=session, version=VERSION)
                status, answer, open_ = await self.exchange(client, data)
                self.count(f"{session} #{id}", status, answer)
                if not open_:
                    await client.stream.aclose()
                    client = await connect(self.port)
        finally:
            await client.stream.aclose()

    async def stateless(self) -> None:
        """2026-07-28 calls, each on a new connection."""
        id = 0
        while not self.stopping.is_set():
            id += 1
            body = modern_body("tools/call", {"name": "whoami", "arguments": {}}, id=id)
            async with await connect(self.port) as client:
                data = mcp_post(body, version="2026-07-28", extra=modern_headers(body))
                status, answer, _ = await self.exchange(client, data)
            self.count(f"2026 #{id}", status, answer)

    async def run(self, nursery: trio.Nursery) -> None:
        for _ in range(CLIENTS):
            nursery.start_soon(self.sessions, True)
            nursery.start_soon(self.sessions, False)
            nursery.start_soon(self.stateless)

    async def until(self, served: int) -> None:
        """Until at least `served` answers were counted."""
        while sum(self.answered.values()) < served:
            await trio.sleep(0.01)

    async def served_by(self, pid: int) -> None:
        """Until the process `pid` has answered `SERVED_AFTER_RESTART` calls."""
        while self.answered.get(pid, 0) < SERVED_AFTER_RESTART:
            await trio.sleep(0.01)


@pytest.mark.parametrize("proxy", ["nginx", "nginx-round-robin", "haproxy"])
async def test_a_rolling_restart_under_load_fails_no_request(
    proxy: str,
    start_redis: StartRedis,
    replica_processes: list[ReplicaProcess],
    start_proxy: StartProxy,
    tmp_path: Path,
) -> None:
    replicas = await three_replicas(start_redis, replica_processes, tmp_path, DRAIN_DELAY_S[proxy])
    port = await start_proxy(proxy, {name: r.port for name, r in replicas.items()})
    load = Load(port)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            await load.run(nursery)
            await load.until(30)
            for replica in replicas.values():
                status = await replica.drained()
                assert status == 0, replica.errors()
                replica.start()
                await replica.up()
                # the next one goes once the proxy has taken this one back
                await load.served_by(replica.pids[-1])
            load.stopping.set()
    assert not load.failures, f"{len(load.failures)} failed: " + "\n".join(load.failures[:20])
    first = {replica.pids[0] for replica in replicas.values()}
    assert first <= set(load.answered), load.answered  # each served before it went


async def test_a_draining_replicas_get_stream_ends_with_retry_and_resumes_elsewhere(
    start_redis: StartRedis,
    replica_processes: list[ReplicaProcess],
    start_proxy: StartProxy,
    tmp_path: Path,
) -> None:
    replicas = await three_replicas(start_redis, replica_processes, tmp_path)
    r1, r2 = replicas["r1"], replicas["r2"]
    port = await start_proxy("nginx", {name: r.port for name, r in replicas.items()})
    with trio.fail_after(60):
        mcp = MCP(await connect(r2.port))  # the session's maker: pokes go there
        await mcp.initialize(VERSION)
        assert mcp.session is not None and mcp.session.startswith("r2.")

        async def poke(id: int) -> None:
            answer = await mcp.call("tools/call", {"name": "poke", "arguments": {}}, id=id)
            assert answer["result"]["content"][0]["text"] == "poked", answer

        stream = await open_get(r1.port, mcp)  # on replica r1, which will drain
        for id in (10, 11):
            await poke(id)
        seen = [await next_message(stream) for _ in range(2)]
        assert r1.proc is not None
        r1.proc.send_signal(signal.SIGTERM)
        # the stream ends, its last word a retry hint (and no new event id)
        tail = b""
        while True:
            try:
                _, _, raw = await stream.event()
            except EOFError:
                break
            tail = raw
        assert tail.startswith(b"retry: "), tail
        assert b"id: " not in tail and b"data: " not in tail, tail
        await stream.client.stream.aclose()
        assert await r1.drained() == 0
        for id in (20, 21):
            await poke(id)  # while no stream is attached: kept for resumption
        # the client resumes through the proxy (the owner's, r2): what it missed, then more
        resumed = await open_get(port, mcp, last_event_id=seen[-1][0])
        await poke(30)
        got = [await next_message(resumed) for _ in range(3)]
        ids = [event_id for event_id, _ in seen + got]
        sequences = [int(event_id.rsplit("-", 1)[1]) for event_id in ids]  # type: ignore[union-attr]
        assert sequences == sorted(set(sequences)) and len(sequences) == 5, ids
        with trio.move_on_after(0.5):  # nothing twice
            extra = await resumed.message()
            raise AssertionError(f"an event came twice: {extra}")
        await resumed.client.stream.aclose()
        await mcp.client.stream.aclose()
