"""Turns (``_trio/_turns.py``): work for no established client runs when the
scheduler is idle, one piece per idle moment, or after the longest wait."""

from __future__ import annotations

import math

import pytest
import trio
import trio.lowlevel
import trio.testing
from _support import connect, post, start_ok_server

from trio_mcp._trio import _turns
from trio_mcp._trio._turns import Turns, keep_turns, take_turn


async def busy(steps: int, log: list[str], clock: trio.testing.MockClock | None = None) -> None:
    """Runnable at every batch for `steps` batches (jumping `clock` 1 ms each)."""
    for _ in range(steps):
        if clock is not None:
            clock.jump(0.001)
        await trio.lowlevel.checkpoint()
    log.append("busy done")


async def piece(name: str, turns: Turns, log: list[str], after: int = 0) -> None:
    await turns.take()
    log.append(name)
    for i in range(after):  # (still runnable: no other piece's turn meanwhile)
        await trio.lowlevel.checkpoint()
        log.append(f"{name} {i}")


async def test_a_piece_waits_while_anything_else_is_runnable() -> None:
    log: list[str] = []
    turns = Turns(longest_wait_s=math.inf)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(turns.keep)
        nursery.start_soon(busy, 50, log)
        nursery.start_soon(piece, "piece", turns, log)
        with trio.fail_after(5):
            while "piece" not in log:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert log == ["busy done", "piece"]


async def test_one_piece_per_idle_moment() -> None:
    log: list[str] = []
    turns = Turns(longest_wait_s=math.inf)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(turns.keep)
        nursery.start_soon(piece, "a", turns, log, 3)
        await trio.testing.wait_all_tasks_blocked(0.001)  # (a waits)
        nursery.start_soon(piece, "b", turns, log, 3)
        with trio.fail_after(5):
            while len(log) < 8:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert log == ["a", "a 0", "a 1", "a 2", "b", "b 0", "b 1", "b 2"]


async def test_a_scheduler_never_idle_still_gives_turns_after_the_longest_wait(
    mock_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    turns = Turns(longest_wait_s=0.005)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(turns.keep)
        nursery.start_soon(piece, "piece", turns, log)
        nursery.start_soon(busy, 1000, log, mock_clock)
        with trio.fail_after(5):
            while "busy done" not in log:
                await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert log[0] == "piece" and log[-1] == "busy done"


async def test_a_piece_cancelled_while_waiting_leaves_the_queue() -> None:
    log: list[str] = []
    turns = Turns(longest_wait_s=math.inf)
    cancelled: list[BaseException] = []

    async def cancelled_piece(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            try:
                await turns.take()  # (no keeper yet: never given)
            except trio.Cancelled as exc:
                cancelled.append(exc)
                raise

    async with trio.open_nursery() as nursery:
        scope = await nursery.start(cancelled_piece)
        await trio.testing.wait_all_tasks_blocked()
        assert turns.waiting == 1
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert turns.waiting == 0 and len(cancelled) == 1
        nursery.start_soon(turns.keep)
        nursery.start_soon(piece, "next", turns, log)
        with trio.fail_after(5):
            while not log:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert log == ["next"]


async def test_the_keepers_end_gives_every_waiting_piece_its_turn() -> None:
    log: list[str] = []
    turns = Turns(longest_wait_s=math.inf)
    async with trio.open_nursery() as outer:
        with trio.CancelScope() as keeper:
            outer.start_soon(piece, "a", turns, log)
            outer.start_soon(piece, "b", turns, log)
            await trio.testing.wait_all_tasks_blocked()
            assert turns.waiting == 2
            keeper.cancel()
            await turns.keep()
        with trio.fail_after(5):
            while len(log) < 2:
                await trio.lowlevel.checkpoint()
        outer.cancel_scope.cancel()
    assert sorted(log) == ["a", "b"]


async def test_without_a_keeper_a_turn_is_a_checkpoint() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await take_turn()
    await take_turn()  # (returns)


async def test_the_first_keeper_of_a_run_serves_every_take_turn() -> None:
    log: list[str] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_turns)
        await nursery.start(keep_turns)  # (a second server's: returns at once)

        async def taker() -> None:
            await take_turn()
            log.append("turn")

        nursery.start_soon(busy, 30, log)
        nursery.start_soon(taker)
        with trio.fail_after(5):
            while len(log) < 2:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert log == ["busy done", "turn"]
    await take_turn()  # (the keeper has gone: a checkpoint again)


async def forever_busy() -> None:
    """Keeps the scheduler from ever being idle (until cancelled)."""
    while True:
        await trio.lowlevel.checkpoint()


async def test_a_server_serves_its_established_clients_before_it_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_turns, "LONGEST_WAIT_S", math.inf)  # (only idle moments give turns)
    async with trio.open_nursery() as nursery:
        server = await start_ok_server(nursery)
        port = server.ports[0]
        established = await connect(port)
        await established.send(post())
        assert (await established.read_reply()).status == 200
        busy = trio.CancelScope()
        nursery.start_soon(forever_busy_in, busy)
        newcomer = await connect(port)  # (the kernel completes the handshake)
        await newcomer.send(post())
        for _ in range(20):  # the established client is served meanwhile...
            await established.send(post())
            assert (await established.read_reply()).status == 200
        with trio.move_on_after(0.2):  # ...and the newcomer is not
            await newcomer.read_reply()
            raise AssertionError("accepted while the scheduler was busy")
        busy.cancel()
        with trio.fail_after(5):  # once the scheduler idles, it is
            assert (await newcomer.read_reply()).status == 200
        await established.stream.aclose()
        await newcomer.stream.aclose()
        nursery.cancel_scope.cancel()


async def forever_busy_in(scope: trio.CancelScope) -> None:
    with scope:
        await forever_busy()


async def test_a_scheduler_that_never_idles_still_accepts() -> None:
    async with trio.open_nursery() as nursery:
        server = await start_ok_server(nursery)
        nursery.start_soon(forever_busy)
        with trio.fail_after(5):
            for _ in range(5):
                client = await connect(server.ports[0])
                await client.send(post())
                assert (await client.read_reply()).status == 200
                await client.stream.aclose()
        nursery.cancel_scope.cancel()
