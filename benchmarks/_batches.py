"""A trio instrument that times each scheduler batch in CPU time, with and
without the garbage collections that ran in it.

A batch is what trio runs between two waits for I/O: every task step in it
delays every request whose task is scheduled behind it. Wall-clock latency
on a shared machine mixes that delay with other processes' use of the same
CPUs; ``time.thread_time`` counts only this thread's CPU, so the batch
times measure the server's own work, whatever else runs.

`BatchTimes` keeps cumulative counts (batches, steps, CPU) and a histogram of
batch CPU times, which a caller snapshots and subtracts to get a phase's
distribution (`distribution`). With ``kinds=True`` it also counts, for
batches of at least `KIND_AFTER_S`, the task steps in them by where each task
was suspended (the innermost coroutine's name and line), and the CPU those
steps took (``kinds_ms``, with the batches' time outside any step as
"(between steps)"): what the long batches are made of. A compiled coroutine
has no frame to name its line by: run the pure-Python build
(``TRIO_MCP_NO_EXTENSIONS=1``) to see inside it. Naming costs a walk of each
step's await chain, so it inflates the CPU times a little; leave it off when
comparing them.
"""

from __future__ import annotations

import bisect
import gc
import time
from collections import Counter
from typing import Any

import trio

#: Upper bounds of the histogram's buckets, in ms of CPU (the last: the rest).
BOUNDS_MS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)
#: Batches at least this long have their steps counted by kind (``kinds=True``).
KIND_AFTER_S = 0.001


def _where(task: trio.lowlevel.Task) -> str:
    """Where `task` is suspended: the innermost coroutine of ours (not trio's)
    on its await chain, by name and line ("(a new task) ..." if it has not
    started; a compiled coroutine ends the chain, by name only)."""
    coro: Any = task.coro
    if getattr(coro, "cr_await", None) is None:
        return "(a new task) " + getattr(coro, "__qualname__", "?")
    where = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:  # (a compiled coroutine: no frame to read)
            return getattr(coro, "__qualname__", type(coro).__name__)
        path = frame.f_code.co_filename
        if "/trio/" not in path and "/outcome/" not in path:
            where = f"{frame.f_code.co_qualname}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where


class BatchTimes(trio.abc.Instrument):
    """Times each scheduler batch (module docstring)."""

    def __init__(self, kinds: bool = False) -> None:
        self.batches = 0
        self.steps = 0
        self.cpu_s = 0.0
        #: The longest batch since the last snapshot.
        self.max_s = 0.0
        self.histogram = [0] * (len(BOUNDS_MS) + 1)
        #: The same for the batches' wall-clock times (CPU plus preemption).
        self.wall_histogram = [0] * (len(BOUNDS_MS) + 1)
        #: The same for their CPU times less the garbage collections in them.
        self.steps_histogram = [0] * (len(BOUNDS_MS) + 1)
        #: Collections by generation, and the CPU they took.
        self.collections = [0, 0, 0]
        self.gc_s = 0.0
        self._gc_started = 0.0
        self._gc_in_batch = 0.0
        gc.callbacks.append(self._collecting)
        #: Steps of batches of at least `KIND_AFTER_S`, by kind (``kinds``).
        self.kinds: Counter[str] = Counter()
        #: The CPU of those steps by kind, in ms (``kinds``).
        self.kinds_ms: Counter[str] = Counter()
        self._step_started = 0.0
        self._step_name: str | None = None
        self._step_ms: list[tuple[str, float]] = []
        self._bounds_s = [b / 1000 for b in BOUNDS_MS]
        self._started: float | None = None
        self._started_wall = 0.0
        self._steps = 0
        self._naming = kinds
        self._names: list[str] = []

    def _collecting(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.thread_time()
            return
        spent = time.thread_time() - self._gc_started
        self.collections[info["generation"]] += 1
        self.gc_s += spent
        self._gc_in_batch += spent

    def after_io_wait(self, timeout: float) -> None:
        self._gc_in_batch = 0.0
        self._started = time.thread_time()
        self._started_wall = time.perf_counter()
        self._steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._steps += 1
        if self._naming:
            self._step_name = name = _where(task)
            self._names.append(name)
            self._step_started = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        name = self._step_name
        if name is not None:  # (not the step this instrument was added in)
            self._step_ms.append((name, (time.thread_time() - self._step_started) * 1000))
            self._step_name = None

    def before_io_wait(self, timeout: float) -> None:
        started = self._started
        if started is None:
            return
        spent = time.thread_time() - started
        wall = time.perf_counter() - self._started_wall
        self.wall_histogram[bisect.bisect_left(self._bounds_s, wall)] += 1
        self._started = None
        self.batches += 1
        self.steps += self._steps
        self.cpu_s += spent
        if spent > self.max_s:
            self.max_s = spent
        self.histogram[bisect.bisect_left(self._bounds_s, spent)] += 1
        work = spent - self._gc_in_batch
        self.steps_histogram[bisect.bisect_left(self._bounds_s, work)] += 1
        if self._naming:
            if spent >= KIND_AFTER_S:
                self.kinds.update(self._names)
                for name, ms in self._step_ms:
                    self.kinds_ms[name] += ms
                stepping = sum(ms for _, ms in self._step_ms)
                self.kinds_ms["(between steps)"] += spent * 1000 - stepping
            self._names.clear()
            self._step_ms.clear()

    def snapshot(self, top: int = 40) -> dict[str, Any]:
        """The counts so far (cumulative: subtract two for a phase), and the
        longest batch since the last snapshot."""
        shot: dict[str, Any] = {
            "batches": self.batches,
            "steps": self.steps,
            "cpu_s": round(self.cpu_s, 4),
            "max_ms": round(self.max_s * 1000, 2),
            "histogram": list(self.histogram),
            "wall_histogram": list(self.wall_histogram),
            "steps_histogram": list(self.steps_histogram),
            "collections": list(self.collections),
            "gc_s": round(self.gc_s, 4),
        }
        self.max_s = 0.0
        if self._naming:
            shot["kinds"] = dict(self.kinds.most_common(top))
            shot["kinds_ms"] = {k: round(v, 1) for k, v in self.kinds_ms.most_common(top)}
        return shot


#: Waits (ms) whose share `arrivals_waiting_over` reports.
WAITS_MS = (0.25, 0.5, 1.0, 2.0)


def arrivals_waiting_over(histogram: list[int], seconds: float) -> dict[str, float]:
    """For each of `WAITS_MS`, the share (%) of `seconds` of wall time at
    which a request arriving would wait longer than that for the batch in
    progress to end: what batches of a length L beyond the wait w held,
    L - w each, over the time (L a bucket's middle, the last bucket's
    lower bound). The server's own part of a client's latency tail, which
    a client's p99 mixes with the client's."""
    lows = (0.0, *BOUNDS_MS)
    highs = (*BOUNDS_MS, BOUNDS_MS[-1])
    lengths = [(low + high) / 2 for low, high in zip(lows, highs, strict=True)]
    return {
        f"{wait}ms": round(
            100
            * sum(c * max(0.0, ms - wait) for c, ms in zip(histogram, lengths, strict=True))
            / (seconds * 1000),
            3,
        )
        for wait in WAITS_MS
    }


def distribution(shots: list[dict[str, Any]], seconds: float | None = None) -> dict[str, Any]:
    """The batches between the first and the last of `shots` (consecutive
    snapshots): counts, CPU, quantiles of batch CPU (a bucket's upper bound),
    how many took over 1 ms and over 5 ms, and the longest; given the
    `seconds` they span, the share of the time at which an arrival would
    wait over each of `WAITS_MS` (`arrivals_waiting_over`), by batches' wall
    time and by their CPU time."""
    before, after = shots[0], shots[-1]

    def phase(key: str) -> list[int]:
        return [b - a for a, b in zip(before[key], after[key], strict=True)]

    histogram = phase("histogram")
    walls = phase("wall_histogram")
    works = phase("steps_histogram") if "steps_histogram" in before else histogram
    batches = sum(histogram)
    steps = after["steps"] - before["steps"]

    def quantile(q: float, histogram: list[int] = histogram) -> float | None:
        if not batches:
            return None
        rank = q * batches
        seen = 0
        for bound, count in zip((*BOUNDS_MS, float("inf")), histogram, strict=True):
            seen += count
            if seen >= rank:
                return bound
        return None

    def over(ms: float, histogram: list[int] = histogram) -> int:
        return sum(c for bound, c in zip((0.0, *BOUNDS_MS), histogram, strict=True) if bound >= ms)

    result: dict[str, Any] = {
        "batches": batches,
        "cpu_s": round(after["cpu_s"] - before["cpu_s"], 3),
        "steps_per_batch": round(steps / batches, 1) if batches else None,
        "p50_ms_at_most": quantile(0.5),
        "p99_ms_at_most": quantile(0.99),
        "p999_ms_at_most": quantile(0.999),
        "over_1ms": over(1.0),
        "over_5ms": over(5.0),
        "without_gc_p99_ms_at_most": quantile(0.99, works),
        "without_gc_p999_ms_at_most": quantile(0.999, works),
        "without_gc_over_1ms": over(1.0, works),
        "without_gc_over_5ms": over(5.0, works),
        "collections": phase("collections") if "collections" in before else None,
        "gc_cpu_s": round(after.get("gc_s", 0) - before.get("gc_s", 0), 3),
        "wall_p99_ms_at_most": quantile(0.99, walls),
        "wall_p999_ms_at_most": quantile(0.999, walls),
        "wall_over_1ms": over(1.0, walls),
        "wall_over_5ms": over(5.0, walls),
        "max_ms": max(shot["max_ms"] for shot in shots[1:]) if len(shots) > 1 else None,
        "histogram_ms": {
            f"<={bound}": count
            for bound, count in zip((*BOUNDS_MS, "inf"), histogram, strict=True)
            if count
        },
    }
    if seconds:
        result["arrivals_waiting_over_pct"] = arrivals_waiting_over(walls, seconds)
        result["arrivals_waiting_over_pct_by_cpu"] = arrivals_waiting_over(histogram, seconds)
    if "kinds" in after:
        kinds = Counter(after["kinds"])
        kinds.subtract(before.get("kinds", {}))
        result["kinds_in_long_batches"] = dict(kinds.most_common(12))
        spent = Counter(after.get("kinds_ms", {}))
        spent.subtract(before.get("kinds_ms", {}))
        result["kinds_ms_in_long_batches"] = {k: round(v, 1) for k, v in spent.most_common(12)}
    return result
