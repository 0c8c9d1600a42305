"""Turns: work done for no established client waits for an idle scheduler.

trio runs every task that is runnable at the start of a scheduler batch, in
one go. A well-behaved request on a kept-alive connection becomes runnable
when its bytes arrive, and then waits for the rest of the batch in progress
and for the tasks ahead of it in its own. Under attack most of those are
hostile: accepts of connections that will trickle or vanish, slow heads'
lines, the endings of overdue connections and vanished calls, broadcasts.
Cutting that work into small pieces (a few per batch) still leaves it
sharing batches with the requests.

So each such piece takes a turn (`take_turn`) before it runs: the turn
keeper (`Turns.keep`, one task per trio run, started with the first
server's clock) hands out one turn at a time, when nothing else is
runnable and no I/O is ready (trio's `wait_all_tasks_blocked`), or after
`LONGEST_WAIT_S` when the scheduler is never idle, so that a server
saturated by its established clients still accepts and ends connections.
A piece then runs in a batch of its own, and a request that arrives
meanwhile waits for that one piece at most.

A task cancelled while it waits for its turn leaves the queue (the
cancellation is raised, as at a checkpoint). Where no keeper runs (a
server's connections served by `handle_stream` without `serve`, or after
the keeper's server has stopped), a turn is a plain checkpoint.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import trio
from trio.lowlevel import Abort, RaiseCancelT, Task, current_task, reschedule, wait_task_rescheduled
from trio.testing import wait_all_tasks_blocked

#: How long a turn waits for an idle scheduler before it is given anyway.
LONGEST_WAIT_S: Final = 0.005


class Parked:
    """A task that waits (`wait`) until another of its run wakes it (`wake`)."""

    __slots__ = ("task",)

    def __init__(self) -> None:
        #: The waiting task, while it waits.
        self.task: Task | None = None

    async def wait(self) -> None:
        """Wait until woken (a checkpoint: it may raise Cancelled)."""
        self.task = current_task()

        def abort(_: RaiseCancelT) -> Abort:
            self.task = None
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    def wake(self) -> None:
        """Wake the waiting task, if one waits."""
        task = self.task
        if task is not None:
            self.task = None
            reschedule(task)


class Turns:
    """The queue of pieces waiting for their turn, and its keeper."""

    __slots__ = ("_waiting", "_keeper", "longest_wait_s")

    def __init__(self, longest_wait_s: float) -> None:
        self._waiting: deque[Task] = deque()
        #: The keeper, while it waits for a piece to come (nothing waits).
        self._keeper = Parked()
        self.longest_wait_s = longest_wait_s

    @property
    def waiting(self) -> int:
        """How many pieces wait for their turn now."""
        return len(self._waiting)

    async def take(self) -> None:
        """Wait for this task's turn (a checkpoint: it may raise Cancelled)."""
        task = current_task()
        self._waiting.append(task)
        self._keeper.wake()

        def abort(_: RaiseCancelT) -> Abort:
            self._waiting.remove(task)
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    async def keep(self) -> None:
        """Give turns, one per idle moment, until cancelled; then give every
        waiting piece its turn at once (none is left waiting)."""
        waiting = self._waiting
        longest = self.longest_wait_s
        try:
            while True:
                if not waiting:
                    await self._keeper.wait()
                with trio.move_on_after(longest):
                    await wait_all_tasks_blocked()
                if waiting:
                    reschedule(waiting.popleft())
        finally:
            self._keeper.task = None
            while waiting:
                reschedule(waiting.popleft())


_TURNS: trio.lowlevel.RunVar[Turns | None] = trio.lowlevel.RunVar("trio_mcp_turns", None)


async def take_turn() -> None:
    """Wait for a turn of this run's keeper (a checkpoint where none runs)."""
    turns = _TURNS.get()
    if turns is None:
        await trio.lowlevel.checkpoint()
    else:
        await turns.take()


async def keep_turns(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Be this run's turn keeper until cancelled (the first caller is; any
    other returns at once)."""
    if _TURNS.get() is not None:
        task_status.started()
        return
    turns = Turns(LONGEST_WAIT_S)
    _TURNS.set(turns)
    task_status.started()
    try:
        await turns.keep()
    finally:
        _TURNS.set(None)
