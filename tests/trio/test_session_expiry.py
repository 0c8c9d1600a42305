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
