"""A request whose handler has sent nothing for ``stream_slow_answers_after_s``
(10 s by default) gets an SSE answer: its head and a keepalive comment then,
a comment every ``keepalive_s`` after, and its answer as the last event (with
an event id kept for resumption in a 2025 session). Quick answers stay one
JSON object; ``json_response_only`` and None keep JSON however long a call
takes. On the autojump clock: the 12 s tool costs no wall time.
"""

from __future__ import annotations

import h11
import orjson
import pytest
import trio
from _support import (
    MCP,
    EventReader,
    connect,
    mcp_post,
    modern_body,
    modern_headers,
)

from trio_mcp import Context, Server

KEEPALIVE_S = 1.0


def slow_app(cancelled: trio.Event | None = None) -> Server:
    app = Server("slow")

    @app.tool()
    async def index_forever() -> str:
        try:
            await trio.sleep_forever()
        finally:
            if cancelled is not None:
                cancelled.set()
        return "never"  # pragma: no cover

    @app.tool()
    async def index(seconds: int) -> str:
        """A call that takes `seconds` and sends nothing meanwhile."""
        await trio.sleep(seconds)
        return f"indexed in {seconds} s"

    @app.tool()
    async def quiet_then_progress(ctx: Context) -> str:
        await trio.sleep(11)
        await ctx.report_progress(1, 2)
        await trio.sleep(1)
        return "done"

    @app.tool()
    async def quiet_then_close(ctx: Context) -> str:
        await trio.sleep(11)
        await ctx.close_sse_stream()  # (SEP-1699: the client resumes for the rest)
        await trio.sleep(1)
        return "done"

    @app.tool()
    async def progress_then_quiet(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await trio.sleep(30)
        return "done"

    return app


def call(seconds: float, id: int = 2) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "index", "arguments": {"seconds": seconds}},
    }


def modern_call_body(seconds: float, id: int = 3) -> dict:
    return modern_body("tools/call", {"name": "index", "arguments": {"seconds": seconds}}, id=id)


async def start(start_mcp, cancelled: trio.Event | None = None, **config: object):
    config.setdefault("keepalive_s", KEEPALIVE_S)
    return await start_mcp(slow_app(cancelled), **config)


class Streamed:
    """An SSE answer read event by event, with when its head came."""

    def __init__(self, head: h11.Response, head_at: float, events: list[tuple]) -> None:
        self.head = head
        self.head_at = head_at
        #: (id, data, raw, time) of every event and comment, in order.
        self.events = events

    @property
    def comments(self) -> list[bytes]:
        return [raw for _, data, raw, _ in self.events if raw.startswith(b":")]

    @property
    def last(self) -> tuple[str | None, dict]:
        event_id, data, _, _ = self.events[-1]
        return event_id, orjson.loads(data)


async def read_streamed(client, request: bytes) -> Streamed:
    """Send `request` and read its SSE answer to the end."""
    reader = EventReader(client)
    started = trio.current_time()
    with trio.fail_after(60):
        head = await reader.head(request)
        head_at = trio.current_time() - started
        events = []
        while True:
            try:
                event_id, data, raw = await reader.event()
            except EOFError:
                break
            events.append((event_id, data, raw, trio.current_time() - started))
    return Streamed(head, head_at, events)


def header(head: h11.Response, name: bytes) -> bytes | None:
    return dict(head.headers).get(name)


def assert_kept_alive(answer: Streamed, after_s: float = 10.0) -> None:
    """The head came at `after_s` (up to two sweeper ticks late), as an SSE
    stream opened by a comment, with comments every KEEPALIVE_S until the answer."""
    assert answer.head.status_code == 200
    assert header(answer.head, b"content-type") == b"text/event-stream"
    assert after_s <= answer.head_at <= after_s + 1.0, answer.head_at
    assert answer.events[0][2] == b": keepalive"
    # 12 s - 10 s: the first comment, then one a second
    assert len(answer.comments) >= 2, answer.events
    for (_, _, _, before), (_, _, _, after) in zip(answer.events, answer.events[1:], strict=False):
        assert after - before <= KEEPALIVE_S + 0.01


async def test_a_slow_session_call_becomes_a_stream_with_keepalives(
    start_mcp, autojump_clock
) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        request = mcp_post(call(12), session=mcp.session, version=mcp.version)
        answer = await read_streamed(client, request)
    assert_kept_alive(answer)
    priming = [e for e in answer.events if e[0] is not None and not e[1]]
    assert len(priming) == 1  # (2025-11-25: an id to resume from, before anything else)
    event_id, message = answer.last
    assert message == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"content": [{"type": "text", "text": "indexed in 12 s"}]},
    }
    assert event_id is not None and event_id != priming[0][0]  # (an event of the stream)
    assert 12 <= answer.events[-1][3] < 13


async def test_a_slow_2026_call_becomes_a_stream_with_keepalives(start_mcp, autojump_clock) -> None:
    server = await start(start_mcp)
    body = modern_call_body(12)
    async with await connect(server.ports[0]) as client:
        request = mcp_post(body, version="2026-07-28", extra=modern_headers(body))
        answer = await read_streamed(client, request)
    assert_kept_alive(answer)
    assert all(event_id is None for event_id, *_ in answer.events)  # (no ids in 2026)
    _, message = answer.last
    assert message["id"] == 3
    assert message["result"]["content"][0]["text"] == "indexed in 12 s"
    assert message["result"]["resultType"] == "complete"


async def test_a_slow_stateless_call_becomes_a_stream(start_mcp, autojump_clock) -> None:
    server = await start(start_mcp, stateless=True)
    async with await connect(server.ports[0]) as client:
        answer = await read_streamed(client, mcp_post(call(12), version="2025-11-25"))
    assert_kept_alive(answer)
    assert answer.last[1]["result"]["content"][0]["text"] == "indexed in 12 s"


async def test_the_time_is_a_setting(start_mcp, autojump_clock) -> None:
    server = await start(start_mcp, stream_slow_answers_after_s=3.0)
    body = modern_call_body(5)
    async with await connect(server.ports[0]) as client:
        request = mcp_post(body, version="2026-07-28", extra=modern_headers(body))
        answer = await read_streamed(client, request)
    assert_kept_alive(answer, after_s=3.0)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_quick_call_stays_one_json_object(start_mcp, autojump_clock, era) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        if era == "2026-07-28":
            body = modern_call_body(9)
            await client.send(mcp_post(body, version=era, extra=modern_headers(body)))
        else:
            mcp = MCP(client)
            await mcp.initialize()
            await client.send(mcp_post(call(9), session=mcp.session, version=mcp.version))
        with trio.fail_after(60):
            reply = await client.read_reply()
    assert reply.header(b"content-type") == b"application/json"
    assert orjson.loads(reply.body)["result"]["content"][0]["text"] == "indexed in 9 s"


@pytest.mark.parametrize(
    "config",
    [{"json_response_only": True}, {"stream_slow_answers_after_s": None}],
    ids=["json_response_only", "off"],
)
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_json_only_settings_keep_a_slow_call_json(
    start_mcp, autojump_clock, era, config
) -> None:
    server = await start(start_mcp, **config)
    async with await connect(server.ports[0]) as client:
        if era == "2026-07-28":
            body = modern_call_body(12)
            await client.send(mcp_post(body, version=era, extra=modern_headers(body)))
        else:
            mcp = MCP(client)
            await mcp.initialize()
            await client.send(mcp_post(call(12), session=mcp.session, version=mcp.version))
        started = trio.current_time()
        with trio.fail_after(60):
            reply = await client.read_reply()
    assert trio.current_time() - started >= 12  # (nothing before the answer)
    assert reply.header(b"content-type") == b"application/json"
    assert orjson.loads(reply.body)["result"]["content"][0]["text"] == "indexed in 12 s"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_client_that_accepts_only_json_never_gets_a_stream(
    start_mcp, autojump_clock, era
) -> None:
    """The rule streams only for clients that accept text/event-stream: the
    endpoint admits no POST whose Accept lacks it (406, before anything runs)."""
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        body = modern_call_body(12) if era == "2026-07-28" else call(12)
        extra = modern_headers(body) if era == "2026-07-28" else None
        await client.send(mcp_post(body, version=era, accept=b"application/json", extra=extra))
        with trio.fail_after(1):
            reply = await client.read_reply()
    assert reply.status == 406
    assert reply.header(b"content-type") != b"text/event-stream"


async def test_a_stream_gone_quiet_is_kept_alive_too(start_mcp, autojump_clock) -> None:
    """A handler that sent progress, then nothing: its open stream gets the
    keepalives from the same moment on."""
    server = await start(start_mcp, request_timeout_s=20.0)
    body = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "progress_then_quiet", "arguments": {}, "_meta": {"progressToken": 1}},
    }
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        answer = await read_streamed(
            client, mcp_post(body, session=mcp.session, version=mcp.version)
        )
    assert answer.head_at < 1
    quiet = [t for _, _, raw, t in answer.events if raw.startswith(b":")]
    assert quiet and 10 <= quiet[0] <= 11 + KEEPALIVE_S
    assert len(quiet) >= 8  # 10 s to 20 s, one a second
    _, message = answer.last  # ended by request_timeout_s, as the stream's last event
    assert message["id"] == 4 and message["error"]["code"] == -32603


async def test_a_client_that_lost_the_stream_resumes_it(start_mcp, autojump_clock) -> None:
    """The slow call's stream is a POST stream like any: its client leaves after
    the priming event and gets the answer with GET and Last-Event-ID."""
    server = await start(start_mcp)
    port = server.ports[0]
    async with await connect(port) as client:
        mcp = MCP(client)
        await mcp.initialize()
        async with await connect(port) as caller:
            reader = EventReader(caller)
            post = mcp_post(call(12), session=mcp.session, version=mcp.version)
            with trio.fail_after(20):
                assert (await reader.head(post)).status_code == 200
                while True:
                    event_id, data, _ = await reader.event()
                    if event_id is not None:
                        break
        assert data == b""  # the priming event; the caller hangs up
        get = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\nLast-Event-ID: %s\r\n\r\n"
            % (mcp.session.encode(), mcp.version.encode(), event_id.encode())
        )
        resume = EventReader(client)
        with trio.fail_after(20):
            assert (await resume.head(get)).status_code == 200
            answer_id, answer = await resume.message()
    assert answer["id"] == 2
    assert answer["result"]["content"][0]["text"] == "indexed in 12 s"
    assert answer_id != event_id


def session_call(name: str, id: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": {"progressToken": 1}},
    }


async def test_messages_after_the_keepalives_began_go_in_order(start_mcp, autojump_clock) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        answer = await read_streamed(
            client,
            mcp_post(
                session_call("quiet_then_progress", 5), session=mcp.session, version=mcp.version
            ),
        )
    assert_kept_alive(answer)
    messages = [(event_id, orjson.loads(data)) for event_id, data, _, _ in answer.events if data]
    (progress_id, progress), (answer_id, final) = messages
    assert progress["method"] == "notifications/progress"
    assert final["id"] == 5 and final["result"]["content"][0]["text"] == "done"
    assert progress_id is not None and answer_id is not None
    assert int(progress_id.rsplit("-", 1)[-1]) < int(answer_id.rsplit("-", 1)[-1])


async def test_a_kept_alive_stream_closed_by_its_handler_is_resumed(
    start_mcp, autojump_clock
) -> None:
    """ctx.close_sse_stream() on a stream the keepalives opened: the POST ends
    after a priming event, and GET with its id brings the answer."""
    server = await start(start_mcp)
    port = server.ports[0]
    async with await connect(port) as client:
        mcp = MCP(client)
        await mcp.initialize()
        async with await connect(port) as caller:
            answer = await read_streamed(
                caller,
                mcp_post(
                    session_call("quiet_then_close", 6), session=mcp.session, version=mcp.version
                ),
            )
        assert 10 <= answer.head_at <= 11 and answer.events[0][2] == b": keepalive"
        assert not any(data for _, data, _, _ in answer.events)  # (no message: closed first)
        last_id = [event_id for event_id, *_ in answer.events if event_id is not None][-1]
        get = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\nLast-Event-ID: %s\r\n\r\n"
            % (mcp.session.encode(), mcp.version.encode(), last_id.encode())
        )
        resume = EventReader(client)
        with trio.fail_after(20):
            assert (await resume.head(get)).status_code == 200
            _, final = await resume.message()
    assert final["id"] == 6 and final["result"]["content"][0]["text"] == "done"


async def test_a_slow_batch_becomes_a_stream_ending_with_its_answers(
    start_mcp, autojump_clock
) -> None:
    server = await start(start_mcp)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize("2025-03-26")
        request = mcp_post(
            [call(1, id=1), call(12, id=2)], session=mcp.session, version=mcp.version
        )
        answer = await read_streamed(client, request)
    assert_kept_alive(answer)
    _, answers = answer.last
    assert [a["id"] for a in answers] == [1, 2]  # type: ignore[index]


async def test_a_2026_client_that_leaves_a_kept_alive_call_cancels_it(
    start_mcp, autojump_clock
) -> None:
    cancelled = trio.Event()
    server = await start(start_mcp, cancelled)
    body = modern_body("tools/call", {"name": "index_forever", "arguments": {}}, id=7)
    async with await connect(server.ports[0]) as client:
        reader = EventReader(client)
        with trio.fail_after(20):
            head = await reader.head(
                mcp_post(body, version="2026-07-28", extra=modern_headers(body))
            )
            assert header(head, b"content-type") == b"text/event-stream"
            assert (await reader.event())[2] == b": keepalive"
    with trio.fail_after(5):
        await cancelled.wait()  # (the client closed the stream: SEP-2575)
