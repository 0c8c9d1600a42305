"""A new connection's first head arrives with no task (`_trio/_arrivals.py`):
no task is started for a head until it is in, and an arrival is timed,
refused, counted and ended as a connection with a task would be."""

from __future__ import annotations

import socket
import struct

import pytest
import trio
import trio.testing
from _support import Client, connect, cycle_garbage, post, start_ok_server

from trio_mcp import HTTPServer, Request, Response, ServerConfig, serve
from trio_mcp._trio._arrivals import Arrival
from trio_mcp._trio._slow_lane import slow_lane
from trio_mcp._trio._socketio import interrupt_wakes_readers

pytestmark = pytest.mark.skipif(
    slow_lane() is None or not interrupt_wakes_readers(),
    reason="arrivals wait in the slow lane (epoll, and reads that can be interrupted)",
)

HEAD_START = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


async def echo(request: Request) -> Response:
    return Response(200, [(b"content-type", b"text/plain")], request.body)


async def start_echo_server(nursery: trio.Nursery, **config: object) -> HTTPServer:
    settings = ServerConfig(port=0, **config)  # type: ignore[arg-type]
    server: HTTPServer = await nursery.start(serve, echo, settings)
    return server


def arriving(server: HTTPServer) -> int:
    lane = server._limits.lane
    assert lane is not None
    return lane.arriving


async def until(condition: object, limit_s: float = 5.0) -> None:
    with trio.fail_after(limit_s):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.01)


def connection_tasks(server: HTTPServer) -> int:
    connections = server._limits.watchers
    assert connections is not None
    return len(connections.child_tasks)


async def test_first_heads_arriving_hold_no_task_until_they_are_in(
    nursery: trio.Nursery,
) -> None:
    server = await start_ok_server(nursery)
    clients = [await connect(server.ports[0]) for _ in range(50)]
    for client in clients:
        await client.send(HEAD_START)
    await until(lambda: arriving(server) == 50)
    assert len(server._connections) == 50
    assert connection_tasks(server) == 0
    assert server.statistics().connections_open == 50
    for client in clients:
        await client.send(b"\r\n")
    with trio.fail_after(5):
        for client in clients:
            assert (await client.read_reply()).status == 200
    assert arriving(server) == 0 and connection_tasks(server) == 50
    for client in clients:
        await client.stream.aclose()


@pytest.mark.parametrize(
    "pieces",
    [
        [b"PO", b"ST / HTTP/1.1\r", b"\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r", b"\nhello"],
        [
            b"\r\n",
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\n",
            b"hel",
            b"lo",
        ],
        [b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello"],
    ],
    ids=["split everywhere", "an empty line, then the body apart", "whole"],
)
async def test_a_first_request_in_pieces_is_served_as_a_whole_one(
    nursery: trio.Nursery, pieces: list[bytes]
) -> None:
    server = await start_echo_server(nursery)
    client = await connect(server.ports[0])
    for piece in pieces:
        await client.send(piece)
        await trio.sleep(0.02)
    with trio.fail_after(5):
        reply = await client.read_reply()
    assert (reply.status, reply.body) == (200, b"hello")
    await client.send(post(b"again", path=b"/"))  # (the same connection, kept alive)
    with trio.fail_after(5):
        assert (await client.read_reply()).body == b"again"
    await client.stream.aclose()


async def test_an_overdue_first_head_gets_408_and_gives_its_place_back(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start_ok_server(nursery, head_timeout_s=1.0)
    client = await connect(server.ports[0])
    await client.send(HEAD_START)
    await until(lambda: arriving(server) == 1)
    with trio.fail_after(5):
        reply = await client.read_reply()
        assert reply.status == 408
        assert await client.read_until_eof() == b""
    await until(lambda: not server._connections)
    assert arriving(server) == 0 and server.quota.held == 0
    await client.stream.aclose()


async def test_a_silent_new_connection_is_closed_at_the_idle_limit_without_a_word(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start_ok_server(nursery, idle_timeout_s=2.0, head_timeout_s=1.0)
    client = await connect(server.ports[0])
    await until(lambda: arriving(server) == 1)
    await trio.sleep(1.5)  # (past the head limit: no head has begun)
    assert arriving(server) == 1
    with trio.fail_after(5):
        assert await client.read_until_eof() == b""
    await until(lambda: not server._connections)
    assert server.quota.held == 0
    await client.stream.aclose()


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (b"\x16\x03\x01\x02\x00", 400),  # (a TLS hello: no line break, refused at once)
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad\nLine", 400),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X: %b\r\n" % (b"y" * 100) * 200, 431),
    ],
    ids=["not http", "a bare line feed", "too large"],
)
async def test_a_first_head_that_cannot_be_served_is_refused_at_once(
    nursery: trio.Nursery, sent: bytes, status: int
) -> None:
    server = await start_ok_server(nursery, head_timeout_s=30.0, max_head_bytes=16384)
    client = await connect(server.ports[0])
    await client.send(sent)
    with trio.fail_after(5):  # (not at the head limit)
        assert (await client.read_reply()).status == status
        assert await client.read_until_eof() == b""
    await until(lambda: not server._connections)
    await client.stream.aclose()


async def test_a_head_cut_short_by_its_client_is_answered_400(nursery: trio.Nursery) -> None:
    server = await start_ok_server(nursery)
    client = await connect(server.ports[0])
    await client.send(HEAD_START)
    await until(lambda: arriving(server) == 1)
    await client.stream.send_eof()  # type: ignore[attr-defined]
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 400
    await until(lambda: not server._connections)
    await client.stream.aclose()


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
async def test_a_client_gone_before_its_head_is_in_leaves_nothing(
    nursery: trio.Nursery, reset: bool
) -> None:
    server = await start_ok_server(nursery, max_connections_per_address=3)
    for _ in range(5):  # (more than the address's quota: each place comes back)
        sock = socket.create_connection(("127.0.0.1", server.ports[0]))
        sock.sendall(HEAD_START)
        await until(lambda: arriving(server) == 1)
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        await until(lambda: not server._connections)
        assert arriving(server) == 0 and server.quota.held == 0
    assert connection_tasks(server) == 0


async def test_an_arrival_stands_in_for_its_socket_and_scope_until_its_task_starts(
    nursery: trio.Nursery,
) -> None:
    server = await start_ok_server(nursery)
    client = await connect(server.ports[0])
    await client.send(HEAD_START)
    await until(lambda: arriving(server) == 1)
    (conn,) = server._connections
    assert isinstance(conn.interruptible, Arrival) and conn.timer is conn.interruptible
    await client.send(b"\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 200
    assert not isinstance(conn.interruptible, Arrival)
    assert isinstance(conn.timer, trio.CancelScope)
    await client.stream.aclose()


async def test_at_the_drain_a_head_still_arriving_is_served_and_a_silent_one_closed(
    nursery: trio.Nursery,
) -> None:
    server = await start_ok_server(nursery, drain_delay_s=0.0, shutdown_timeout_s=10.0)
    slow = await connect(server.ports[0])
    await slow.send(HEAD_START)
    silent = await connect(server.ports[0])
    await until(lambda: arriving(server) == 2)
    server.shutdown()
    await trio.sleep(0.2)  # (the listener has closed: both still here)
    assert arriving(server) == 2
    await slow.send(b"\r\n")
    with trio.fail_after(5):
        reply = await slow.read_reply()
        assert reply.status == 200 and reply.header(b"connection") == b"close"
        # (the grace for a request that was on its way, then a close)
        assert await silent.read_until_eof() == b""
    await slow.stream.aclose()
    await silent.stream.aclose()


async def test_a_stopped_server_closes_its_arrivals() -> None:
    async with trio.open_nursery() as nursery:
        server = await start_ok_server(nursery)
        client = Client(await trio.open_tcp_stream("127.0.0.1", server.ports[0]))
        await client.send(HEAD_START)
        await until(lambda: arriving(server) == 1)
        nursery.cancel_scope.cancel()
    with trio.fail_after(5):
        assert await client.read_until_eof() == b""
    await client.stream.aclose()


async def test_what_fails_for_an_arrival_ends_that_connection_alone(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The accept loop and the lane read for every connection: a failure in
    an arrival's reading (here: made to fail on a marker) closes that one,
    whether its first read said it all or it waited in the lane, and the
    server serves on."""
    took = Arrival.took

    def failing(self: Arrival, data: bytes) -> bool:
        if b"X-Fail" in data:
            raise RuntimeError("made to fail")
        return took(self, data)

    monkeypatch.setattr(Arrival, "took", failing)
    server = await start_ok_server(nursery)
    at_once = await connect(server.ports[0])
    await at_once.send(HEAD_START + b"X-Fail: 1\r\n\r\n")
    later = await connect(server.ports[0])
    await later.send(HEAD_START)
    await until(lambda: arriving(server) == 1)
    await later.send(b"X-Fail: 2\r\n")
    with trio.fail_after(5):
        assert await at_once.read_until_eof() == b""
        assert await later.read_until_eof() == b""
    await until(lambda: not server._connections)
    assert server.quota.held == 0
    assert caplog.text.count("it ended alone") == 2
    client = await connect(server.ports[0])
    await client.send(HEAD_START + b"\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 200
    for each in (at_once, later, client):
        await each.stream.aclose()


async def test_an_ended_arrival_is_freed_without_the_cycle_collector(
    nursery: trio.Nursery,
) -> None:
    """An arrival and its connection refer to each other while it waits (it
    stands in for the connection's socket and scope): its end breaks that,
    or each slowloris connection would hold its parser and buffers until a
    full collection (the soak's RSS rose 12 MB a minute)."""
    server = await start_ok_server(nursery, head_timeout_s=0.5, idle_timeout_s=0.5)
    with cycle_garbage() as left:
        overdue = await connect(server.ports[0])
        await overdue.send(HEAD_START)
        silent = await connect(server.ports[0])
        gone = socket.create_connection(("127.0.0.1", server.ports[0]))
        gone.sendall(HEAD_START)
        await until(lambda: arriving(server) == 3)
        gone.close()
        refused = await connect(server.ports[0])
        await refused.send(b"\x16\x03\x01\x02\x00")
        with trio.fail_after(5):
            assert (await overdue.read_reply()).status == 408
            assert await silent.read_until_eof() == b""
            assert (await refused.read_reply()).status == 400
        await until(lambda: not server._connections)
        for client in (overdue, silent, refused):
            await client.stream.aclose()
    assert not left & {"Arrival", "Connection", "HTTP11Connection"}
