"""A scheduling slice of the server's own (``sched_slice_us``): asked of the
kernel for the thread that runs trio, read back, given back at the end;
validated; and, where the kernel takes none, said once at start-up."""

from __future__ import annotations

import os
import platform
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
from _support import EXAMPLES, connect_when_up, server_process

from trio_mcp import ServerConfig
from trio_mcp._trio._slice import scheduling_slice, slice_ns


def kernel_takes_slices() -> bool:
    """Whether this kernel gives an ordinary thread the slice it asks for
    (EEVDF's ``sched_runtime``, Linux 6.12 and later), known apart from the
    code under test: the release, the machine, this process's policy."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64", "riscv64"):
        return False
    release = re.match(r"(\d+)\.(\d+)", platform.release())
    fair = os.sched_getscheduler(0) in (os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_IDLE)
    return release is not None and (int(release[1]), int(release[2])) >= (6, 12) and fair


def in_a_thread(body: Callable[[], Any]) -> Any:
    """`body`'s result, run in a thread of its own (a slice is a thread's:
    the test runner's thread keeps its own)."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(body()))
    thread.start()
    thread.join(timeout=10)
    return results[0]


def test_the_thread_runs_with_the_slice_while_the_block_runs_then_as_before() -> None:
    def body() -> tuple[int | None, bool, int | None, int | None]:
        before = slice_ns()
        with scheduling_slice(250) as taken:
            during = slice_ns()
        return before, taken, during, slice_ns()

    before, taken, during, after = in_a_thread(body)
    if kernel_takes_slices():
        assert before is not None and before > 0
        assert taken is True
        assert during == 250_000
        assert after == before
    else:
        assert taken is False
        assert during == before == after


def test_none_asks_for_nothing() -> None:
    def body() -> tuple[int | None, bool, int | None]:
        before = slice_ns()
        with scheduling_slice(None) as taken:
            return before, taken, slice_ns()

    before, taken, during = in_a_thread(body)
    assert taken is False
    assert during == before


@pytest.mark.parametrize("bad", [0, 99, 100_001, -5, 2.5, "100", True])
def test_the_slice_is_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="sched_slice_us must be 100 to 100,000 microseconds"):
        ServerConfig(sched_slice_us=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("good", [None, 100, 750, 100_000])
def test_slices_the_kernel_takes_are_accepted(good: int | None) -> None:
    assert ServerConfig(sched_slice_us=good).sched_slice_us == good


def test_the_default_leaves_the_kernels_slice() -> None:
    assert ServerConfig().sched_slice_us is None


async def test_trio_mcp_run_serves_with_the_slice_or_says_why_not() -> None:
    target = f"{EXAMPLES / 'everything.py'}:server"
    run = ("-m", "trio_mcp", "run", target, "--sched-slice-us", "300", "--log-level", "warning")
    with server_process(*run) as (proc, port), trio.fail_after(20):
        async with await connect_when_up(port):
            pass  # (it serves)
        serving = slice_ns(proc.pid)  # (the main thread's id is the process's)
        proc.send_signal(signal.SIGTERM)
        while proc.poll() is None:
            await trio.sleep(0.05)
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
    assert proc.returncode == 0
    if kernel_takes_slices():
        assert serving == 300_000
        assert "sched_slice_us" not in output
    else:
        assert "sched_slice_us: this kernel keeps its own scheduling slice" in output
