"""Server-initiated traffic over real sockets: GET streams, notifications, resumption."""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import EventReader, connect, initialize_body, mcp_post

from trio_mcp import Context, Server
from trio_mcp._errors import EventsLost
from trio_mcp._protocol._events import EVENT_OVERHEAD, LOSSES_KEPT, EventLimits
from trio_mcp._stores._events import MemoryEventStore


async def open_session(port: int, capabilities: dict | None = None) -> str:
    body = initialize_body()
    if capabilities is not None:
        body["params"]["capabilities"] = capabilities
    async with await connect(port) as client:
        await client.send(mcp_post(body))
        reply = await client.read_reply()
        session = reply.header(b"mcp-session-id").decode()
        await client.send(
            mcp_post(
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                session=session,
                version="2025-11-25",
            )
        )
        assert (await client.read_reply()).status == 202
    return session


def get_request(
    session: str | None, last_event_id: str | None = None, accept: bytes = b"text/event-stream"
) -> bytes:
    lines = [
        b"GET /mcp HTTP/1.1",
        b"Host: 127.0.0.1",
        b"Accept: " + accept,
        b"MCP-Protocol-Version: 2025-11-25",
    ]
    if session is not None:
        lines.append(b"Mcp-Session-Id: " + session.encode())
    if last_event_id is not None:
        lines.append(b"Last-Event-ID: " + last_event_id.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def post_and_read(port: int, body: dict, session: str) -> dict:
    async with await connect(port) as client:
        await client.send(mcp_post(body, session=session, version="2025-11-25"))
        reply = await client.read_reply()
        return orjson.loads(reply.body) if reply.body else {}


def notifying_app() -> Server:
    app = Server("notify")

    @app.tool()
    async def noop() -> str:
        return "ok"

    @app.resource("test://doc")
    async def doc() -> str:
        return "doc"

    return app


async def _drain(reader: EventReader) -> None:
    while True:
        await reader.event()


# ---- the GET stream ------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "accept", "status"),
    [
        (None, b"text/event-stream", 400),
        ("f" * 32, b"text/event-stream", 404),
        ("real", b"application/json", 406),
    ],
)
async def test_get_needs_a_session_and_event_stream_accept(
    mcp_port: int, session, accept, status
) -> None:
    if session == "real":
        session = await open_session(mcp_port)
    async with await connect(mcp_port) as client:
        await client.send(get_request(session, accept=accept))
        assert (await client.read_reply()).status == status


async def test_get_stream_headers_priming_and_409(mcp_port: int) -> None:
    session = await open_session(mcp_port)
    async with await connect(mcp_port) as c1, await connect(mcp_port) as c2:
        reader = EventReader(c1)
        with trio.fail_after(10):
            head = await reader.head(get_request(session))
            headers = dict(head.headers)
            assert head.status_code == 200
            assert headers[b"content-type"] == b"text/event-stream"
            assert headers[b"cache-control"] == b"no-cache"
            assert headers[b"x-accel-buffering"] == b"no"
            event_id, data, raw = await reader.event()  # priming: an id, empty data, retry
            assert event_id is not None and data == b""
            assert b"retry: " in raw
            await c2.send(get_request(session))
            assert (await c2.read_reply()).status == 409


async def test_keepalives_and_a_dead_socket_frees_the_slot(start_mcp) -> None:
    server = await start_mcp(keepalive_s=0.1)
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            await reader.head(get_request(session))
            comments = 0
            while comments < 2:
                _, _, raw = await reader.event()
                if raw.startswith(b":"):
                    comments += 1
        # c1 is gone; the next keepalive write fails and frees the slot
        while True:
            async with await connect(port) as c2:
                reader = EventReader(c2)
                head = await reader.head(get_request(session))
                if head.status_code == 200:
                    break
            await trio.sleep(0.05)


async def test_a_client_closing_its_get_stream_frees_the_slot_at_once(start_mcp) -> None:
    """The server watches an idle stream's socket: no keepalive (15 s) is needed
    to notice the close, so a new GET stream of the session is accepted at once."""
    server = await start_mcp()  # keepalive_s: the default 15 s
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(5):
        async with await connect(port) as c1:
            await EventReader(c1).head(get_request(session))
        attempts = 0
        while True:
            attempts += 1
            async with await connect(port) as c2:
                head = await EventReader(c2).head(get_request(session))
                if head.status_code == 200:
                    break
                assert head.status_code == 409
            await trio.sleep(0.01)
    assert attempts < 100


async def test_delete_closes_the_get_stream(mcp_port: int) -> None:
    session = await open_session(mcp_port)
    async with await connect(mcp_port) as c1, await connect(mcp_port) as c2:
        reader = EventReader(c1)
        with trio.fail_after(10):
            await reader.head(get_request(session))
            await c2.send(
                b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
                + session.encode()
                + b"\r\n\r\n"
            )
            assert (await c2.read_reply()).status == 200
            with pytest.raises(EOFError):
                await _drain(reader)


# ---- notifications --------------------------------------------------------------


async def test_notifications_reach_the_get_streams_of_interested_sessions(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app)
    port = server.ports[0]
    subscribed = await open_session(port)
    other = await open_session(port)
    await post_and_read(
        port,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/subscribe",
            "params": {"uri": "test://doc"},
        },
        subscribed,
    )
    await post_and_read(
        port,
        {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "error"}},
        other,
    )
    async with await connect(port) as c1, await connect(port) as c2:
        readers = {subscribed: EventReader(c1), other: EventReader(c2)}
        with trio.fail_after(10):
            for session, reader in readers.items():
                await reader.head(get_request(session))
                await reader.event()  # priming
            app.notify_resource_updated("test://doc")
            app.log("info", "just so you know")
            app.notify_prompts_changed()

            async def noop() -> str:
                return "new"

            app.add_tool(noop, name="added_at_run_time")
            got = [(await readers[subscribed].message())[1]["method"] for _ in range(4)]
            assert got == [
                "notifications/resources/updated",
                "notifications/message",
                "notifications/prompts/list_changed",
                "notifications/tools/list_changed",
            ]
            # the other session: not subscribed, log level error
            got = [(await readers[other].message())[1]["method"] for _ in range(2)]
            assert got == ["notifications/prompts/list_changed", "notifications/tools/list_changed"]


# ---- resumption -----------------------------------------------------------------


async def test_get_stream_resumes_with_exactly_the_missed_events(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app)
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            await reader.head(get_request(session))
            await reader.event()
            app.log("info", 1)
            last_id, first = await reader.message()
            assert first["params"]["data"] == 1
        # disconnected: these wait in the buffer
        for n in (2, 3, 4):
            app.log("info", n)
        await trio.sleep(0.1)
        async with await connect(port) as c2:
            reader = EventReader(c2)
            head = await reader.head(get_request(session, last_event_id=last_id))
            assert head.status_code == 200
            ids, values = [], []
            for _ in range(3):
                event_id, message = await reader.message()
                ids.append(event_id)
                values.append(message["params"]["data"])
            assert values == [2, 3, 4]
            assert len(set(ids)) == 3 and last_id not in ids
            app.log("info", 5)  # and the stream goes on live
            assert (await reader.message())[1]["params"]["data"] == 5


async def test_a_resume_takes_over_a_get_stream_the_server_still_holds(start_mcp) -> None:
    """A client whose GET stream's connection died where the server cannot see
    it yet (a dead socket is found when a write fails) resumes with
    Last-Event-ID: it is answered at once, not 409 (which the official clients
    retry only twice, a second apart, then go without a stream), gets what it
    missed, and the stream the server held ends."""
    app = notifying_app()
    server = await start_mcp(app)
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as c1, await connect(port) as c2:
            old = EventReader(c1)
            await old.head(get_request(session))
            app.log("info", 1)
            last_id, _ = await old.message()
            app.log("info", 2)  # (sent on c1, which the client has lost)
            assert (await old.message())[1]["params"]["data"] == 2
            resumed = EventReader(c2)
            head = await resumed.head(get_request(session, last_event_id=last_id))
            assert head.status_code == 200
            assert (await resumed.message())[1]["params"]["data"] == 2
            with pytest.raises(EOFError):
                await _drain(old)
            app.log("info", 3)
            assert (await resumed.message())[1]["params"]["data"] == 3
            # a new stream (no Last-Event-ID) beside it is still refused
            async with await connect(port) as c3:
                await c3.send(get_request(session))
                assert (await c3.read_reply()).status == 409


async def test_post_stream_closed_mid_call_is_resumed_to_the_end(start_mcp) -> None:
    app = Server("resume")
    release = trio.Event()

    @app.tool()
    async def long_call(ctx: Context) -> str:
        await ctx.report_progress(1, 3)
        await ctx.close_sse_stream()
        await ctx.report_progress(2, 3)
        await release.wait()
        await ctx.report_progress(3, 3)
        return "done"

    server = await start_mcp(app)
    port = server.ports[0]
    session = await open_session(port)
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "long_call", "_meta": {"progressToken": "t"}},
    }
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            head = await reader.head(mcp_post(call, session=session, version="2025-11-25"))
            assert dict(head.headers)[b"content-type"] == b"text/event-stream"
            seen_ids = []
            last_id = None
            try:
                while True:
                    event_id, data, _ = await reader.event()
                    seen_ids.append(event_id)
                    last_id = event_id
                    if data:
                        assert orjson.loads(data)["params"]["progress"] == 1
            except EOFError:
                pass
            assert last_id is not None  # the server sent an id (and retry) before closing
        async with await connect(port) as c2:
            reader = EventReader(c2)
            head = await reader.head(get_request(session, last_event_id=last_id))
            assert head.status_code == 200
            _, second = await reader.message()
            assert second["params"]["progress"] == 2
            release.set()
            _, third = await reader.message()
            assert third["params"]["progress"] == 3
            _, final = await reader.message()
            assert final == {
                "jsonrpc": "2.0",
                "id": 9,
                "result": {"content": [{"type": "text", "text": "done"}]},
            }
            with pytest.raises(EOFError):
                await reader.event()  # the resumed stream ends with the response


async def test_an_event_id_of_another_session_is_refused(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app)
    port = server.ports[0]
    mine, theirs = await open_session(port), await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            await reader.head(get_request(theirs))
            their_id, _, _ = await reader.event()
        async with await connect(port) as c2:
            await c2.send(get_request(mine, last_event_id=their_id))
            assert (await c2.read_reply()).status == 400
        async with await connect(port) as c3:
            await c3.send(get_request(mine, last_event_id="garbage"))
            assert (await c3.read_reply()).status == 400


# ---- the event store --------------------------------------------------------------


async def test_event_buffers_are_bounded_by_count_bytes_and_age() -> None:
    store = MemoryEventStore(EventLimits(max_events=3, max_bytes=10, max_age_s=60))
    first = await store.append("s", 1, b"a", now=0)
    for i in range(5):
        await store.append("s", 1, b"b", now=i)
    with pytest.raises(EventsLost):  # the count bound dropped "a" and two "b"s
        await store.replay("s", first, now=5)
    assert store.buffered_bytes() == 3
    await store.append("s", 2, b"x" * 8, now=5)
    big = await store.append("s", 2, b"y" * 8, now=5)
    assert store.buffered_bytes() <= 3 + 10
    found = await store.replay("s", big, now=5)
    assert found == (2, [])
    old = await store.append("s", 3, b"old", now=0)
    await store.append("s", 3, b"new", now=100)  # age bound drops "old" on append
    found = await store.replay("s", old, now=100)  # (nothing after "old" was lost)
    assert found is not None and [e.data for e in found[1]] == [b"new"]
    expiring = await store.append("s", 4, b"first", now=100)
    await store.append("s", 4, b"second", now=100)
    with pytest.raises(EventsLost):  # "second" expired before the sweep dropped it
        await store.replay("s", expiring, now=161)


async def test_a_session_keeps_its_newest_streams_within_its_memory_bound() -> None:
    """Every SSE answer opens a stream: a busy session must not keep them all."""
    per_stream = 3 * (10 + EVENT_OVERHEAD)  # three 10-byte events
    store = MemoryEventStore(EventLimits(max_session_bytes=4 * per_stream))
    firsts = []
    for stream in range(1, 11):
        firsts.append(await store.append("s", stream, b"0123456789", now=0))
        await store.append("s", stream, b"0123456789", now=0)
        await store.append("s", stream, b"0123456789", now=0)
    for first in firsts[:6]:  # older streams are gone, and a resume says so
        with pytest.raises(EventsLost):
            await store.replay("s", first, now=0)
    kept = [await store.replay("s", first, now=0) for first in firsts[6:]]
    # the four newest streams keep their two events after the first
    assert [len(found[1]) for found in kept if found is not None] == [2] * 4
    assert store.buffered_bytes() == 4 * 30
    other = await store.append("t", 1, b"x", now=0)  # other sessions have their own bound
    assert await store.replay("t", other, now=0) == (1, [])


async def test_the_stream_being_written_is_never_shed() -> None:
    store = MemoryEventStore(EventLimits(max_session_bytes=200, max_bytes=10_000))
    await store.append("s", 1, b"a" * 50, now=0)
    first = await store.append("s", 2, b"b" * 50, now=0)
    for _ in range(3):  # stream 2 alone is over the session bound now
        await store.append("s", 2, b"b" * 50, now=0)
    found = await store.replay("s", first, now=0)
    assert found is not None and len(found[1]) == 3  # stream 2 kept whole, stream 1 shed
    assert store.buffered_bytes() == 200


async def test_the_get_stream_is_shed_after_every_post_stream() -> None:
    store = MemoryEventStore(EventLimits(max_session_bytes=3 * (10 + EVENT_OVERHEAD)))
    get_first = await store.append("s", 0, b"0123456789", now=0)
    await store.append("s", 0, b"0123456789", now=0)
    for stream in range(1, 6):  # POST streams come and go after the GET stream opened
        await store.append("s", stream, b"0123456789", now=0)
    found = await store.replay("s", get_first, now=0)
    assert found is not None and [e.data for e in found[1]] == [b"0123456789"]


async def test_replay_is_per_stream_and_in_order() -> None:
    store = MemoryEventStore()
    a1 = await store.append("s", 1, b"a1", now=0)
    await store.append("s", 2, b"b1", now=0)
    await store.append("s", 1, b"a2", now=0)
    await store.append("s", 2, b"b2", now=0)
    await store.append("s", 1, b"a3", now=0)
    found = await store.replay("s", a1, now=0)
    assert found is not None
    stream, events = found
    assert stream == 1 and [e.data for e in events] == [b"a2", b"a3"]
    assert await store.replay("other", a1, now=0) is None
    await store.drop_session("s")
    assert await store.replay("s", a1, now=0) is None


async def test_append_many_is_append_for_each_session_in_order() -> None:
    """A broadcast stores one event per session in one call; each session's ids
    and bounds are exactly as if it had been appended to alone."""
    store = MemoryEventStore(EventLimits(max_events=2))
    before = await store.append("a", 0, b"x", now=0)
    ids = await store.append_many(["a", "b", "c"], 0, b"hello", now=1)
    assert len(ids) == 3 and len(set(ids)) == 3
    for session, event_id in zip("abc", ids, strict=True):
        assert await store.replay(session, event_id, now=1) == (0, [])
    found = await store.replay("a", before, now=1)
    assert found is not None and [(e.event_id, e.data) for e in found[1]] == [(ids[0], b"hello")]
    await store.append_many(["a", "a"], 0, b"again", now=2)  # the count bound applies to each
    with pytest.raises(EventsLost):
        await store.replay("a", before, now=2)
    found = await store.replay("a", ids[0], now=2)
    assert found is not None and [e.data for e in found[1]] == [b"again", b"again"]
    assert store.buffered_bytes() == 2 * len(b"again") + 2 * len(b"hello")
    assert await store.append_many([], 0, b"none", now=3) == []


async def test_a_broadcast_is_buffered_at_settle_or_at_the_next_call() -> None:
    """append_many numbers the events at once and buffers them later, so the
    frames can reach the sockets first; no caller can see the difference."""
    store = MemoryEventStore()
    first = await store.append("a", 0, b"first", now=0)
    ids = await store.append_many(["a", "b"], 0, b"news", now=1)
    assert [len(store._sessions[s].streams.get(0, ())) for s in "ab"] == [1, 0]  # not yet
    store.settle()
    assert [len(store._sessions[s].streams[0]) for s in "ab"] == [2, 1]
    store.settle()  # nothing pending: nothing happens
    assert store.buffered_bytes() == len(b"first") + 2 * len(b"news")

    # every other call settles first: replay, append, drop_session, prune, buffered_bytes
    later = await store.append_many(["a"], 0, b"later", now=2)
    found = await store.replay("a", first, now=2)
    assert found is not None
    assert [(e.event_id, e.data) for e in found[1]] == [(ids[0], b"news"), (later[0], b"later")]
    await store.append_many(["a"], 0, b"then", now=3)
    after = await store.append("a", 0, b"after", now=3)  # numbered after the pending one
    found = await store.replay("a", first, now=3)
    assert found is not None and [e.data for e in found[1]][-2:] == [b"then", b"after"]
    assert found[1][-1].event_id == after
    await store.append_many(["b"], 0, b"gone", now=4)
    await store.drop_session("b")
    assert await store.replay("b", ids[1], now=4) is None and "b" not in store._sessions
    await store.append_many(["a"], 0, b"old", now=0)
    store.prune(now=1000)  # settles, then drops everything older than the age bound
    assert store.buffered_bytes() == 0


async def test_a_broadcast_is_buffered_once_its_frames_are_out(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app)
    store = server.handler.stores.events
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as client:
            reader = EventReader(client)
            await reader.head(get_request(session))
            await reader.event()  # priming
            app.notify_tools_changed()
            event_id, message = await reader.message()
    assert message["method"] == "notifications/tools/list_changed"
    # the broadcaster settled the store right after sending, not at its next call
    assert store._pending == []
    assert [stored[1] for stored in store._sessions[session].streams[0]][-1] == event_id


async def test_broadcasts_are_kept_for_a_resume_only_where_a_get_stream_was(start_mcp) -> None:
    """A session that never opened a GET stream holds no event id of one, so
    nothing of a broadcast is kept for it; one whose stream closed resumes
    and gets every broadcast it missed."""
    app = notifying_app()
    server = await start_mcp(app)
    store = server.handler.stores.events
    port = server.ports[0]
    resuming, never = await open_session(port), await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as client:
            reader = EventReader(client)
            await reader.head(get_request(resuming))
            priming_id, _, _ = await reader.event()
        kept = store._sessions[resuming].streams[0]
        before = len(kept)
        app.notify_tools_changed()
        app.log("info", "missed")
        while len(kept) < before + 2:
            await trio.sleep(0.01)
        assert never not in store._sessions
        async with await connect(port) as client:
            reader = EventReader(client)
            await reader.head(get_request(resuming, last_event_id=priming_id))
            methods = [(await reader.message())[1]["method"] for _ in range(2)]
        assert methods == ["notifications/tools/list_changed", "notifications/message"]
        async with await connect(port) as client:  # a first stream: what comes after it
            reader = EventReader(client)
            await reader.head(get_request(never))
            await reader.event()  # priming
            app.log("info", "new")
            assert (await reader.message())[1]["params"]["data"] == "new"


async def test_buffer_bounds_are_configurable_and_applied(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app, event_buffer_events=2)
    port = server.ports[0]
    session = await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            await reader.head(get_request(session))
            app.log("info", 0)
            last_id, _ = await reader.message()
        for n in (1, 2, 3, 4):
            app.log("info", n)
        await trio.sleep(0.1)
        async with await connect(port) as c2:
            # only the newest two were kept: 1 and 2 are lost, and the resume says
            # so (it once replayed 3 and 4 as if that were all)
            await c2.send(get_request(session, last_event_id=last_id))
            assert (await c2.read_reply(head=True)).status == 410
        async with await connect(port) as c3:
            reader = EventReader(c3)
            await reader.head(get_request(session))  # a fresh stream goes on
            app.log("info", 5)
            assert (await reader.message())[1]["params"]["data"] == 5


async def test_a_client_that_disconnects_mid_call_resumes_without_loss(start_mcp) -> None:
    app = Server("dropper")
    step = trio.Event()
    finished = trio.Event()

    @app.tool()
    async def slow(ctx: Context) -> str:
        await ctx.report_progress(1, 3)
        await step.wait()  # the client has gone by now: not a cancellation
        await ctx.report_progress(2, 3)
        await ctx.report_progress(3, 3)
        finished.set()
        return "complete"

    server = await start_mcp(app)
    port = server.ports[0]
    session = await open_session(port)
    call = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "slow", "_meta": {"progressToken": 1}},
    }
    with trio.fail_after(10):
        async with await connect(port) as c1:
            reader = EventReader(c1)
            await reader.head(mcp_post(call, session=session, version="2025-11-25"))
            last_id, first = await reader.message()
            assert first["params"]["progress"] == 1
        step.set()  # the connection is closed; the handler goes on
        await finished.wait()
        async with await connect(port) as c2:
            reader = EventReader(c2)
            await reader.head(get_request(session, last_event_id=last_id))
            rest = [(await reader.message())[1] for _ in range(3)]
            assert [m.get("params", {}).get("progress") for m in rest[:2]] == [2, 3]
            assert rest[2]["result"]["content"][0]["text"] == "complete"
            with pytest.raises(EOFError):
                await reader.event()


async def test_removing_a_tool_at_run_time_notifies(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(app)
    port = server.ports[0]
    session = await open_session(port)
    async with await connect(port) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            await reader.head(get_request(session))
            await reader.event()
            app.remove_tool("noop")
            _, message = await reader.message()
    assert message["method"] == "notifications/tools/list_changed"
    assert "noop" not in app.tools


async def test_expired_sessions_release_their_buffers_but_listening_ones_live(start_mcp) -> None:
    app = notifying_app()
    server = await start_mcp(
        app, session_idle_timeout_s=0.4, event_buffer_age_s=60, keepalive_s=0.1
    )
    endpoint = server.handler
    port = server.ports[0]
    idle, listening = await open_session(port), await open_session(port)
    with trio.fail_after(10):
        async with await connect(port) as was_listening:  # leaves buffered events behind
            reader = EventReader(was_listening)
            await reader.head(get_request(idle))
            await reader.event()
    async with await connect(port) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            await reader.head(get_request(listening))
            await reader.event()
            app.log("info", "kept for resumption")
            await reader.message()
            assert idle in endpoint.stores.events._sessions
            await trio.sleep(1.5)  # several idle timeouts and sweeps
            async with await connect(port) as other:
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                await other.send(mcp_post(ping, session=idle, version="2025-11-25"))
                assert (await other.read_reply()).status == 404  # expired
                await other.send(mcp_post(ping, session=listening, version="2025-11-25"))
                assert (await other.read_reply()).status == 200  # its stream keeps it alive
    assert idle not in {s.id for s in endpoint.stores.sessions.table.live()}
    assert idle not in endpoint.stores.events._sessions  # its buffers went with it
    assert listening in endpoint.stores.events._sessions


@pytest.mark.parametrize("how", ["session bound", "age"])
async def test_a_get_stream_that_lost_nothing_resumes_however_many_post_streams_did(
    how: str,
) -> None:
    """Once more than LOSSES_KEPT POST streams had lost events (shed whole at
    the session's byte bound, or aged out at a sweep), a resume of the GET
    stream, which lost nothing, was refused as if it had (410 Gone)."""
    store = MemoryEventStore(EventLimits(max_session_bytes=4 * (1000 + EVENT_OVERHEAD)))
    seen = await store.append("s", 0, b"first", now=0)
    for n in range(LOSSES_KEPT + 10):
        stream = await store.open_stream("s")
        await store.append("s", stream, b"x" * 1000, now=n)
        if how == "age":
            store.prune(now=n + 1000)  # every POST event older than the age bound
            seen = await store.append("s", 0, b"news", now=n + 1000)
    found = await store.replay("s", seen, now=LOSSES_KEPT + 1010)
    assert found == (0, [])
    # (many POST streams' losses are known only as "older than this")
    assert store._sessions["s"].forgotten > 0


async def test_a_resume_never_hides_a_loss_however_old_the_stream() -> None:
    """Losses are remembered by stream for the newest LOSSES_KEPT streams, and
    as "older than this" beyond: a resume of an old stream is refused, never
    answered with a clean, empty replay."""
    store = MemoryEventStore(EventLimits(max_session_bytes=2 * (10 + EVENT_OVERHEAD)))
    firsts = []
    for _ in range(LOSSES_KEPT + 10):
        stream = await store.open_stream("s")
        firsts.append(await store.append("s", stream, b"0123456789", now=0))
        await store.append("s", stream, b"0123456789", now=0)
    for first in firsts[:-1]:
        with pytest.raises(EventsLost):
            await store.replay("s", first, now=0)
    last = await store.replay("s", firsts[-1], now=0)
    assert last is not None and len(last[1]) == 1
    assert await store.replay("s", firsts[-1].rsplit("-", 2)[0] + "-999-1", now=0) is None
