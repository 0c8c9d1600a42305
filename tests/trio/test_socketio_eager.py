"""SocketIO's read after an answer: yield and read while busy, wait when quiet.

The socket is a real connected pair; a thin proxy counts the ``recv`` calls
and the module's ``wait_readable`` is wrapped to count the waits.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio

from trio_mcp._trio import _socketio
from trio_mcp._trio._socketio import _EAGER_PAUSE, _YIELD_EVERY, SocketIO


class CountingSocket:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.recvs = 0
        self.empty_recvs = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, n: int) -> bytes:
        self.recvs += 1
        try:
            return self.sock.recv(n)
        except BlockingIOError:
            self.empty_recvs += 1
            raise

    def send(self, data: Any) -> int:
        return self.sock.send(data)


@pytest.fixture
def pair(monkeypatch: pytest.MonkeyPatch) -> Any:
    ours, peer = socket.socketpair()
    io = SocketIO(ours)
    counting = CountingSocket(ours)
    io.sock = counting  # type: ignore[assignment]
    waits = [0]
    real_wait = _socketio.wait_readable

    async def counted_wait(sock: Any) -> None:
        waits[0] += 1
        await real_wait(sock)

    monkeypatch.setattr(_socketio, "wait_readable", counted_wait)
    yield io, counting, peer, waits
    ours.close()
    peer.close()


async def test_a_request_that_is_already_there_is_read_without_waiting(pair) -> None:
    io, counting, peer, waits = pair
    await io.send_all(b"answer")
    peer.sendall(b"next request")  # arrives while other tasks run
    assert await io.receive_some(100) == b"next request"
    assert (waits[0], counting.recvs) == (0, 1)
    assert peer.recv(100) == b"answer"


async def test_a_quiet_connection_waits_at_once_after_one_empty_read(pair) -> None:
    io, counting, peer, waits = pair

    async def answer_then_read() -> bytes:
        await io.send_all(b"a")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(later_request)
            data = await io.receive_some(100)
        return data

    async def later_request() -> None:
        await trio.sleep(0.01)
        peer.sendall(b"r")

    assert await answer_then_read() == b"r"
    assert (counting.empty_recvs, waits[0]) == (1, 1)  # tried, found nothing, waited
    for _ in range(_EAGER_PAUSE):
        assert await answer_then_read() == b"r"
    assert counting.empty_recvs == 1  # no futile reads while paused
    assert waits[0] == 1 + _EAGER_PAUSE
    assert await answer_then_read() == b"r"
    assert counting.empty_recvs == 2  # then it tries again


async def test_a_busy_connection_sees_cancellation_within_a_few_answers(pair) -> None:
    io, _, peer, waits = pair
    rounds = 0
    with trio.CancelScope() as scope:
        scope.cancel()
        # the client always has its next request there: no read ever waits
        while rounds < 10 * _YIELD_EVERY:
            rounds += 1
            await io.send_all(b"a")
            peer.sendall(b"r")
            assert await io.receive_some(100) == b"r"
            assert peer.recv(100) == b"a"
    assert scope.cancelled_caught
    assert rounds <= _YIELD_EVERY
    assert waits[0] == 0


async def test_the_read_after_an_answer_lets_other_tasks_run(pair) -> None:
    io, _, peer, waits = pair
    turns = [0]

    async def other() -> None:
        while True:
            turns[0] += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await trio.lowlevel.checkpoint()  # it has started (it never blocks)
        before = turns[0]
        for _ in range(20):
            await io.send_all(b"a")
            peer.sendall(b"r")
            assert await io.receive_some(100) == b"r"
            peer.recv(100)
        assert turns[0] - before >= 15  # about one turn for it per read
        nursery.cancel_scope.cancel()
    assert waits[0] == 0


async def test_a_waiting_read_keeps_no_exception_alive() -> None:
    """A read that found nothing waits outside its BlockingIOError handler: a
    coroutine suspended in an except clause keeps the exception, its
    traceback and a frame alive for as long as the connection waits."""
    import gc

    pairs = [socket.socketpair() for _ in range(10)]
    try:
        async with trio.open_nursery() as nursery:
            for ours, _ in pairs:
                nursery.start_soon(SocketIO(ours).receive_some, 100)
            await trio.testing.wait_all_tasks_blocked()
            held = [o for o in gc.get_objects() if isinstance(o, BlockingIOError)]
            for _, peer in pairs:
                peer.send(b"x")
        assert held == []
    finally:
        for ours, peer in pairs:
            ours.close()
            peer.close()
