"""`Outbox`, the live end of a long-lived SSE stream: direct writes, queueing,
the too-slow rule, flushing on close, keepalives (its own, or written by the
shared `Keepalives` task) and backpressure.

The writer here is a stand-in with the `ResponseWriter` streaming interface
whose socket takes a set number of bytes and whose awaited writes can be held
back, so each path of `Outbox` can be driven on purpose. The end-to-end tests
of GET, listen and legacy streams (tests/mcp) go through real sockets.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_mcp._mcp._streams import KEEPALIVE, Keepalives, Outbox


class Writer:
    """Records what went out, and how: directly, or awaited by the stream's task."""

    def __init__(self, room: int = 1 << 30) -> None:
        self.room = room  # bytes the socket takes without blocking
        self.direct: list[bytes] = []
        self.awaited: list[bytes] = []
        self.gate: trio.Event | None = None  # awaited writes wait for it when set
        self.broken = False

    def send_nowait(self, piece: bytes) -> bytes | None:
        if self.broken:
            return None
        taken = piece[: self.room]
        self.room -= len(taken)
        if taken:
            self.direct.append(taken)
        return piece[len(taken) :]

    async def _awaited(self, data: bytes) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.awaited.append(data)

    async def send(self, piece: bytes) -> None:
        await self._awaited(piece)

    async def send_framed(self, data: bytes) -> None:
        await self._awaited(data)

    def wire(self) -> bytes:
        return b"".join(self.direct) + b"".join(self.awaited)

    def peer_watch(self) -> object:
        return self.watch

    watch: object = None  # the transport cannot watch the peer unless a test sets one


async def test_frames_go_straight_to_the_socket_once_the_pump_runs(nursery) -> None:
    outbox, writer = Outbox(), Writer()
    assert outbox.offer(b"early")  # before the pump: queued, not written
    assert writer.direct == []
    nursery.start_soon(outbox.pump, writer, 60.0)
    await trio.testing.wait_all_tasks_blocked()
    assert writer.awaited == [b"early"]
    assert outbox.offer(b"one")
    assert outbox.offer(b"two")
    assert writer.direct == [b"one", b"two"]  # no task switch needed


async def test_a_partial_write_is_finished_by_the_pump_before_anything_else(nursery) -> None:
    outbox, writer = Outbox(), Writer()
    nursery.start_soon(outbox.pump, writer, 60.0)
    await trio.testing.wait_all_tasks_blocked()
    writer.room = 3
    writer.gate = trio.Event()
    assert outbox.offer(b"abcdef")
    assert outbox.offer(b"ghi")  # must wait behind the rest of abcdef
    assert writer.direct == [b"abc"]
    writer.room = 1 << 30
    writer.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert writer.wire() == b"abcdefghi"
    assert outbox.offer(b"jkl")  # idle again: direct
    assert writer.direct[-1] == b"jkl"


async def test_a_client_that_falls_limit_bytes_behind_is_closed(nursery) -> None:
    outbox, writer = Outbox(limit_bytes=3), Writer(room=0)
    writer.gate = trio.Event()
    done = trio.Event()

    async def pump() -> None:
        await outbox.pump(writer, 60.0)
        done.set()

    nursery.start_soon(pump)
    await trio.testing.wait_all_tasks_blocked()
    assert outbox.offer(b"0")  # the socket is full: the pump takes it, and waits
    await trio.testing.wait_all_tasks_blocked()
    assert [outbox.offer(b"%d" % n) for n in range(1, 5)] == [True, True, True, False]
    assert outbox.closed
    assert not outbox.offer(b"late")
    writer.gate.set()
    await done.wait()
    assert writer.wire() == b"0123"  # what was queued before the close still goes out


async def test_close_flushes_the_queue_then_the_pump_returns(nursery) -> None:
    outbox, writer = Outbox(), Writer()
    for n in range(3):
        outbox.offer(b"%d" % n)
    outbox.close()
    with trio.fail_after(1):
        await outbox.pump(writer, 60.0)
    assert writer.awaited == [b"0", b"1", b"2"]


async def test_keepalives_only_while_idle(autojump_clock) -> None:
    outbox, writer = Outbox(), Writer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump, writer, 15.0)
        await trio.sleep(10)
        outbox.offer(b"event")
        await trio.sleep(14.5)  # 24.5 s in: still no keepalive, the wait restarted
        assert writer.awaited == []
        await trio.sleep(1)
        assert writer.awaited == [KEEPALIVE]
        outbox.close()
    assert writer.direct == [b"event"]


async def test_a_gone_client_closes_the_outbox(nursery) -> None:
    outbox, writer = Outbox(), Writer()
    nursery.start_soon(outbox.pump, writer, 60.0)
    await trio.testing.wait_all_tasks_blocked()
    writer.broken = True
    assert not outbox.offer(b"lost")
    assert outbox.closed


async def test_send_waits_for_room_instead_of_closing(nursery) -> None:
    outbox, writer = Outbox(limit_bytes=2), Writer(room=0)
    writer.gate = trio.Event()
    nursery.start_soon(outbox.pump, writer, 60.0)
    await trio.testing.wait_all_tasks_blocked()
    results: list[bool] = []

    async def sender() -> None:
        for n in range(6):
            results.append(await outbox.send(b"%d" % n))

    nursery.start_soon(sender)
    await trio.testing.wait_all_tasks_blocked()
    assert len(results) == 3  # one with the pump, two queued, the fourth waits
    assert not outbox.closed
    writer.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert results == [True] * 6
    assert writer.wire() == b"012345"


async def test_a_client_that_closes_its_end_while_idle_ends_the_pump(autojump_clock) -> None:
    outbox, writer = Outbox(), Writer()
    closed = trio.Event()

    async def wait_peer() -> bool:
        await closed.wait()
        return True

    writer.watch = wait_peer
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump, writer, 15.0)
        await trio.sleep(1)
        assert outbox.offer(b"event")  # still idle, still watching
        closed.set()
        with trio.fail_after(1):  # long before the first keepalive
            while not outbox.closed:
                await trio.sleep(0.01)
    assert writer.broken
    assert writer.awaited == []  # no keepalive was written


async def test_bytes_from_the_client_stop_the_watch_not_the_stream(autojump_clock) -> None:
    outbox, writer = Outbox(), Writer()
    watches = 0

    async def wait_peer() -> bool:
        nonlocal watches
        watches += 1
        return False  # the client sent something

    writer.watch = wait_peer
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump, writer, 15.0)
        await trio.sleep(16)
        assert writer.awaited == [KEEPALIVE]  # the stream goes on
        outbox.close()
    assert watches == 1


async def stalled(nursery, limit_bytes: int) -> tuple[Outbox, Writer]:
    """An outbox whose pump holds one frame (b"x") for a socket that takes nothing."""
    outbox, writer = Outbox(limit_bytes=limit_bytes), Writer(room=0)
    writer.gate = trio.Event()
    nursery.start_soon(outbox.pump, writer, 60.0)
    await trio.testing.wait_all_tasks_blocked()
    assert outbox.offer(b"x")
    await trio.testing.wait_all_tasks_blocked()
    return outbox, writer


async def test_the_queue_is_bounded_in_bytes_not_frames(nursery) -> None:
    """Once 256 frames of any size: 30 unread streams of 1 MiB updates took +512 MB."""
    outbox, _ = await stalled(nursery, limit_bytes=1000)
    assert outbox.offer(b"a" * 600)
    assert outbox.offer(b"b" * 400)  # 1,000 bytes waiting: the bound
    assert not outbox.offer(b"c")  # one more byte: too slow, dropped
    assert outbox.closed


async def test_one_frame_larger_than_the_bound_still_passes(nursery) -> None:
    outbox, writer = await stalled(nursery, limit_bytes=10)
    assert outbox.offer(b"y" * 100)  # nothing else waits
    assert not outbox.closed
    writer.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert writer.wire() == b"x" + b"y" * 100


async def test_a_running_keepalives_task_writes_them_while_the_pump_waits_once(
    autojump_clock,
) -> None:
    keepalives = Keepalives(15.0)
    outboxes = [Outbox() for _ in range(3)]
    writers = [Writer() for _ in outboxes]
    watches = 0

    async def wait_peer() -> bool:
        nonlocal watches
        watches += 1
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with trio.open_nursery() as nursery:
        await nursery.start(keepalives.run)
        for outbox, writer in zip(outboxes, writers, strict=True):
            writer.watch = wait_peer
            nursery.start_soon(outbox.pump, writer, 15.0, keepalives)
        await trio.sleep(61)
        # four each, straight to the socket from the shared task; each pump
        # started its wait for the client once and never woke
        assert [w.direct for w in writers] == [[KEEPALIVE] * 4] * 3
        assert [w.awaited for w in writers] == [[]] * 3
        assert watches == 3
        nursery.cancel_scope.cancel()
    assert not keepalives.running


async def test_a_write_puts_off_the_shared_keepalive_and_a_closed_stream_leaves(
    autojump_clock,
) -> None:
    keepalives = Keepalives(15.0)
    outbox, writer = Outbox(), Writer()
    async with trio.open_nursery() as nursery:
        await nursery.start(keepalives.run)
        nursery.start_soon(outbox.pump, writer, 15.0, keepalives)
        await trio.sleep(10)
        outbox.offer(b"event")
        await trio.sleep(14.5)  # 24.5 s in: none yet, the event was 14.5 s ago
        assert writer.direct == [b"event"]
        await trio.sleep(1)
        assert writer.direct == [b"event", KEEPALIVE]
        outbox.close()
        assert outbox._writer is None  # (while the task still holds the outbox)
        await trio.sleep(30)
        assert writer.direct == [b"event", KEEPALIVE]
        assert keepalives._due == []  # (dropped when its keepalive fell due)
        nursery.cancel_scope.cancel()


async def test_the_pump_keeps_its_own_keepalives_when_the_task_is_not_running(
    autojump_clock,
) -> None:
    outbox, writer = Outbox(), Writer()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump, writer, 15.0, Keepalives(15.0))
        await trio.sleep(16)
        assert writer.awaited == [KEEPALIVE]
        outbox.close()


async def test_a_keepalive_that_fails_closes_its_stream_and_the_task_goes_on(
    autojump_clock, caplog
) -> None:
    class Failing(Writer):
        def send_nowait(self, piece: bytes) -> bytes | None:
            raise RuntimeError("a writer that fails")

    keepalives = Keepalives(15.0)
    bad, good = Outbox(), Outbox()
    good_writer = Writer()
    async with trio.open_nursery() as nursery:
        await nursery.start(keepalives.run)
        nursery.start_soon(bad.pump, Failing(), 15.0, keepalives)
        nursery.start_soon(good.pump, good_writer, 15.0, keepalives)
        await trio.sleep(31)
        assert bad.closed
        assert good_writer.direct == [KEEPALIVE, KEEPALIVE]
        assert keepalives.running
        nursery.cancel_scope.cancel()
    assert "a stream's keepalive failed; going on" in caplog.text
