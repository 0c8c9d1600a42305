"""GET stream keepalives on the autojump clock: every 15 s, no wall time spent,
written by the stream's task, or, while the endpoint runs, by its one
keepalive task."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from _support import Client, initialize_body, mcp_post

from trio_mcp import HTTPServer, MCPConfig, MCPEndpoint, Server, ServerConfig


@pytest.mark.parametrize("running", [False, True])
@pytest.mark.parametrize("interval", [15.0, 2.5])
async def test_keepalive_comments_at_the_configured_interval(
    nursery, autojump_clock, interval, running
) -> None:
    config = MCPConfig(keepalive_s=interval) if interval != 15.0 else MCPConfig()
    endpoint = MCPEndpoint(Server("k"), config)
    if running:
        await nursery.start(endpoint.broadcaster.keepalives.run)
    server = HTTPServer(endpoint, ServerConfig())
    client_stream, server_stream = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle_stream, server_stream)
    nursery.start_soon(server.enforce_timeouts)
    client = Client(client_stream)
    await client.send(mcp_post(initialize_body()))
    session = (await client.read_reply()).header(b"mcp-session-id")
    await client.send(
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: " + session + b"\r\n\r\n"
    )
    start = trio.current_time()
    times: list[float] = []
    received = b""
    while len(times) < 4:
        data = await client_stream.receive_some(65536)
        received += data
        times.extend(trio.current_time() - start for _ in range(data.count(b": keepalive")))
    assert times == pytest.approx([interval * n for n in (1, 2, 3, 4)], abs=0.01)
    # (while it runs, the endpoint's keepalive task writes them)
    assert len(endpoint.broadcaster.keepalives._due) == running
    assert b"text/event-stream" in received
    # 60 s of streaming outlived the 30 s idle timeout: streams are not idle connections
