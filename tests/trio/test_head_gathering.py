"""The slow lane reads the lines of a slow head itself once its request line
is in, and hands them to the connection's read at once: the same outcome as
reading them one by one (checked on generated heads cut anywhere), one task
step for the read instead of one a line."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import trio
from _support import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp import HTTPServer, RemoteProtocolError, Request, Response, ServerConfig, serve
from trio_mcp._http._connection import NEED_DATA, HTTP11Connection
from trio_mcp._trio._slow_lane import Gathering, SlowLane, slow_lane
from trio_mcp._trio._socketio import interrupt_wakes_readers

pytestmark = pytest.mark.skipif(slow_lane() is None, reason="the slow lane needs epoll")

LIMITS = {"max_head_bytes": 200, "max_request_line_bytes": 60}


@pytest.fixture
async def lane(nursery: trio.Nursery) -> SlowLane:
    started = SlowLane()
    nursery.start_soon(started.run)
    return started


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair: ours (non-blocking, read through the lane) and theirs."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    with ours, theirs:
        yield ours, theirs


def outcome(http: HTTP11Connection) -> object:
    """What the parser makes of what it has: the request's head, NEED_DATA or an error status."""
    try:
        event = http.next_event()
    except RemoteProtocolError as error:
        return error.status
    if isinstance(event, Request):
        return (event.method, event.target, event.headers)
    return event


def one_by_one(pieces: list[bytes]) -> object:
    http = HTTP11Connection(ServerConfig(**LIMITS))  # type: ignore[arg-type]
    for piece in pieces:
        http.receive_data(piece)
        got = outcome(http)
        if got is not NEED_DATA:
            return got
    http.receive_data(b"")  # (the peer is gone)
    return outcome(http)


def gathered(pieces: list[bytes]) -> object:
    """As the lane reads: once a plan is given, the pieces go to a `Gathering`
    until it says to hand over, then to the parser in one."""
    http = HTTP11Connection(ServerConfig(**LIMITS))  # type: ignore[arg-type]
    waiting = list(pieces)
    while waiting:
        plan = http.head_gathering()
        if plan is None:
            http.receive_data(waiting.pop(0))
        else:
            lane_read = Gathering(None, None, 1 << 16, plan)
            while waiting and not lane_read.add(waiting.pop(0)):
                pass
            http.receive_data(lane_read.gathered())
        got = outcome(http)
        if got is not NEED_DATA:
            return got
    http.receive_data(b"")
    return outcome(http)


line = st.sampled_from(
    [
        b"GET / HTTP/1.1\r\n",
        b"POST /mcp HTTP/1.1\r\n",
        b"GE\x01T / HTTP/1.1\r\n",
        b"GET /" + b"a" * 70,
    ]
)
header = st.sampled_from(
    [b"Host: a\r\n", b"X-A: " + b"b" * 40 + b"\r\n", b"X-B: c\n", b"\r\n", b"X-C: d\r"]
)


@settings(max_examples=400, deadline=None)
@given(
    head=st.tuples(line, st.lists(header, max_size=8)).map(lambda t: t[0] + b"".join(t[1])),
    cuts=st.lists(st.integers(min_value=1, max_value=300), max_size=12),
)
def test_gathering_decides_as_reading_line_by_line(head: bytes, cuts: list[int]) -> None:
    points = sorted({cut for cut in cuts if cut < len(head)})
    pieces = [head[a:b] for a, b in zip([0, *points], [*points, len(head)], strict=True)]
    assert gathered(pieces) == one_by_one(pieces)


def test_no_plan_while_the_request_line_is_incomplete() -> None:
    http = HTTP11Connection(ServerConfig(**LIMITS))  # type: ignore[arg-type]
    http.receive_data(b"GET / HT")
    assert http.next_event() is NEED_DATA and http.head_gathering() is None
    http.receive_data(b"TP/1.1\r\nHo")
    assert http.next_event() is NEED_DATA
    seed, scan, room = http.head_gathering()  # type: ignore[misc]
    assert seed == b"\r\nHo" and scan == 1 and room == 200 - len(b"GET / HTTP/1.1\r\nHo")


async def test_the_lane_reads_a_trickled_head_and_wakes_its_read_once(
    lane: SlowLane, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    steps = []

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            if task is reader:
                steps.append(task)

    async def read() -> bytes:
        return await lane.gather(ours, 1000, (b"1\r\n", 1, 500))

    async with trio.open_nursery() as readers:
        got: list[bytes] = []

        async def reading() -> None:
            got.append(await read())

        readers.start_soon(reading)
        await trio.testing.wait_all_tasks_blocked()
        (reader,) = readers.child_tasks
        trio.lowlevel.add_instrument(Steps())
        for n in range(20):
            theirs.send(b"X-Line: %d\r\n" % n)
            await trio.sleep(0.001)
        assert lane.waiting == 1 and not steps  # (read by the lane, not the task)
        theirs.send(b"\r\n")
    assert got == [b"".join(b"X-Line: %d\r\n" % n for n in range(20)) + b"\r\n"]
    assert len(steps) == 1 and lane.waiting == 0


@pytest.mark.parametrize(
    ("sent", "room", "expected"),
    [
        (b"X: 1\r\nX: 2\r\n", 5, b"X: 1\r\nX: 2\r\n"),  # (over the room: handed over)
        (b"X: 1\n", 100, b"X: 1\n"),  # (a bare LF: the parser refuses it)
    ],
)
async def test_the_lane_hands_over_a_head_the_parser_must_refuse(
    lane: SlowLane,
    pair: tuple[socket.socket, socket.socket],
    sent: bytes,
    room: int,
    expected: bytes,
) -> None:
    ours, theirs = pair
    theirs.send(sent)
    with trio.fail_after(5):
        assert await lane.gather(ours, 1000, (b"1\r\n", 1, room)) == expected


async def test_the_lane_hands_over_what_it_read_when_the_peer_leaves(
    lane: SlowLane, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    theirs.send(b"X: 1\r\n")
    theirs.shutdown(socket.SHUT_WR)
    with trio.fail_after(5):
        assert await lane.gather(ours, 1000, (b"1\r\n", 1, 100)) == b"X: 1\r\n"
        # (nothing more: the read's own recv sees the end)
        assert await lane.gather(ours, 1000, (b"1\r\n", 1, 100)) == b""
    assert lane.waiting == 0


async def test_a_read_that_fails_in_the_lane_fails_the_gathering_read(
    lane: SlowLane, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, theirs = pair
    ours.send(b"unread")
    theirs.close()  # (with our bytes unread: our next read is a reset)
    with pytest.raises(trio.BrokenResourceError), trio.fail_after(5):
        await lane.gather(ours, 1000, (b"1\r\n", 1, 100))
    assert lane.waiting == 0


async def test_a_cancel_and_a_close_reach_a_gathering_read(
    nursery: trio.Nursery, lane: SlowLane, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, _ = pair
    with trio.move_on_after(0.3) as waited:
        await lane.gather(ours, 1000, (b"1\r\n", 1, 100))
    assert waited.cancelled_caught and lane.waiting == 0

    async def forget_soon() -> None:
        await trio.testing.wait_all_tasks_blocked()
        assert lane.waiting == 1
        lane.forget(ours)

    nursery.start_soon(forget_soon)
    with pytest.raises(trio.ClosedResourceError), trio.fail_after(5):
        await lane.gather(ours, 1000, (b"1\r\n", 1, 100))
    assert lane.waiting == 0


async def ok(request: Request) -> Response:
    return Response(200, [(b"content-type", b"text/plain")], request.headers[-1][1])


@pytest.mark.skipif(not interrupt_wakes_readers(), reason="plain sockets wait in trio's epoll")
async def test_a_trickled_head_reaches_its_parser_whole_and_is_served(
    nursery: trio.Nursery,
) -> None:
    server: HTTPServer = await nursery.start(serve, ok, ServerConfig(port=0, head_timeout_s=5.0))
    client = Client(await trio.open_tcp_stream("127.0.0.1", server.ports[0]))
    start = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    # (a first head arrives without a task, `test_arrivals.py`: the second
    # is the connection task's to read)
    await client.send(start + b"X-First: 1\r\n\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).body == b"1"
    await client.send(start)
    lane = server._limits.lane
    assert lane is not None
    with trio.fail_after(5):
        while not lane.waiting:  # (the first read is in: the rest waits in the lane)
            await trio.sleep(0.01)
    (conn,) = server._connections
    for n in range(5):
        await client.send(b"X-More: %d\r\n" % n)
        await trio.sleep(0.02)
        # (the lines wait in the lane: the parser still holds what came first)
        assert len(conn.http._buf) - conn.http._pos == len(start)
    await client.send(b"\r\n")
    with trio.fail_after(5):
        reply = await client.read_reply()
    assert reply.status == 200 and reply.body == b"4"
    await client.stream.aclose()
