"""DESIGN.md "The HTTP connection contract" over real loopback sockets."""

from __future__ import annotations

import email.utils
import itertools
import signal
import socket
import time
from collections.abc import AsyncIterator

import trio
from _support import (
    EXAMPLES,
    Client,
    connect,
    connect_when_up,
    post,
    server_process,
    settled,
    still_serving,
)

from trio_mcp import HTTPServer, Request, Response, StreamingResponse
from trio_mcp._trio._connection import LAST_REQUEST_GRACE_S
from trio_mcp._trio._server import _accept_queued


async def test_keep_alive_serves_many_requests_on_one_connection(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            for i in range(20):
                await client.send(post(b"[%d]" % i))
                reply = await client.read_reply()
                assert reply.body == b"[%d]" % i
                assert reply.header(b"connection") is None
                assert reply.header(b"date") is not None
    assert echo_server.statistics().connections_total == 1


async def test_the_date_header_is_the_time_of_the_answer(echo_server: HTTPServer) -> None:
    # (refreshed by the server's sweeper, so within a tick of the clock)
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            for _ in range(5):  # 3 s: a Date that stopped moving would be caught
                await client.send(post(b"[1]"))
                date = (await client.read_reply()).header(b"date")
                assert date is not None
                sent = email.utils.parsedate_to_datetime(date.decode()).timestamp()
                assert time.time() - 2 <= sent <= time.time()
                await trio.sleep(0.6)


async def test_pipelining_over_a_socket(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(b"".join(post(b"[%d]" % i) for i in range(50)))
            bodies = [(await client.read_reply()).body for _ in range(50)]
    assert bodies == [b"[%d]" % i for i in range(50)]


async def test_client_connection_close_is_honoured(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(post(extra=b"Connection: close\r\n"))
            reply = await client.read_reply()
            assert reply.header(b"connection") == b"close"
            assert await client.read_until_eof() == b""


async def test_http10_closes_unless_keep_alive_asked(echo_server: HTTPServer) -> None:
    port = echo_server.ports[0]
    with trio.fail_after(10):
        async with await connect(port) as client:
            await client.send(b"GET /mcp HTTP/1.0\r\n\r\n")
            assert (await client.read_reply()).header(b"connection") == b"close"
            assert await client.read_until_eof() == b""
        async with await connect(port) as client:
            for _ in range(3):
                await client.send(b"GET /mcp HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                reply = await client.read_reply()
                assert reply.status == 200
                assert reply.header(b"connection") == b"keep-alive"
                client.h11 = type(client.h11)(client.h11.our_role)  # h11 ends 1.0 cycles


async def test_request_limit_closes_with_the_last_response(start_server) -> None:
    server = await start_server(max_requests_per_connection=5)
    async with await connect(server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(post() * 5)
            replies = [await client.read_reply() for _ in range(5)]
            assert [r.header(b"connection") for r in replies] == [None] * 4 + [b"close"]
            assert await client.read_until_eof() == b""


async def test_head_request_over_a_socket(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(b"HEAD /mcp HTTP/1.1\r\nHost: x\r\n\r\n" + post(b"[1]"))
            head = await client.read_reply(head=True)
            assert head.body == b"" and int(head.headers[b"content-length"]) > 0
            assert (await client.read_reply()).body == b"[1]"


async def test_expect_continue_over_a_socket(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(
                b"POST /mcp HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
            )
            assert await client.stream.receive_some(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            await client.send(b"{}")
            assert (await Client(client.stream).read_reply()).body == b"{}"


async def test_graceful_shutdown_finishes_in_flight_requests(start_server) -> None:
    release = trio.Event()
    started = trio.Event()

    async def handler(request: Request) -> Response:
        if request.body == b"slow":
            started.set()
            await release.wait()
        return Response(200, [], request.body)

    server = await start_server(handler)
    port = server.ports[0]
    with trio.fail_after(10):
        async with (
            await connect(port) as idle,
            await connect(port) as busy,
            await connect(port) as partial,
            await connect(port) as fresh,
            await connect(port) as silent,
        ):
            await idle.send(post(b"x"))
            await idle.read_reply()
            await busy.send(post(b"slow"))
            await started.wait()
            await partial.send(post(b"late")[:20])
            await settled()

            server.shutdown()
            # new connections are refused
            await trio.sleep(0.05)
            try:
                refused = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                pass
            else:
                await refused.aclose()
                raise AssertionError("a draining server accepted a connection")
            # a request completed after the listener closed is served, with a
            # close (a proxy passes a 503 to its client: a POST that reached a
            # server is never sent to another)
            await partial.send(post(b"late")[20:])
            reply = await partial.read_reply()
            assert (reply.status, reply.body) == (200, b"late")
            assert reply.header(b"connection") == b"close"
            # and so is the next request on a kept-alive connection that was
            # idle (a proxy may have sent it as the listener closed), and a
            # first one on a connection that had sent nothing ...
            for client, body in ((idle, b"next"), (fresh, b"early")):
                await client.send(post(body))
                reply = await client.read_reply()
                assert (reply.status, reply.body) == (200, body)
                assert reply.header(b"connection") == b"close"
                assert await client.read_until_eof() == b""
            # ... if it comes within the grace: a silent one is closed after it
            t0 = trio.current_time()
            assert await silent.read_until_eof() == b""
            assert trio.current_time() - t0 < LAST_REQUEST_GRACE_S + 2
            # requests running finish, with Connection: close
            release.set()
            reply = await busy.read_reply()
            assert (reply.body, reply.header(b"connection")) == (b"slow", b"close")
            while server.statistics().connections_open:
                await trio.sleep(0.01)


async def test_a_keep_alive_answer_ending_after_the_listener_closed_gets_one_more(
    start_server,
) -> None:
    # A stream that began before the shutdown said keep-alive: its client (a
    # proxy, say) may send its next request the moment it ends, so that one
    # is served, with a close, not met by a closed connection.
    release = trio.Event()

    async def events() -> AsyncIterator[bytes]:
        yield b"data: 0\n\n"
        await release.wait()
        yield b"data: 1\n\n"

    async def handler(request: Request) -> StreamingResponse | Response:
        if request.body == b"stream":
            return StreamingResponse(200, [(b"content-type", b"text/event-stream")], events())
        return Response(200, [], request.body)

    server = await start_server(handler)
    port = server.ports[0]
    with trio.fail_after(10):
        async with await connect(port) as client:
            await client.send(post(b"stream"))
            await settled()  # (its stream has begun)
            server.shutdown()
            while True:  # (the listener closes once the server's task has run)
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    break
                await stream.aclose()
                await trio.sleep(0.01)
            release.set()
            reply = await client.read_reply()
            assert reply.chunks == [b"data: 0\n\n", b"data: 1\n\n"]
            assert reply.header(b"connection") is None  # (decided before the shutdown)
            await client.send(post(b"next"))
            reply = await client.read_reply()
            assert (reply.status, reply.body) == (200, b"next")
            assert reply.header(b"connection") == b"close"


def test_the_connections_queued_on_a_closing_listener_are_admitted() -> None:
    # (closing a listener resets what its queue holds: clients that connected)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        clients = [socket.create_connection(listener.getsockname()) for _ in range(3)]
        admitted: list[tuple[object, bool]] = []
        _accept_queued(
            listener, lambda sock, address, ip, nursery: admitted.append((sock, ip)), None
        )  # type: ignore[arg-type]
        assert [ip for _, ip in admitted] == [True, True, True]
        for sock, _ in admitted:
            sock.close()  # type: ignore[attr-defined]
        for client in clients:
            client.close()


async def test_graceful_shutdown_cancels_after_the_deadline(nursery, start_server) -> None:
    cancelled = trio.Event()

    async def handler(request: Request) -> Response:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    server = await start_server(handler, shutdown_timeout_s=0.3)
    async with await connect(server.ports[0]) as client:
        await client.send(post())
        await settled()
        t0 = trio.current_time()
        server.shutdown()
        with trio.fail_after(5):
            await cancelled.wait()
            assert await client.read_until_eof() == b""
        assert 0.25 < trio.current_time() - t0 < 3


async def test_echo_example_drains_on_sigterm() -> None:
    with server_process(str(EXAMPLES / "echo.py")) as (proc, port), trio.fail_after(20):
        client = await connect_when_up(port)
        async with client:
            await client.send(post(b"[1]"))
            assert (await client.read_reply()).body == b"[1]"
            await client.send(post(b"[2]")[:10])  # a request in flight
            await trio.sleep(0.1)
            proc.send_signal(signal.SIGTERM)
            await trio.sleep(0.2)
            await client.send(post(b"[2]")[10:])
            reply = await client.read_reply()  # (completed after the listener closed)
            assert (reply.status, reply.body) == (200, b"[2]")
            assert reply.header(b"connection") == b"close"
        while proc.poll() is None:
            await trio.sleep(0.05)
        assert proc.returncode == 0
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
        assert f"port {port}" in output and "draining" in output


async def test_get_and_options_on_echo(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(b"GET /mcp/ HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await client.read_reply()).status == 200
            await client.send(b"OPTIONS /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = await client.read_reply()
            assert (reply.status, reply.header(b"allow")) == (204, b"GET, HEAD, POST, OPTIONS")
    await still_serving(echo_server.ports[0])


async def test_upgrade_request_body_is_read_as_its_body(echo_server: HTTPServer) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(
                post(b'{"up":1}', extra=b"Connection: Upgrade\r\nUpgrade: websocket\r\n")
                + post(b'{"next":2}')
            )
            first = await client.read_reply()
            assert (first.status, first.body) == (200, b'{"up":1}')
            assert (await client.read_reply()).body == b'{"next":2}'


async def _three_events() -> AsyncIterator[bytes]:
    for i in range(3):
        yield b"data: %d\n\n" % i
        await trio.sleep(0.01)


async def _stream_handler(request: Request) -> StreamingResponse:
    return StreamingResponse(200, [(b"content-type", b"text/event-stream")], _three_events())


async def test_streaming_over_http11_socket_is_chunked(start_server) -> None:
    server = await start_server(_stream_handler)
    async with await connect(server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = await client.read_reply()
            assert reply.header(b"transfer-encoding") == b"chunked"
            assert reply.chunks == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
            # the connection persists after the last chunk
            await client.send(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await client.read_reply()).body.startswith(b"data: 0")


async def test_streaming_over_http10_socket_is_close_delimited(start_server) -> None:
    server = await start_server(_stream_handler)
    async with await connect(server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(b"GET /mcp HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            raw = await client.read_until_eof()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower()
    assert b"connection: close" in head.lower()
    assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"


async def test_a_pipelining_client_cannot_monopolise_the_server(nursery, start_server) -> None:
    # Socket calls that complete at once skip trio's scheduler, except every
    # few calls: another task must get to run while one connection works
    # through a long pipeline.
    ticks = 0

    async def observer() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    seen: list[int] = []

    async def handler(request: Request) -> Response:
        seen.append(ticks)  # no await here: the handler itself never yields
        return Response(200, [], request.body)

    server = await start_server(handler)
    nursery.start_soon(observer)
    async with await connect(server.ports[0]) as client:
        with trio.fail_after(20):
            await client.send(b"".join(post(b"[%d]" % i) for i in range(300)))
            for _ in range(300):
                await client.read_reply()
    longest_run = max(len(list(run)) for _, run in itertools.groupby(seen))
    assert longest_run <= 16, longest_run


async def test_reuse_port_lets_two_servers_share_a_port(start_server) -> None:
    first = await start_server(reuse_port=True)
    port = first.ports[0]
    second = await start_server(reuse_port=True, port=port)
    assert second.ports == [port]
    with trio.fail_after(10):
        for _ in range(20):  # the kernel spreads new connections over both
            await still_serving(port)
    total = first.statistics().connections_total + second.statistics().connections_total
    assert total == 20
