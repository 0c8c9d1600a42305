"""Every way a session ends frees all it held: its event buffers, streams,
running requests, requests to its client, and its entries in every store
(`MCPEndpoint.statistics` back to zero)."""

from __future__ import annotations

import trio
from _support import (
    MCP,
    EventReader,
    connect,
    initialize_body,
    mcp_post,
    open_http_sse,
    post_message,
)

from trio_mcp import Context, MCPStatistics, Server

NOTHING = MCPStatistics(0, 0, 0, 0, 0, 0, 0, 0, 0)


def holding_app() -> Server:
    """Tools that leave events to resume, and one that waits on its client."""
    app = Server("holding")

    @app.tool()
    async def chatty(ctx: Context) -> str:
        for step in range(3):
            await ctx.report_progress(step, 3)
        return "said"

    @app.tool()
    async def ask(ctx: Context) -> str:
        await ctx.list_roots()
        return "answered"

    @app.resource("demo://watched")
    def watched() -> str:
        return "content"

    return app


def tool_call(name: str, id: int, progress: bool = False) -> dict:
    params: dict = {"name": name, "arguments": {}}
    if progress:
        params["_meta"] = {"progressToken": f"p{id}"}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


async def settled(server, check=lambda s: s == NOTHING) -> MCPStatistics:
    """The endpoint's statistics once `check` holds for them (5 s at most)."""
    with trio.move_on_after(5):
        while not check(server.handler.statistics()):
            await trio.sleep(0.02)
    return server.handler.statistics()


async def holding_session(port: int) -> tuple[MCP, list]:
    """A 2025-11-25 session holding one of everything; its open connections."""
    mcp = MCP(await connect(port))
    body = initialize_body()
    body["params"]["capabilities"] = {"roots": {}}
    reply = await mcp.post(body, session=None, version=None)
    mcp.session, mcp.version = reply.header(b"mcp-session-id").decode(), "2025-11-25"
    assert (await mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    said = await mcp.call("tools/call", tool_call("chatty", 2, progress=True)["params"], id=2)
    assert said["result"]["content"][0]["text"] == "said"  # (its events stay buffered)
    subscribe = {"uri": "demo://watched"}
    assert (await mcp.call("resources/subscribe", subscribe, id=3))["result"] == {}
    stream = EventReader(await connect(port))
    get = (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"Mcp-Session-Id: " + mcp.session.encode() + b"\r\n\r\n"
    )
    assert (await stream.head(get)).status_code == 200
    asking = EventReader(await connect(port))
    head = await asking.head(
        mcp_post(tool_call("ask", 4), session=mcp.session, version=mcp.version)
    )
    assert head.status_code == 200
    _, asked = await asking.message()
    assert asked["method"] == "roots/list"
    return mcp, [mcp.client, stream.client, asking.client]


async def close_all(clients) -> None:
    for client in clients:
        await client.stream.aclose()


async def test_delete_frees_everything(start_mcp) -> None:
    server = await start_mcp(holding_app())
    mcp, clients = await holding_session(server.ports[0])
    held = server.handler.statistics()
    assert held.sessions == 1 and held.buffered_bytes > 0 and held.streams == 1
    assert held.requests_running == 1 and held.client_requests_waiting == 1
    await mcp.client.send(
        b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
        + mcp.session.encode()
        + b"\r\n\r\n"
    )
    assert (await mcp.client.read_reply()).status == 200
    assert await settled(server) == NOTHING
    await close_all(clients)


async def test_idle_expiry_frees_everything(start_mcp) -> None:
    server = await start_mcp(
        holding_app(), session_idle_timeout_s=0.4, client_request_timeout_s=0.3
    )
    _, clients = await holding_session(server.ports[0])
    # A stream or a running request keeps a session alive: the stream goes,
    # and the request (which outlives its client) ends when its wait does.
    await close_all(clients[1:])
    assert await settled(server) == NOTHING
    await close_all(clients[:1])


async def test_the_end_of_an_http_sse_stream_frees_everything(start_mcp) -> None:
    server = await start_mcp(holding_app())
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port, {"roots": {}})
    await post_message(port, endpoint, tool_call("ask", 2))
    _, asked = await reader.message()
    assert asked["method"] == "roots/list"
    held = server.handler.statistics()
    assert held.sessions == held.streams == held.http_sse_answering == 1
    assert held.client_requests_waiting == 1
    await client.stream.aclose()
    assert await settled(server) == NOTHING


async def test_a_drain_frees_the_http_sse_sessions(start_mcp) -> None:
    server = await start_mcp(holding_app())
    client, _, _ = await open_http_sse(server.ports[0])
    assert server.handler.statistics().sessions == 1
    server.handler.listener_closed()
    assert await settled(server) == NOTHING
    await client.stream.aclose()
