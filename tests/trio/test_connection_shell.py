"""The trio shell over in-memory streams: time limits (autojump clock), order, streaming."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from functools import partial

import h11
import pytest
import trio
import trio.lowlevel
import trio.testing
from _support import Client, post

from trio_mcp import (
    DeferredResponse,
    HTTPServer,
    LocalProtocolError,
    Request,
    Response,
    ResponseWriter,
    ServerConfig,
    StreamingResponse,
)

# Time limits are checked twice a second with the default limits, and a phase
# is timed from the first check that sees it: they fire no earlier than the
# limit and at most 1 s late.
TICK = 1.0


def fired_after(elapsed: float, limit: float) -> bool:
    return limit <= elapsed <= limit + TICK


async def echo(request: Request) -> Response:
    return Response(200, [(b"content-type", b"application/json")], request.body)


async def start(
    nursery: trio.Nursery, handler=echo, lockstep: bool = False, **config: object
) -> tuple[HTTPServer, Client, trio.Event]:
    server = HTTPServer(handler, ServerConfig(**config))  # type: ignore[arg-type]
    if lockstep:
        client_stream, server_stream = trio.testing.lockstep_stream_pair()
    else:
        client_stream, server_stream = trio.testing.memory_stream_pair()
    done = trio.Event()

    async def run() -> None:
        await server.handle_stream(server_stream)
        done.set()

    nursery.start_soon(run)
    nursery.start_soon(server.enforce_timeouts)
    return server, Client(client_stream), done


async def test_idle_timeout_closes_silently_after_30_s(nursery, autojump_clock) -> None:
    _, client, done = await start(nursery)
    await client.send(post(b"[1]"))
    assert (await client.read_reply()).body == b"[1]"
    t0 = trio.current_time()
    assert await client.read_until_eof() == b""
    assert fired_after(trio.current_time() - t0, 30)
    await done.wait()


async def test_idle_timeout_is_configurable(nursery, autojump_clock) -> None:
    _, client, _ = await start(nursery, idle_timeout_s=2.5)
    t0 = trio.current_time()
    assert await client.read_until_eof() == b""
    assert fired_after(trio.current_time() - t0, 2.5)


async def test_each_request_starts_a_new_idle_limit(nursery, autojump_clock) -> None:
    # Five requests 2 s apart keep a connection with a 2.5 s idle limit open
    # for 10 s: every idle phase is timed from its own start.
    _, client, _ = await start(nursery, idle_timeout_s=2.5)
    for n in range(5):
        await trio.sleep(2)
        await client.send(post(b"[%d]" % n))
        assert (await client.read_reply()).body == b"[%d]" % n
    t0 = trio.current_time()
    assert await client.read_until_eof() == b""
    assert fired_after(trio.current_time() - t0, 2.5)


async def test_trickled_head_gets_408_after_head_timeout(nursery, autojump_clock) -> None:
    # One byte a second never trips the 30 s idle timeout, but the head as a
    # whole must arrive within 10 s of its first byte.
    _, client, done = await start(nursery)
    t0 = trio.current_time()

    async def trickle() -> None:
        for byte in b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
            try:
                await client.send(bytes([byte]))
            except trio.BrokenResourceError:
                return  # the server gave up on us, as it should
            await trio.sleep(1)

    nursery.start_soon(trickle)
    reply = await client.read_reply()
    assert reply.status == 408
    assert reply.header(b"connection") == b"close"
    assert fired_after(trio.current_time() - t0, 10)
    await done.wait()


async def test_body_that_stops_gets_408_after_body_timeout(nursery, autojump_clock) -> None:
    _, client, done = await start(nursery)
    await client.send(post(b"0123456789")[:-4])
    t0 = trio.current_time()
    reply = await client.read_reply()
    assert reply.status == 408
    assert fired_after(trio.current_time() - t0, 30)
    await done.wait()


async def test_client_that_stops_reading_is_dropped_after_write_timeout(
    nursery, autojump_clock
) -> None:
    big = b"x" * 100

    async def handler(request: Request) -> Response:
        return Response(200, [], big)

    _, client, done = await start(nursery, handler, lockstep=True, write_timeout_s=5)
    await client.send(post())
    t0 = trio.current_time()
    await done.wait()  # the client never reads
    assert fired_after(trio.current_time() - t0, 5)


async def test_slow_handler_is_not_timed_out(nursery, autojump_clock) -> None:
    async def slow(request: Request) -> Response:
        await trio.sleep(3600)
        return Response(200, [], b"late")

    _, client, _ = await start(nursery, slow)
    await client.send(post())
    assert (await client.read_reply()).body == b"late"


async def test_pipelined_requests_answered_in_order(nursery, autojump_clock) -> None:
    async def handler(request: Request) -> Response:
        await trio.sleep(1 / (int(request.body) + 1))  # later requests finish sooner
        return Response(200, [], request.body)

    _, client, _ = await start(nursery, handler)
    await client.send(b"".join(post(b"%d" % i) for i in range(5)))
    assert [(await client.read_reply()).body for _ in range(5)] == [b"%d" % i for i in range(5)]


async def test_handler_error_gives_500_and_connection_lives_on(nursery, caplog) -> None:
    async def handler(request: Request) -> Response:
        if request.body == b"boom":
            raise RuntimeError("secret detail")
        return Response(200, [], request.body)

    _, client, _ = await start(nursery, handler)
    await client.send(post(b"boom"))
    reply = await client.read_reply()
    assert reply.status == 500
    assert b"secret" not in reply.body
    await client.send(post(b"ok"))
    assert (await client.read_reply()).body == b"ok"
    assert "handler failed" in caplog.text


class Routes:
    """A `Handler`: b"now" bodies answered at once, b"boom" raising in `route`,
    anything else deferred."""

    def __init__(self) -> None:
        self.deferred: list[bytes] = []
        self.drained = 0

    def route(self, request: Request) -> Response | DeferredResponse:
        if request.body == b"boom":
            raise RuntimeError("secret detail")
        if request.body == b"now":
            return Response(200, [], b"answered now")
        return DeferredResponse(partial(self._later, request.body))

    async def _later(self, body: bytes, writer: ResponseWriter) -> None:
        self.deferred.append(body)
        await trio.lowlevel.checkpoint()
        await writer.respond(Response(200, [], b"deferred " + body))

    def drain(self) -> None:
        self.drained += 1


async def test_a_handler_routes_each_request_without_waiting(nursery, caplog) -> None:
    handler = Routes()
    server, client, _ = await start(nursery, handler)
    for body, answer in ((b"now", b"answered now"), (b"later", b"deferred later")):
        await client.send(post(body))
        assert (await client.read_reply()).body == answer
    assert handler.deferred == [b"later"]
    await client.send(post(b"boom"))
    assert (await client.read_reply()).status == 500  # as if the handler had raised
    assert "handler failed" in caplog.text
    await client.send(post(b"now"))
    assert (await client.read_reply()).body == b"answered now"
    server.shutdown()
    server.shutdown()
    assert handler.drained == 1  # once, when the drain begins


async def test_a_function_is_awaited_for_each_request(nursery) -> None:
    awaited: list[bytes] = []

    async def handler(request: Request) -> Response:
        awaited.append(request.body)
        await trio.lowlevel.checkpoint()
        return Response(200, [], request.body)

    server, client, _ = await start(nursery, handler)
    for body in (b"one", b"two"):
        await client.send(post(body))
        assert (await client.read_reply()).body == body
    assert awaited == [b"one", b"two"]
    server.shutdown()  # (a function has nothing to drain)


async def test_expect_100_continue_before_body(nursery) -> None:
    _, client, _ = await start(nursery)
    await client.send(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
    )
    interim = await client.stream.receive_some(100)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    await client.send(b"true")
    # h11 needs to see the interim response too, so feed a fresh client the rest.
    reply = await Client(client.stream).read_reply()
    assert reply.body == b"true"


async def test_bad_request_gets_error_then_close(nursery) -> None:
    _, client, done = await start(nursery)
    await client.send(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"
    )
    reply = await client.read_reply()
    assert reply.status == 400
    assert reply.header(b"connection") == b"close"
    assert await client.read_until_eof() == b""
    await done.wait()


async def _events(log: list[str]) -> AsyncIterator[bytes]:
    try:
        for i in range(3):
            yield b"data: %d\n\n" % i
            await trio.lowlevel.checkpoint()
    finally:
        log.append("closed")


async def test_streaming_response_is_chunked_and_connection_persists(nursery) -> None:
    log: list[str] = []

    async def handler(request: Request) -> Response | StreamingResponse:
        if request.method == "GET":
            return StreamingResponse(200, [(b"content-type", b"text/event-stream")], _events(log))
        return Response(200, [], request.body)

    _, client, _ = await start(nursery, handler)
    await client.send(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = await client.read_reply()
    assert reply.header(b"transfer-encoding") == b"chunked"
    assert reply.body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert log == ["closed"]
    await client.send(post(b"after"))
    assert (await client.read_reply()).body == b"after"


async def test_streaming_head_request_does_not_run_the_body(nursery) -> None:
    log: list[str] = []

    async def handler(request: Request) -> StreamingResponse:
        return StreamingResponse(200, [], _events(log))

    _, client, _ = await start(nursery, handler)
    await client.send(b"HEAD /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = await client.read_reply(head=True)
    assert reply.status == 200 and reply.body == b""


async def test_dead_peer_mid_stream_closes_the_body(nursery, autojump_clock) -> None:
    closed = trio.Event()

    async def forever() -> AsyncIterator[bytes]:
        try:
            while True:
                yield b": keepalive\n\n"
                await trio.sleep(15)
        finally:
            closed.set()

    async def handler(request: Request) -> StreamingResponse:
        return StreamingResponse(200, [], forever())

    _, client, done = await start(nursery, handler)
    await client.send(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
    await client.stream.receive_some(1000)
    await client.stream.aclose()
    with trio.fail_after(60):
        await closed.wait()
        await done.wait()


async def test_statistics_count_connections_and_requests(nursery) -> None:
    server, client, done = await start(nursery)
    await client.send(post() + post(extra=b"Connection: close\r\n"))
    await client.read_reply()
    await client.read_reply()
    await done.wait()
    stats = server.statistics()
    assert (stats.connections_open, stats.connections_total, stats.requests_total) == (0, 1, 2)


async def test_deferred_response_may_answer_in_full(nursery) -> None:
    async def respond(writer: ResponseWriter) -> None:
        assert not writer.started
        await writer.respond(Response(200, [], b"whole"))
        assert writer.started

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post() + post())
    for _ in range(2):
        reply = await client.read_reply()
        assert (reply.status, reply.body, reply.header(b"content-length")) == (200, b"whole", b"5")


async def test_deferred_response_may_answer_without_a_coroutine(nursery) -> None:
    """respond_nowait returns what it could not send now, which send_rest
    delivers; a second answer is refused. (This harness serves a trio memory
    stream, not a socket, so the whole answer is the rest; the partial sends
    of a real socket are in test_writer_socket.py.)"""
    body = bytes(range(256)) * 65536  # 16 MiB
    rests: list[int] = []

    async def respond(writer: ResponseWriter) -> None:
        rest = writer.respond_nowait(Response(200, [], body))
        rests.append(len(rest))
        assert writer.started
        with pytest.raises(LocalProtocolError):
            writer.respond_nowait(Response(200, [], b"again"))
        if rest:
            await writer.send_rest(rest)

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post() + post())
    for _ in range(2):
        with trio.fail_after(30):
            reply = await client.read_reply()
        assert (reply.status, len(reply.body)) == (200, len(body))
        assert reply.body == body
    # nothing went at once on this stream: send_rest sent it
    assert len(rests) == 2 and all(rest > 0 for rest in rests)


async def test_deferred_response_may_stream(nursery) -> None:
    async def respond(writer: ResponseWriter) -> None:
        await writer.start(200, [(b"content-type", b"text/event-stream")])
        for i in range(3):
            await writer.send(b"data: %d\n\n" % i)
            await trio.lowlevel.checkpoint()
        await writer.end()

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post() + post(b"[2]", path=b"/other"))
    reply = await client.read_reply()
    assert reply.header(b"transfer-encoding") == b"chunked"
    assert reply.chunks == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
    assert (await client.read_reply()).status == 200  # the connection goes on


async def test_deferred_response_does_not_keep_its_request_alive(nursery) -> None:
    # A deferred answer may be an event stream that stays open for hours: the
    # connection must let go of the request (its head and body) once the
    # handler has returned.
    # (References are counted: a running coroutine's locals are invisible to
    # gc.get_referrers.)
    seen: list[Request] = []
    counts: list[int] = []

    async def respond(writer: ResponseWriter) -> None:
        counts.append(sys.getrefcount(seen[0]))
        await writer.respond(Response(200, [], b"ok"))

    async def handler(request: Request) -> DeferredResponse:
        seen.append(request)
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post(b"x" * 1000))
    assert (await client.read_reply()).body == b"ok"
    await client.send(post())  # the connection has moved on to the next request
    assert (await client.read_reply()).body == b"ok"
    after = sys.getrefcount(seen[0])  # (outside the assert, which keeps temporaries)
    # seen and getrefcount's argument: no more while answering than afterwards
    assert counts[0] == after


async def test_deferred_response_stream_is_ended_for_it(nursery) -> None:
    async def respond(writer: ResponseWriter) -> None:
        await writer.start(200, [])
        await writer.send(b"partial")

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post())
    assert (await client.read_reply()).body == b"partial"


@pytest.mark.parametrize("fail", [False, True])
async def test_deferred_response_that_writes_nothing_or_fails_early_is_500(
    nursery, caplog, fail: bool
) -> None:
    async def respond(writer: ResponseWriter) -> None:
        if fail:
            raise RuntimeError("oops")

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post())
    assert (await client.read_reply()).status == 500
    await client.send(post())
    assert (await client.read_reply()).status == 500  # still serving


async def test_deferred_response_failing_mid_stream_cuts_the_connection(nursery, caplog) -> None:
    async def respond(writer: ResponseWriter) -> None:
        await writer.start(200, [])
        await writer.send(b"first")
        raise RuntimeError("oops")

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, done = await start(nursery, handler)
    await client.send(post())
    with pytest.raises(h11.RemoteProtocolError, match="incomplete chunked read"):
        await client.read_reply()
    await done.wait()


async def test_deferred_response_to_a_dead_peer_runs_to_completion(nursery) -> None:
    finished = trio.Event()
    saw_broken: list[bool] = []

    async def respond(writer: ResponseWriter) -> None:
        await writer.start(200, [])
        await writer.send(b"x")
        await client.stream.aclose()
        for _ in range(3):
            await writer.send(b"y" * 100)  # dropped, no exception
        saw_broken.append(writer.broken)
        finished.set()

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, done = await start(nursery, handler)
    await client.send(post())
    await finished.wait()
    await done.wait()
    assert saw_broken == [True]


async def test_writer_misuse_is_a_local_error(nursery) -> None:
    errors: list[str] = []

    async def respond(writer: ResponseWriter) -> None:
        for misuse in (writer.send(b"x"), writer.end()):
            try:
                await misuse
            except LocalProtocolError as exc:
                errors.append(str(exc))
        try:
            writer.send_nowait(b"x")  # a body piece before the head
        except LocalProtocolError as exc:
            errors.append(str(exc))
        await writer.respond(Response(204))
        try:
            await writer.start(200, [])
        except LocalProtocolError as exc:
            errors.append(str(exc))

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(respond)

    _, client, _ = await start(nursery, handler)
    await client.send(post())
    assert (await client.read_reply()).status == 204
    assert len(errors) == 4
