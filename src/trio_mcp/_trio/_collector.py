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

It also collects the middle generation more often (every second young
collection instead of every tenth): the same work, in pauses a fifth as
long. The young generation's count is net of deaths, old objects' included,
so while connections come and go as fast as they die, the young and middle
lists grow far past their thresholds, and a middle collection of 60,000
objects held every request behind it for 10-50 ms.

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

#: A third threshold no count of younger collections reaches.
_NEVER: Final = 2**31 - 1
#: Young collections per middle-generation collection, while paced.
_MIDDLE_EVERY: Final = 2


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
