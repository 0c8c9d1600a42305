"""Hostile work comes a few steps per scheduler batch: a flood of new
connections is admitted a few per batch, and slow request heads wait in the
slow lane, which wakes a few of them per batch; what reaches a head
waiting there (its bytes, the sweeper's interrupt, a cancel, a close) still
does."""

from __future__ import annotations

import socket

import pytest
import trio
from _support import connect, start_ok_server

from trio_mcp import HTTPServer
from trio_mcp._trio._server import ACCEPTS_PER_TURN
from trio_mcp._trio._slow_lane import SlowLane, slow_lane
from trio_mcp._trio._socketio import SocketIO, interrupt_wakes_readers

pytestmark = pytest.mark.skipif(slow_lane() is None, reason="the slow lane needs epoll")

HEAD_START = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


class Batches(trio.abc.Instrument):
    """Counts scheduler batches, and what `counted` notes in each."""

    def __init__(self) -> None:
        self.number = 0
        self.counts: list[int] = [0]

    def counted(self) -> None:
        self.counts[-1] += 1

    def before_io_wait(self, timeout: float) -> None:
        self.number += 1
        self.counts.append(0)


class AdmittedPerBatch(Batches):
    """How many connections `server` admitted in each batch."""

    def __init__(self, server: HTTPServer) -> None:
        super().__init__()
        self.server = server
        self.seen = 0

    def before_io_wait(self, timeout: float) -> None:
        now = len(self.server._connections)
        self.counts[-1] = now - self.seen
        self.seen = now
        super().before_io_wait(timeout)


async def test_the_lane_wakes_a_few_reads_per_batch(nursery: trio.Nursery) -> None:
    lane = SlowLane(wakes_per_turn=3)
    nursery.start_soon(lane.run)
    pairs = [socket.socketpair() for _ in range(12)]
    batches = Batches()
    woke: list[int] = []

    async def read(sock: socket.socket) -> None:
        await lane.wait_readable(sock)
        batches.counted()
        woke.append(sock.recv(10)[0])

    trio.lowlevel.add_instrument(batches)
    try:
        async with trio.open_nursery() as readers:
            for ours, _ in pairs:
                readers.start_soon(read, ours)
            await trio.testing.wait_all_tasks_blocked()
            for n, (_, theirs) in enumerate(pairs):
                theirs.send(bytes([n]))  # (all ready at once)
    finally:
        trio.lowlevel.remove_instrument(batches)
    assert sorted(woke) == list(range(12))
    assert max(batches.counts) <= 3
    assert sum(1 for count in batches.counts if count) >= 4
    assert lane.waiting == 0
    for ours, theirs in pairs:
        ours.close()
        theirs.close()


async def test_a_read_waits_in_the_lane_again_after_a_wake(nursery: trio.Nursery) -> None:
    lane = SlowLane()
    nursery.start_soon(lane.run)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        received = []
        for line in (b"one", b"two"):  # (the registration is re-armed)
            theirs.send(line)
            with trio.fail_after(5):
                await lane.wait_readable(ours)
            received.append(ours.recv(10))
        assert received == [b"one", b"two"]


async def test_a_cancel_and_a_close_reach_a_read_in_the_lane(nursery: trio.Nursery) -> None:
    lane = SlowLane()
    nursery.start_soon(lane.run)
    ours, theirs = socket.socketpair()
    with theirs:
        with trio.move_on_after(0.5) as waited:
            await lane.wait_readable(ours)
        assert waited.cancelled_caught and lane.waiting == 0
        io = SocketIO(ours)
        io.lane = lane

        async def close_soon() -> None:
            await trio.testing.wait_all_tasks_blocked()
            assert lane.waiting == 1
            io.close()  # (from another task, as trio's notify_closing allows)

        nursery.start_soon(close_soon)
        with pytest.raises(trio.ClosedResourceError), trio.fail_after(5):
            await io.receive_some(100)
        assert lane.waiting == 0


def sockets_of(server: HTTPServer) -> list[SocketIO]:
    return [conn.interruptible for conn in server._connections]  # type: ignore[misc]


@pytest.mark.skipif(not interrupt_wakes_readers(), reason="plain sockets wait in trio's epoll")
async def test_a_head_in_pieces_waits_in_the_lane_and_is_still_served(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start_ok_server(nursery, head_timeout_s=4.0)
    tick = server.timeout_tick_s
    lane = server._limits.lane
    assert lane is not None
    client = await connect(server.ports[0])
    # (a first head waits with no task at all, `test_arrivals.py`: this is
    # about the heads after it, which their connection's task reads)
    await client.send(HEAD_START + b"\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 200
    await client.send(HEAD_START)  # (a head that needs another read)
    await trio.sleep(tick / 4)
    (io,) = sockets_of(server)
    assert io.lane is lane and lane.waiting == 1
    for n in range(3):  # (each line read through the lane)
        await client.send(b"X-More: %d\r\n" % n)
        await trio.sleep(tick / 4)
        assert lane.waiting == 1
    await client.send(b"\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 200
    await trio.sleep(3 * tick)
    assert io.lane is None  # (its head is in: back with the others)
    await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    with trio.fail_after(5):
        assert (await client.read_reply()).status == 200
    await client.stream.aclose()


@pytest.mark.skipif(not interrupt_wakes_readers(), reason="plain sockets wait in trio's epoll")
async def test_the_sweeper_ends_a_head_waiting_in_the_lane(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start_ok_server(nursery, head_timeout_s=1.0)
    lane = server._limits.lane
    assert lane is not None
    client = await connect(server.ports[0])
    await client.send(HEAD_START)
    with trio.fail_after(5):
        await trio.sleep(server.timeout_tick_s / 4)
        assert lane.waiting == 1
        assert (await client.read_reply()).status == 408
    await client.stream.aclose()
    with trio.fail_after(5):
        while server._connections:
            await trio.sleep(server.timeout_tick_s / 4)
    assert lane.waiting == 0


async def test_a_flood_of_connections_is_admitted_a_few_per_batch(
    nursery: trio.Nursery,
) -> None:
    server = await start_ok_server(nursery)
    port = server.ports[0]
    flood = 5 * ACCEPTS_PER_TURN
    batches = AdmittedPerBatch(server)
    trio.lowlevel.add_instrument(batches)
    try:
        # (connected without yielding: all wait in the listener's queue at once)
        plain = [socket.create_connection(("127.0.0.1", port)) for _ in range(flood)]
        with trio.fail_after(5):
            while len(server._connections) < flood:
                await trio.sleep(0.01)
    finally:
        trio.lowlevel.remove_instrument(batches)
    assert max(batches.counts) <= ACCEPTS_PER_TURN
    assert sum(batches.counts) >= flood
    clients = list(map(trio.socket.from_stdlib_socket, plain))
    with trio.fail_after(5):
        for sock in clients:
            await sock.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        for sock in clients:
            assert (await sock.recv(100)).startswith(b"HTTP/1.1 200")
    # (whole heads: none of their reads went to the slow lane)
    assert {io.lane for io in sockets_of(server)} == {None}
    assert len(sockets_of(server)) == flood
    for sock in clients:
        sock.close()
