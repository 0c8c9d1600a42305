"""Sessions shared through a real redis-server: any replica serves any session,
the bounds hold across replicas, Redis ends idle sessions, DELETE ends one
everywhere."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
from _support import MCP, Client, Reply, connect, initialize_body
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis, StartReplica

from trio_mcp import MCPConfig, Server
from trio_mcp._errors import StartupError

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)


def replica_app(name: str) -> Server:
    """An application whose tool says which replica ran it."""
    app = Server("replicated")

    @app.tool()
    def whoami() -> str:
        return name

    return app


async def session_on(port: int) -> MCP:
    mcp = MCP(await connect(port))
    await mcp.initialize()
    return mcp


async def call_on(port: int, session: MCP, id: int) -> tuple[int, str]:
    """tools/call whoami on a new connection to `port`: (status, who answered)."""
    async with await connect(port) as client:
        other = MCP(client)
        other.session, other.version = session.session, session.version
        reply = await other.post(
            {
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}},
            }
        )
    if reply.status != 200:
        return reply.status, ""
    return 200, orjson.loads(reply.body)["result"]["content"][0]["text"]


async def test_a_session_made_on_one_replica_is_served_by_the_others(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    ports = [await start_replica(replica_app(f"r{i}"), redis.url) for i in (1, 2, 3)]
    mcp = await session_on(ports[0])
    answers = [await call_on(ports[1 + i % 2], mcp, i) for i in range(10)]
    assert answers == [(200, "r2" if i % 2 == 0 else "r3") for i in range(10)]
    await mcp.client.stream.aclose()


async def test_the_session_bound_holds_across_replicas(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    ports = [
        await start_replica(
            replica_app(f"r{i}"), redis.url, max_sessions=2, max_sessions_per_client=2
        )
        for i in (1, 2)
    ]
    first = await session_on(ports[0])
    second = await session_on(ports[1])
    async with await connect(ports[1]) as client:
        reply = await MCP(client).post(
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                }
            ),
            session=None,
            version=None,
        )
    assert reply.status == 503, reply.body
    # when the first could expire (it said 1 s, always, before)
    assert 1800 <= int(reply.header(b"retry-after") or 0) <= 1800 + 20
    # ending one on the other replica makes room everywhere
    async with await connect(ports[0]) as client:
        await client.send(
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
            + second.session.encode()  # type: ignore[union-attr]
            + b"\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n"
        )
        assert (await client.read_reply()).status in (200, 204)
    third = await session_on(ports[1])
    for mcp in (first, second, third):
        await mcp.client.stream.aclose()


async def test_one_client_share_holds_across_replicas(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    ports = [
        await start_replica(replica_app(f"r{i}"), redis.url, max_sessions_per_client=1)
        for i in (1, 2)
    ]
    first = await session_on(ports[0])
    mcp = MCP(await connect(ports[1]))
    reply = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        session=None,
        version=None,
    )
    assert reply.status == 429, reply.body
    assert 1800 <= int(reply.header(b"retry-after") or 0) <= 1800 + 20
    await mcp.client.stream.aclose()
    await first.client.stream.aclose()


async def session_from(port: int, source: str) -> tuple[Reply, MCP]:
    """An initialize from `source` (a loopback address: its own client): the
    reply, and the MCP client (its session set when it got one)."""
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    mcp = MCP(Client(trio.SocketStream(sock)))
    reply = await mcp.post(initialize_body(), session=None, version=None)
    session = reply.header(b"mcp-session-id")
    if session is not None:
        mcp.session, mcp.version = session.decode(), "2025-11-25"
    return reply, mcp


async def test_a_full_store_ends_an_idle_session_of_a_heavier_client(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    """As the memory store does (tests/protocol/test_sessions.py): one client's
    unused sessions no longer keep every other client out of a full store."""
    redis = await start_redis()
    # sweeps every 0.5 s: a session idle past the grace (1 s) has nothing running
    config = {"max_sessions": 3, "max_sessions_per_client": 3, "session_idle_timeout_s": 2.0}
    ports = [await start_replica(replica_app(f"r{i}"), redis.url, **config) for i in (1, 2)]
    flood = []
    for _ in range(3):
        reply, mcp = await session_from(ports[0], "127.0.0.2")
        assert reply.status == 200
        flood.append(mcp)
    reply, refused = await session_from(ports[1], "127.0.0.3")
    assert reply.status == 503  # none idle past the grace yet: when the first will be
    assert reply.header(b"retry-after") in (b"1", b"2")  # (not the 3 s of its expiry)
    await trio.sleep(1.3)
    reply, alice = await session_from(ports[1], "127.0.0.3")
    assert reply.status == 200
    # the first made room, on both replicas (the maker's copy was dropped by
    # the message the create published)
    assert [(await call_on(ports[0], mcp, 1))[0] for mcp in flood] == [404, 200, 200]
    assert (await call_on(ports[1], flood[0], 2))[0] == 404
    reply, again = await session_from(ports[0], "127.0.0.2")  # two more than alice's one
    assert reply.status == 503
    for mcp in (*flood, refused, alice, again):
        await mcp.client.stream.aclose()


async def test_delete_on_one_replica_ends_the_session_everywhere(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    ports = [await start_replica(replica_app(f"r{i}"), redis.url) for i in (1, 2, 3)]
    mcp = await session_on(ports[0])
    assert await call_on(ports[1], mcp, 1) == (200, "r2")  # (replica 2 keeps a copy now)
    async with await connect(ports[2]) as client:
        await client.send(
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
            + mcp.session.encode()  # type: ignore[union-attr]
            + b"\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n"
        )
        assert (await client.read_reply()).status in (200, 204)
    for port in ports:
        # (replica 2's copy is dropped by the message the DELETE published;
        # within redis_session_cache_s even without it)
        with trio.fail_after(5):
            while (await call_on(port, mcp, 2))[0] != 404:
                await trio.sleep(0.02)
    await mcp.client.stream.aclose()


async def test_redis_ends_an_idle_session(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    config = {"session_idle_timeout_s": 0.4, "event_buffer_age_s": 0.4}
    ports = [await start_replica(replica_app(f"r{i}"), redis.url, **config) for i in (1, 2)]
    mcp = await session_on(ports[0])
    # in use, it lives past the timeout: uses on either replica are written back
    for i in range(6):
        assert (await call_on(ports[i % 2], mcp, i))[0] == 200
        await trio.sleep(0.15)
    # idle, Redis ends it: within the timeout plus the grace of two sweeps
    await trio.sleep(0.4 + 2 * 0.1 + 0.3)
    assert (await call_on(ports[1], mcp, 9))[0] == 404
    assert (await call_on(ports[0], mcp, 10))[0] == 404
    await mcp.client.stream.aclose()


def test_a_password_is_never_part_of_the_url() -> None:
    with pytest.raises(ValueError, match="redis_password"):
        MCPConfig(redis_url="redis://:secret@127.0.0.1:6379/0")
    assert MCPConfig(redis_url="redis://127.0.0.1/0", redis_password="x").redis_password == "x"


async def test_an_unreachable_redis_is_one_startup_error(start_replica: StartReplica) -> None:
    from _support import free_port

    pytest.importorskip("coredis")
    with pytest.raises(StartupError, match="cannot reach Redis"):
        await start_replica(replica_app("r1"), f"redis://127.0.0.1:{free_port()}/0")


def test_redis_without_coredis_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from trio_mcp._mcp._endpoint import MCPEndpoint

    monkeypatch.setitem(sys.modules, "coredis", None)  # (any import of it fails)
    with pytest.raises(StartupError, match=r"pip install 'trio-mcp\[redis\]'") as caught:
        MCPEndpoint(replica_app("r1"), MCPConfig(redis_url="redis://127.0.0.1:6379/0"))
    assert "\n" not in str(caught.value)


def test_the_memory_stores_stay_the_default() -> None:
    from trio_mcp._mcp._endpoint import MCPEndpoint
    from trio_mcp._stores._sessions import MemorySessionStore

    endpoint = MCPEndpoint(replica_app("r1"), MCPConfig())
    assert isinstance(endpoint.stores.sessions, MemorySessionStore)
    assert endpoint.stores.opened is None


async def test_while_redis_is_down_requests_get_503_and_then_work_again(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis(aof=True)
    ports = [await start_replica(replica_app(f"r{i}"), redis.url) for i in (1, 2)]
    mcp = await session_on(ports[0])
    redis.kill()
    status, _ = await call_on(ports[1], mcp, 1)  # (replica 2 has no copy: it must ask)
    assert status == 503
    async with await connect(ports[1]) as client:
        reply = await MCP(client).post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            session=None,
            version=None,
        )
    assert reply.status == 503, reply.body
    assert reply.header(b"retry-after") == b"1"
    await redis.start()
    with trio.fail_after(10):  # (coredis reconnects by itself)
        while (await call_on(ports[1], mcp, 2))[0] != 200:
            await trio.sleep(0.1)
    await mcp.client.stream.aclose()


@pytest.mark.parametrize(
    "principals",
    [
        {b"Bearer alice": "alice", b"Bearer bob": "bob"},  # (str: read back as itself)
        {b"Bearer alice": {"sub": "alice"}, b"Bearer bob": {"sub": "bob"}},  # (by its key)
    ],
)
async def test_a_session_stays_with_its_principal_on_every_replica(
    start_redis: StartRedis, start_replica: StartReplica, principals: dict
) -> None:
    async def authenticate(request: Any) -> object:
        return principals.get(request.header(b"authorization"))

    redis = await start_redis()
    one, two = [
        await start_replica(replica_app(f"r{i}"), redis.url, authenticate=authenticate)
        for i in (1, 2)
    ]
    async with await connect(one) as client:
        reply = await MCP(client).post(
            initialize_body(), extra=[(b"Authorization", b"Bearer alice")]
        )
        assert reply.status == 200
        session = reply.header(b"mcp-session-id").decode()  # type: ignore[union-attr]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    statuses = []
    for token in (b"Bearer bob", b"Bearer alice"):
        async with await connect(two) as client:
            reply = await MCP(client).post(
                ping, session=session, version="2025-11-25", extra=[(b"Authorization", token)]
            )
            statuses.append(reply.status)
    assert statuses == [403, 200]


def test_the_start_up_line_names_the_redis(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from trio_mcp._mcp._startup import announce
    from trio_mcp._trio._server import HTTPServer

    caplog.set_level(logging.INFO, "trio_mcp")
    config = MCPConfig(redis_url="redis://10.0.0.5:6379/2", redis_password="hunter2")
    announce(config, HTTPServer(lambda request: None, config.http))  # (never started)
    (line,) = [r.getMessage() for r in caplog.records if "serving MCP" in r.getMessage()]
    assert "; sessions shared through redis://10.0.0.5:6379/2; build: " in line
    assert "hunter2" not in line


async def test_a_session_found_gone_by_a_read_is_still_reported_to_the_sweep(
    start_redis: StartRedis,
) -> None:
    """A process whose copy went stale read the record, found it gone (ended
    by its TTL, by another replica's DELETE, or making room) and forgot the
    session without reporting it: nothing the process held for it was
    released, and its start time stayed in the metrics' table for good."""
    from trio_mcp._stores._redis import RedisLink
    from trio_mcp._stores._redis_sessions import RedisSessionStore

    redis = await start_redis()
    link = RedisLink(redis.url, "")
    store = RedisSessionStore(link, MCPConfig(), 0.0, str)
    async with link.opened():
        session = await store.create(None, "2025-11-25", {}, {})
        kept = await store.create(None, "2025-11-25", {}, {})
        await link.client.delete([link.session_key(session.id, "s")])  # (gone in Redis)
        store._fresh_until.clear()  # (the copies went stale)
        assert await store.get(session.id) is None
        assert await store.get(kept.id) is not None
        assert await store.expire() == [session.id]
        assert await store.expire() == []  # once
        assert store.count() == 1
