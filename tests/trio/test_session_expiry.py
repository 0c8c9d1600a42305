"""Session idle expiry on the autojump clock: never early, and not much late.

Sessions measure idle time with the clock as of the last sweep (no clock
reading per request), so a request's time stamp can lag by up to one sweep
interval; the session table's grace keeps that from ending a session early.
"""

from __future__ import annotations

import trio
import trio.testing
from _support import Client, initialize_body, mcp_post

from trio_mcp import HTTPServer, MCPConfig, MCPEndpoint, Server, ServerConfig

PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


async def ping(server: HTTPServer, nursery: trio.Nursery, session: str) -> int:
    """The status of one ping on a new connection (idle connections close)."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle_stream, server_stream)
    client = Client(client_stream)
    await client.send(mcp_post(PING, session=session, version="2025-11-25"))
    status = (await client.read_reply()).status
    await client_stream.aclose()
    return status


async def test_an_idle_session_ends_no_earlier_than_its_timeout(nursery, autojump_clock) -> None:
    # 45 s of idle time, swept every 10 s: a request at 9.9 s is stamped with
    # the sweep at 0 s, and without the grace the sweep at 50 s would end the
    # session after 40.1 s of real idle time.
    endpoint = MCPEndpoint(Server("expiry"), MCPConfig(session_idle_timeout_s=45))
    server = HTTPServer(endpoint, ServerConfig())
    async with endpoint.running():
        start = trio.current_time()
        client_stream, server_stream = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle_stream, server_stream)
        client = Client(client_stream)
        await client.send(mcp_post(initialize_body()))
        session = (await client.read_reply()).header(b"mcp-session-id")
        assert session is not None
        await client_stream.aclose()
        await trio.sleep_until(start + 9.9)
        assert await ping(server, nursery, session.decode()) == 200
        await trio.sleep_until(start + 9.9 + 44)  # idle 44 s of the 45 allowed
        assert await ping(server, nursery, session.decode()) == 200
        last = trio.current_time()
        # ended within the timeout, the grace (two sweeps) and one more sweep
        await trio.sleep_until(last + 45 + 2 * 10 + 10 + 1)
        assert await ping(server, nursery, session.decode()) == 404


async def test_a_full_table_ends_an_unused_session_of_a_heavier_client(
    nursery, autojump_clock
) -> None:
    """One principal's sessions filled the table; another's initialize got 503
    until they expired (30 minutes by default). Now the newcomer's takes the
    place of the first one's longest-idle session that has nothing running."""

    async def authenticate(request):
        return request.header(b"authorization")

    config = MCPConfig(max_sessions=3, max_sessions_per_client=3, session_idle_timeout_s=600)
    endpoint = MCPEndpoint(Server("eviction"), config, authenticate=authenticate)
    server = HTTPServer(endpoint, ServerConfig())

    async def initialize(who: bytes) -> tuple[int, bytes | None, bytes | None]:
        client_stream, server_stream = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle_stream, server_stream)
        client = Client(client_stream)
        await client.send(mcp_post(initialize_body(), extra=[(b"authorization", who)]))
        reply = await client.read_reply()
        await client_stream.aclose()
        return reply.status, reply.header(b"mcp-session-id"), reply.header(b"retry-after")

    async def ping_as(who: bytes, session: bytes) -> int:
        client_stream, server_stream = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle_stream, server_stream)
        client = Client(client_stream)
        extra = [(b"authorization", who)]
        await client.send(
            mcp_post(PING, session=session.decode(), version="2025-11-25", extra=extra)
        )
        status = (await client.read_reply()).status
        await client_stream.aclose()
        return status

    async with endpoint.running():
        start = trio.current_time()
        flood = [(await initialize(b"mallory"))[1] for _ in range(3)]
        assert None not in flood
        # the first session's GET stream stays open: it is in use
        listen_stream, server_stream = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle_stream, server_stream)
        listener = Client(listen_stream)
        await listener.send(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Authorization: mallory\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            b"Mcp-Session-Id: " + flood[0] + b"\r\n\r\n"
        )
        await trio.sleep_until(start + 5)
        status, _, retry = await initialize(b"alice")
        assert status == 503  # none idle past the grace (two sweeps of 10 s) yet
        assert retry is not None and int(retry) <= 20  # not the 600 s of an expiry
        await trio.sleep_until(start + 60)
        status, alices, _ = await initialize(b"alice")
        assert status == 200 and alices is not None
        # the longest idle of those not in use gave way: the second
        assert [await ping_as(b"mallory", s) for s in flood] == [200, 404, 200]
        status, _, _ = await initialize(b"mallory")  # two more than alice's one: no more
        assert status == 503
        await trio.sleep_until(start + 75)  # a sweep released what it held
        assert endpoint.statistics().sessions == 3
        await listen_stream.aclose()
