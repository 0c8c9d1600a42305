"""``--workers N --worker-cpu-affinity`` with real processes on 127.0.0.1:
each worker runs on its CPU, and a connection opened from a CPU is served
by the worker on that CPU (Linux 6.2 and later; before, by any)."""

from __future__ import annotations

import os
import re
import sys

import pytest
import trio
from _workers_support import close_all, group, holders, open_at_once, per_worker

from trio_mcp._trio._spread import LOCAL_SHARE
from trio_mcp._workers import worker_cpus

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="CPU affinity is Linux's"
)


def allowed_cpus(pid: int) -> set[int]:
    """The CPUs `pid`'s main thread may run on, from /proc."""
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        (listed,) = re.findall(r"^Cpus_allowed_list:\s*(\S+)$", file.read(), re.MULTILINE)
    cpus: set[int] = set()
    for part in listed.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def kernel_steers() -> bool:
    """Whether this kernel gives a SO_REUSEPORT group's connections by
    SO_INCOMING_CPU (6.2 and later)."""
    major, minor = (int(part) for part in re.findall(r"\d+", os.uname().release)[:2])
    return (major, minor) >= (6, 2)


async def test_each_worker_runs_on_its_cpu_and_serves_the_connections_it_receives() -> None:
    expected = worker_cpus(2)
    with group("--worker-cpu-affinity") as served, trio.fail_after(60):
        await served.wait_for("2 processes")
        on_cpu = {}
        for pid in served.workers():
            (cpu,) = allowed_cpus(pid)  # one CPU each
            on_cpu.setdefault(cpu, set()).add(pid)
        assert sorted(on_cpu) == sorted(set(expected))
        assert sum(len(pids) for pids in on_cpu.values()) == 2
        mask = os.sched_getaffinity(0)
        try:
            for cpu, pids in sorted(on_cpu.items()):
                os.sched_setaffinity(0, {cpu})  # (this thread connects from `cpu`)
                answered = {await served.call() for _ in range(8)}
                if kernel_steers():
                    assert answered <= pids, (cpu, on_cpu, answered)
                else:
                    assert answered <= served.workers()
        finally:
            os.sched_setaffinity(0, mask)
        assert "SO_INCOMING_CPU" not in served.output  # (no warning: the kernel took it)


async def test_without_affinity_every_worker_may_run_anywhere() -> None:
    with group() as served, trio.fail_after(60):
        await served.wait_for("2 processes")
        for pid in served.workers():
            assert allowed_cpus(pid) == os.sched_getaffinity(0)


async def test_connections_from_one_cpu_still_spread_beyond_a_third() -> None:
    # (every connection opened from one CPU goes to the worker there; it
    # passes new ones on once it holds a third more than the other)
    cpu = worker_cpus(2)[0]
    mask = os.sched_getaffinity(0)
    with group("--worker-cpu-affinity") as served, trio.fail_after(60):
        await served.wait_for("2 processes")
        os.sched_setaffinity(0, {cpu})
        try:
            clients = await open_at_once(served.port, 64)
        finally:
            os.sched_setaffinity(0, mask)
        try:
            found = await holders(clients)
            assert None not in found
            fewer, more = sorted(per_worker(found).values())
            assert fewer + more == 64
            # (within a third, and one decision each worker may make at the
            # same moment as the other, from counts about to change)
            assert more - fewer <= max(2, fewer // LOCAL_SHARE) + 2, (fewer, more)
            if kernel_steers() and len(set(worker_cpus(2))) == 2:
                assert more - fewer >= 5  # the kernel's choice kept where it is close
        finally:
            await close_all(clients)


async def test_affinity_without_workers_says_it_does_nothing() -> None:
    with group("--worker-cpu-affinity", workers=1) as served, trio.fail_after(60):
        await served.wait_for("1 process)")
        assert "worker_cpu_affinity applies to the workers of --workers N" in served.output
        assert allowed_cpus(served.proc.pid) == os.sched_getaffinity(0)
    with group("--worker-cpu-affinity") as served, trio.fail_after(60):
        await served.wait_for("2 processes")
        assert "worker_cpu_affinity applies" not in served.output
