"""The official Python and TypeScript clients' full interop tours against three
replicas behind nginx: a real redis-server, three ``trio-mcp run`` processes
of the everything example (each its own ``--owner-name``, one requestState
key ring, one Redis) and nginx with the deployed ``deploy/nginx-replicas.conf``.
The tours and their checks are tests/interop's, unchanged; only the URL is
nginx's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import trio
from _support import connect, mcp_post
from interop_tours import (
    INTEROP,
    NODE,
    PEER_PYTHON,
    TS_SDK,
    check_python_tour,
    check_typescript_tour,
    needs_python_sdk,
    needs_ts_sdk,
    python_tour,
    typescript_tour,
)
from redis_fixtures import COREDIS_LEFTOVERS, EVENT_WAIT_S, StartRedis
from replica_fixtures import StartProxy, StartReplicaProcesses

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

TRANSPORTS = [("streamable", "/mcp"), ("sse", "/sse")]


async def nginx_in_front_of_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
) -> int:
    redis = await start_redis()
    replicas = await start_replica_processes(redis.url)
    return await start_proxy("nginx", {name: r.port for name, r in replicas.items()})


@needs_python_sdk
@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
async def test_python_sdk_tour_through_nginx_to_three_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
    transport: str,
    path: str,
) -> None:
    port = await nginx_in_front_of_replicas(start_redis, start_replica_processes, start_proxy)
    seen = await python_tour(f"http://127.0.0.1:{port}{path}", transport)
    check_python_tour(seen, transport)


@needs_ts_sdk
@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
async def test_typescript_sdk_tour_through_nginx_to_three_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
    transport: str,
    path: str,
) -> None:
    port = await nginx_in_front_of_replicas(start_redis, start_replica_processes, start_proxy)
    seen = await typescript_tour(f"http://127.0.0.1:{port}{path}", transport)
    check_typescript_tour(seen, transport)


# ---- the drill: the replica holding the GET stream is SIGKILLed ---------------

#: Resource-updated notifications before the kill, and after it.
BEFORE, AFTER = 4, 8


class Lines:
    """The JSON lines a client process prints, one at a time, each wait bounded."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdout is not None
        self.stdout = proc.stdout
        self.buffer = b""
        self.seen: list[dict[str, Any]] = []

    async def next(self) -> dict[str, Any]:
        with trio.move_on_after(EVENT_WAIT_S):
            while b"\n" not in self.buffer:
                chunk = await self.stdout.receive_some()
                assert chunk, f"the client exited; it printed {self.seen}"
                self.buffer += chunk
        assert b"\n" in self.buffer, f"the client printed nothing more after {self.seen}"
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.seen.append(json.loads(line))
        return self.seen[-1]

    async def until(self, key: str, value: object = None) -> dict[str, Any]:
        while True:
            line = await self.next()
            if key in line and value in (None, line[key]):
                return line


def uri(n: int) -> str:
    return f"test://template/{n}/data"


async def trigger_update(port: int, session: str, n: int) -> None:
    """Have the replica at `port` notify its sessions subscribed to ``uri(n)``."""
    call = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "test_trigger_resource_update", "arguments": {"uri": uri(n)}},
    }
    async with await connect(port) as client:
        await client.send(mcp_post(call, session=session, version="2025-11-25"))
        with trio.fail_after(EVENT_WAIT_S):
            reply = await client.read_reply()
    assert reply.status == 200, reply.body


async def open_streams(port: int) -> int:
    """The replica's open GET (and listen) streams, from its /metrics."""
    async with await connect(port) as client:
        await client.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        with trio.fail_after(EVENT_WAIT_S):
            reply = await client.read_reply()
    assert reply.status == 200, reply.body
    for line in reply.body.decode().splitlines():
        if line.startswith("mcp_server_streams "):
            return int(float(line.split()[1]))
    raise AssertionError(f"no mcp_server_streams in {reply.body!r}")


def drill_command(client: str, url: str, count: int) -> list[str]:
    if client == "python":
        return [str(PEER_PYTHON), str(INTEROP / "python_sdk_get_drill.py"), url, str(count)]
    return [str(NODE), str(INTEROP / "ts_sdk_get_drill.mjs"), str(TS_SDK), url, str(count)]


@pytest.mark.parametrize("routing", ["round-robin", "owner"])
@pytest.mark.parametrize(
    "client_kind",
    [
        pytest.param("python", marks=needs_python_sdk),
        pytest.param("typescript", marks=needs_ts_sdk),
    ],
)
async def test_official_client_resumes_its_get_stream_when_its_replica_is_killed(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
    client_kind: str,
    routing: str,
) -> None:
    """An official client (Python, TypeScript) holds a session's GET stream
    through nginx; the replica holding it is SIGKILLed after 4 numbered
    resource-updated notifications have arrived; 8 more are sent, and one
    more once those came; the client resumes through nginx by itself and
    gets all 13 once, in order.

    Both SDKs resume a lost GET stream by themselves, with Last-Event-ID,
    after the server's retry hint (1 s); the Python SDK tries one resume and
    the TypeScript one two, a second apart, then the client goes on without
    a GET stream. Both got 409 (the dead replica's lease lasts up to 3 s)
    until a resume took the stream over.

    ``round-robin``: nginx runs the deployed file without its owner lines (as
    in test_round_robin_with_redis_serves_a_session_on_every_replica). Its
    round robin starts at r1, which makes the session; the client opens its
    GET stream only after that, so another replica holds it (found from each
    replica's /metrics), and the maker, alive, sends the notifications.

    ``owner``: the deployed file as it is. The GET stream goes to the replica
    that made the session, so the kill takes the maker; the client resumes on
    another replica, which adopts the session (README, Redis), and the
    notifications are sent by a third replica."""
    redis = await start_redis()
    replicas = await start_replica_processes(redis.url, "--metrics")
    proxy = "nginx" if routing == "owner" else "nginx-round-robin"
    port = await start_proxy(proxy, {n: r.port for n, r in replicas.items()})
    command = drill_command(client_kind, f"http://127.0.0.1:{port}/mcp", BEFORE + AFTER + 1)
    client = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        lines = Lines(client)
        session = (await lines.until("session"))["session"]
        maker = replicas[session.partition(".")[0]]
        holders = [r for r in replicas.values() if await open_streams(r.port)]
        assert len(holders) == 1, holders
        holder = holders[0]
        assert (holder is maker) is (routing == "owner"), (maker.name, holder.name)
        for n in range(1, BEFORE + 1):
            await trigger_update(maker.port, session, n)
            assert await lines.until("updated") == {"updated": uri(n)}
        holder.kill()  # in the middle of the GET stream
        sender = maker
        if routing == "owner":
            # the resume is taken, on a replica that adopts the session (Redis
            # saw the maker's connection close); the third replica sends
            await lines.until("get", 200)
            adopter = [
                r for r in replicas.values() if r is not maker and await open_streams(r.port)
            ]
            assert len(adopter) == 1, adopter
            sender = next(r for r in replicas.values() if r is not maker and r is not adopter[0])
        for n in range(BEFORE + 1, BEFORE + AFTER + 1):
            await trigger_update(sender.port, session, n)
        updates = [(await lines.until("updated"))["updated"] for _ in range(AFTER)]
        assert updates == [uri(n) for n in range(BEFORE + 1, BEFORE + AFTER + 1)]
        # and nothing twice: a duplicate would come before this last one
        await trigger_update(sender.port, session, BEFORE + AFTER + 1)
        assert await lines.until("updated") == {"updated": uri(BEFORE + AFTER + 1)}
        received = [line["updated"] for line in lines.seen if "updated" in line]
        assert received == [uri(n) for n in range(1, BEFORE + AFTER + 2)]
        # one GET, then one resume with Last-Event-ID, answered at once
        gets = [line for line in lines.seen if "get" in line]
        assert [g["get"] for g in gets] == [200, 200], gets
        assert gets[0]["last_event_id"] is None and gets[1]["last_event_id"], gets
        assert client.stdin is not None
        await client.stdin.send_all(b"end\n")
        with trio.fail_after(EVENT_WAIT_S):
            assert await client.wait() == 0
    finally:
        if client.returncode is None:
            client.kill()  # (by its PID)
            await client.wait()
