"""A request still running after ``request_timeout_s`` ends with an error
answer (-32603), whatever its era and wherever its answer goes: a JSON body,
the last event of its SSE stream, a 2025 session's event buffer for a resume,
the HTTP+SSE stream. The session, and every other client, goes on."""

from __future__ import annotations

import orjson
import trio
from _support import (
    MCP,
    EventReader,
    connect,
    mcp_post,
    modern_body,
    modern_headers,
    open_http_sse,
    post_message,
    sse_messages,
)
from _support import tool_call as call

from trio_mcp import Context, Server

LIMIT = 0.4
#: So that the server's sweeper ticks every 0.1 s.
QUICK_TICKS = {"write_timeout_s": 0.8}


def hanging_app() -> Server:
    app = Server("hanging")

    @app.tool()
    async def hang() -> str:
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    @app.tool()
    async def hang_after_progress(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    @app.tool()
    async def quick() -> str:
        return "done"

    return app


def assert_late(answer: dict, id: int) -> None:
    assert answer["id"] == id, answer
    assert answer["error"]["code"] == -32603
    assert f"took over {LIMIT} s" in answer["error"]["message"]


async def start(start_mcp, **config: object):
    return await start_mcp(hanging_app(), request_timeout_s=LIMIT, http=QUICK_TICKS, **config)


async def test_a_session_request_past_the_deadline_gets_an_error(start_mcp) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        started = trio.current_time()
        reply = await mcp.post(call("hang", 2))
        assert trio.current_time() - started >= LIMIT
        assert reply.status == 200
        assert_late(orjson.loads(reply.body), 2)
    async with await connect(server.ports[0]) as client:  # the session goes on
        again = MCP(client)
        again.session, again.version = mcp.session, mcp.version
        assert (await again.call("tools/call", {"name": "quick", "arguments": {}}))["result"]


async def test_a_2026_request_past_the_deadline_gets_an_error(start_mcp) -> None:
    server = await start(start_mcp)
    body = modern_body("tools/call", {"name": "hang", "arguments": {}}, id=3)
    async with await connect(server.ports[0]) as client:
        await client.send(mcp_post(body, version="2026-07-28", extra=modern_headers(body)))
        with trio.fail_after(5):
            reply = await client.read_reply()
    assert reply.status == 200  # (a -32603 answer is a 200 on 2026-07-28 too)
    assert_late(orjson.loads(reply.body), 3)


async def test_a_stateless_request_past_the_deadline_gets_an_error(start_mcp) -> None:
    server = await start(start_mcp, stateless=True)
    async with await connect(server.ports[0]) as client:
        await client.send(mcp_post(call("hang", 4), version="2025-11-25"))
        with trio.fail_after(5):
            reply = await client.read_reply()
    assert reply.status == 200
    assert_late(orjson.loads(reply.body), 4)


async def test_a_streamed_answer_past_the_deadline_ends_with_the_error(start_mcp) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        reply = await mcp.post(call("hang_after_progress", 5, progress=True))
    assert reply.header(b"content-type") == b"text/event-stream"
    progress, answer = sse_messages(reply.body)
    assert progress["method"] == "notifications/progress"  # type: ignore[index]
    assert_late(answer, 5)  # type: ignore[arg-type]


async def test_a_vanished_clients_late_error_waits_for_its_resume(start_mcp) -> None:
    """A 2025 session's request goes on when its client goes; its late error
    is kept with its stream's events, for the GET that resumes it."""
    server = await start(start_mcp)
    port = server.ports[0]
    async with await connect(port) as client:
        mcp = MCP(client)
        await mcp.initialize()
        async with await connect(port) as caller:
            reader = EventReader(caller)
            post = mcp_post(
                call("hang_after_progress", 6, progress=True),
                session=mcp.session,
                version=mcp.version,
            )
            assert (await reader.head(post)).status_code == 200
            event_id, message = await reader.message()
            assert message["method"] == "notifications/progress"
        await trio.sleep(LIMIT + 1.0)  # gone before its deadline, which passes meanwhile
        resume = EventReader(client)
        get = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\nLast-Event-ID: %s\r\n\r\n"
            % (mcp.session.encode(), mcp.version.encode(), event_id.encode())
        )
        assert (await resume.head(get)).status_code == 200
        with trio.fail_after(5):
            _, answer = await resume.message()
    assert_late(answer, 6)


async def test_a_batch_past_the_deadline_answers_every_request(start_mcp) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize("2025-03-26")
        batch = [call("quick", 1), call("hang", 2), call("hang", 3)]
        reply = await mcp.post(batch)
    first, second, third = orjson.loads(reply.body)
    assert first["result"]["content"][0]["text"] == "done"
    assert_late(second, 2)
    assert_late(third, 3)  # (never run: the POST's time was up)


async def test_an_http_sse_request_past_the_deadline_gets_an_error(start_mcp) -> None:
    server = await start(start_mcp)
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port)
    async with client:
        await post_message(port, endpoint, call("hang", 2))
        with trio.fail_after(5):
            _, answer = await reader.message()
    assert_late(answer, 2)


async def test_a_stream_that_is_no_request_has_no_deadline(start_mcp) -> None:
    """A GET stream lives past request_timeout_s (only requests are timed)."""
    server = await start(start_mcp, keepalive_s=0.2)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        async with await connect(server.ports[0]) as listening:
            reader = EventReader(listening)
            get = (
                b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n\r\n"
                % (mcp.session.encode(), mcp.version.encode())
            )
            assert (await reader.head(get)).status_code == 200
            with trio.move_on_after(LIMIT * 4):
                while True:
                    await reader.event()  # keep-alive comments; EOFError if it ended
            assert not reader.ended
