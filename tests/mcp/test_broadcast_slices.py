"""A broadcast to every session: a slice of sessions per scheduler step, and
numbered and kept only for the sessions a client could resume. A sweep that
ends many sessions releases a slice of them per step too.

Issue 22: with a thousand sessions, one broadcast was one step of a few
milliseconds that every request behind it waited for, and it filled a buffer
for each session, even for those that never opened a GET stream (no client
of theirs can hold an event id of one to resume from).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from trio_mcp._config import MCPConfig
from trio_mcp._mcp._fanout import _BROADCAST_SLICE, _RELEASE_SLICE, Broadcaster, Sweeper
from trio_mcp._mcp._streams import Outbox
from trio_mcp._stores._stores import memory_stores

MIB = 1024 * 1024
TOOLS_CHANGED = "notifications/tools/list_changed"


def _fan_out() -> tuple[Broadcaster, Sweeper]:
    config = MCPConfig(max_sessions=4096, max_sessions_per_client=4096)
    stores = memory_stores(config, grace_s=0.0)
    return Broadcaster(config, stores), Sweeper(config, stores)


async def _sessions(broadcaster: Broadcaster, count: int) -> list[str]:
    made = []
    for _ in range(count):
        session = await broadcaster.sessions.create(None, "2025-11-25", {}, {})
        made.append(session.id)
    return made


async def _attach(broadcaster: Broadcaster, session_ids: list[str]) -> dict[str, Outbox]:
    outboxes = {}
    for session_id in session_ids:
        outboxes[session_id] = Outbox(limit_bytes=MIB)  # not pumped: frames queue
        assert await broadcaster.bus.attach(session_id, outboxes[session_id])
    return outboxes


async def steps_of_another_task(work: Callable[[], Awaitable[None]]) -> int:
    """How many steps another task, always runnable, takes while `work` runs."""
    steps = 0
    done = False

    async def other_task() -> None:
        nonlocal steps
        while not done:
            steps += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await trio.lowlevel.checkpoint()
        steps = 0
        await work()
        during = steps
        done = True
    return during


async def test_a_broadcast_to_many_sessions_lets_other_tasks_run_between_slices() -> None:
    broadcaster, _ = _fan_out()
    session_ids = await _sessions(broadcaster, 3 * _BROADCAST_SLICE + 1)
    outboxes = await _attach(broadcaster, session_ids)
    during = await steps_of_another_task(
        lambda: broadcaster._deliver_to_sessions(TOOLS_CHANGED, {}, None)
    )
    # Four slices, so four steps of the broadcaster. The other task runs once
    # in each, before or after it: at least in the two between the first and
    # the last (before the change, never: the broadcast was one step).
    assert during >= 2
    assert all(len(outbox._queue) == 1 for outbox in outboxes.values())
    events = broadcaster.events
    assert all(len(events._sessions[s].streams[0]) == 1 for s in session_ids)


async def test_a_session_that_ends_during_a_broadcast_gets_no_buffer_back() -> None:
    broadcaster, sweeper = _fan_out()
    session_ids = await _sessions(broadcaster, 2 * _BROADCAST_SLICE)
    await _attach(broadcaster, session_ids)
    last = session_ids[-1]  # in the second slice

    async def end_the_last() -> None:
        await sweeper.release(last)
        broadcaster.sessions.table.delete(last)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(end_the_last)  # runs at the step between the slices
        await broadcaster._deliver_to_sessions(TOOLS_CHANGED, {}, None)
    events = broadcaster.events._sessions
    assert last not in events  # the memory store made none for it again
    assert all(session_id in events for session_id in session_ids[:-1])


async def test_a_broadcast_is_kept_only_for_sessions_that_have_had_a_stream() -> None:
    broadcaster, _ = _fan_out()
    made = await _sessions(broadcaster, 9)
    never, streaming, left = made[:3], made[3:6], made[6:]
    await _attach(broadcaster, streaming)
    for session_id, outbox in (await _attach(broadcaster, left)).items():
        broadcaster.bus.detach(session_id, outbox)  # the client lost it: it may resume
    for _ in range(2):
        await broadcaster._deliver_to_sessions(TOOLS_CHANGED, {}, None)
    events = broadcaster.events._sessions
    assert set(events) == set(streaming) | set(left)
    assert all(len(events[s].streams[0]) == 2 for s in streaming + left)
    assert broadcaster.events.buffered_sessions() == 6

    # a session's first stream takes what comes after it; one that ended is forgotten
    await _attach(broadcaster, never[:1])
    await broadcaster.bus.take_over(never[1], Outbox(limit_bytes=MIB))
    broadcaster.bus.release(streaming[0])
    await broadcaster._deliver_to_sessions(TOOLS_CHANGED, {}, None)
    assert [len(events[s].streams[0]) for s in never[:2]] == [1, 1]
    assert never[2] not in events
    assert len(events[streaming[0]].streams[0]) == 2


async def test_a_sweep_that_ends_many_sessions_lets_other_tasks_run_between_slices() -> None:
    """A flood's sessions expire together: a sweep once released a few hundred
    in one step (the soak's worst seconds, 14-15 ms)."""
    broadcaster, sweeper = _fan_out()
    session_ids = await _sessions(broadcaster, 3 * _RELEASE_SLICE + 1)
    during = await steps_of_another_task(lambda: sweeper._sweep(10 * 1800.0))  # (all idle)
    assert during >= 2  # between the first slice and the last (before: never)
    assert broadcaster.sessions.count() == 0
    assert [await broadcaster.sessions.get(s) for s in session_ids] == [None] * len(session_ids)
