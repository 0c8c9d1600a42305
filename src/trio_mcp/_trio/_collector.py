"""Full garbage collections at a pace, while trio-mcp runs trio itself.

CPython's generational collector (3.13 and earlier) runs a full collection
whenever the objects promoted to the oldest generation since the last one
reach a quarter of those that survived it. Each full collection walks every
tracked object and stops the event loop meanwhile. A server holding thousands
of connections promotes their objects about as fast as connections come and
go, so under churn it ran one nearly every second, each long enough to hold
every request behind it (benchmarks/README.md, "Garbage collection").

`paced_full_collections` turns the automatic full collections off for the
length of a run, and `collect_fully` runs one every interval when younger
collections have promoted anything since the last. Cyclic garbage that
reaches the oldest generation then waits up to an interval to be freed.

It also collects the middle generation more often (after every three
young collections instead of every eleven: CPython collects a generation
when its count is past the threshold, 2 here, 10 by default): the same
work, in shorter pauses. The young generation's count is net of deaths,
old objects' included, so while connections come and go as fast as they
die, the young and middle lists grow far past their thresholds, and a
middle collection of 60,000 objects held every request behind it for
10-50 ms.

While the full collections are paced, the young and middle ones wait for a
turn (`YoungCollections`, `_turns.py`). An automatic one runs inside the
scheduler batch whose allocation crossed the threshold and lengthens it
(0.4 ms on average under the soak's attack) for every request in that
batch; in a turn it runs in a batch of its own, when no request is
runnable. No timer looks at the count (a trio timeout is a cancellation,
too dear to run every few milliseconds): a server looks every `LOOK_EVERY`
requests and wakes the parked collector when the count is due. The
automatic threshold stays, `BACKSTOP` times higher, for allocations made
where no request is answered.

With freezing on, what start-up built and what survives each paced full
collection is moved to the collector's permanent generation
(``gc.freeze``), which no collection walks: a full collection then costs
what reached the oldest generation since the previous one, not every object
the server holds (10,000 idle GET streams are about 750,000 tracked
objects, and a full collection over them held every request for 0.3-0.4 s).
Freezing does not keep anything alive: a frozen object whose last reference
goes is freed at once, as ever. What it gives up is the one thing only the
collector does: cyclic garbage made of frozen objects is never freed while
the run lasts. Whatever a finished request, stream or connection leaves is
freed by reference counting (the benchmarks count what was left frozen);
an application that keeps long-lived objects in reference cycles and drops
them should turn freezing off.

With trimming on (glibc only), each interval also hands the C allocator's
free pages back to the system (``malloc_trim``): objects over 512 bytes
(buffers, bodies, large dicts) come from glibc's heap, which otherwise keeps
every page it ever grew to while long-lived objects are scattered through
it, so RSS stays at the high-water mark of the worst moment.

Process-wide, so applied only where trio-mcp owns the process's trio run
(``run``, ``run_mcp``, ``trio-mcp run``), and only on the generational
collector: the incremental one (a third threshold of 0) already keeps its
pauses short, and a collector someone disabled stays disabled. Whatever was
frozen is unfrozen when the run ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Callable, Iterator
from typing import Final

import trio

from ._turns import Parked, take_turn

#: A third threshold no count of younger collections reaches.
_NEVER: Final = 2**31 - 1
#: The middle generation's threshold while paced (a middle collection
#: after every three young ones).
_MIDDLE_EVERY: Final = 2
#: Requests a server answers between two looks at the young count (a
#: tools/call nets about five tracked objects; the threshold is 700).
LOOK_EVERY: Final = 16
#: The automatic young threshold while young collections wait for turns, as
#: a multiple of the collector's own: the allocations of a turn's wait
#: (5 ms at most of a saturated server) fit below it.
BACKSTOP: Final = 4


def generational() -> bool:
    """Whether the running collector is the generational one, enabled."""
    return gc.isenabled() and gc.get_threshold()[2] != 0


@contextlib.contextmanager
def paced_full_collections(interval_s: float | None) -> Iterator[float | None]:
    """While entered, no automatic full collections and more frequent middle
    ones (when `interval_s` is set and the collector is generational);
    yields the interval when that applied, else None. The caller then runs
    `collect_fully` beside its work."""
    if interval_s is None or not generational():
        yield None
        return
    saved = gc.get_threshold()
    gc.set_threshold(saved[0], min(saved[1], _MIDDLE_EVERY), _NEVER)
    try:
        yield interval_s
    finally:
        gc.set_threshold(*saved)


class YoungCollections:
    """The young and middle collections of a process, each in a turn."""

    __slots__ = ("threshold", "_collector")

    def __init__(self, threshold: int) -> None:
        #: The young count past which a collection is due (the collector's
        #: own threshold, which CPython compares the same way).
        self.threshold = threshold
        #: The collecting task, while it waits for a collection to be due.
        self._collector = Parked()

    def look(self) -> None:
        """Wake the collecting task if a young collection is due (from a
        task of the trio run that collects)."""
        if self._collector.task is not None and gc.get_count()[0] > self.threshold:
            self._collector.wake()

    async def collect(self, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        """Each time `look` finds a collection due, a young one in a turn (a
        middle one when that generation is due too, as CPython would), until
        the cancel scope it starts with (``await nursery.start(...)``) is
        cancelled."""
        middle_threshold = gc.get_threshold()[1]
        with trio.CancelScope() as scope:
            task_status.started(scope)
            while True:
                await self._collector.wait()
                await take_turn()
                gc.collect(1 if gc.get_count()[1] > middle_threshold else 0)


#: The young collections in turns, while `young_collections_in_turns` applies.
_young: YoungCollections | None = None


def young_collections() -> YoungCollections | None:
    """The process's young collections in turns, if they apply now (a
    server looks for them when it is made)."""
    return _young


@contextlib.contextmanager
def young_collections_in_turns(enabled: bool) -> Iterator[YoungCollections | None]:
    """While entered, automatic young collections only at `BACKSTOP` times
    the threshold (when `enabled` and the collector is generational); yields
    the `YoungCollections` that keep the threshold instead, else None. The
    caller then runs its `collect` beside its work."""
    global _young
    if not (enabled and generational()) or _young is not None:
        yield None
        return
    saved = gc.get_threshold()
    gc.set_threshold(saved[0] * BACKSTOP, *saved[1:])
    _young = YoungCollections(saved[0])
    try:
        yield _young
    finally:
        _young = None
        gc.set_threshold(*saved)


@contextlib.contextmanager
def frozen_survivors(enabled: bool) -> Iterator[bool]:
    """While entered, `freeze_survivors` may freeze (when `enabled` and the
    collector is generational); yields whether it may. Unfreezes on the way
    out, so the process's collector walks everything again after the run."""
    if not (enabled and generational()):
        yield False
        return
    try:
        yield True
    finally:
        gc.unfreeze()


def heap_trimmer(enabled: bool) -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)`` (hands every free page of the allocator's
    heaps back to the system) when `enabled` and the process's C library has
    it; None otherwise (musl, macOS, Windows)."""
    if not (enabled and sys.platform.startswith("linux")):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


def freeze_survivors() -> None:
    """A full collection, then every object that survived it moves to the
    permanent generation, which later collections do not walk."""
    gc.collect()
    gc.freeze()


async def collect_fully(
    interval_s: float,
    freeze: bool = False,
    trim: Callable[[], object] | None = None,
    *,
    task_status: trio.TaskStatus[trio.CancelScope],
) -> None:
    """Every `interval_s`, a full collection if anything was promoted since
    (followed by `freeze_survivors`'s freeze when `freeze`), then `trim`
    (`heap_trimmer`'s) if given, until the cancel scope it starts with
    (``await nursery.start(...)``) is cancelled."""
    with trio.CancelScope() as scope:
        task_status.started(scope)
        while True:
            await trio.sleep(interval_s)
            if gc.get_count()[2]:  # (middle-generation collections since the last full one)
                if freeze:
                    freeze_survivors()
                else:
                    gc.collect()
            if trim is not None:
                trim()  # (after the collection: what it freed goes back too)
