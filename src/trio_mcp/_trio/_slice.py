"""A shorter scheduling slice from the kernel, while trio-mcp runs trio itself
(``ServerConfig.sched_slice_us``).

Linux schedules ordinary threads by EEVDF since 6.6, and since 6.12 a thread
may ask for its own slice with ``sched_setattr``'s ``sched_runtime``, which
the kernel clamps to 0.1-100 ms (the default is the kernel's base slice,
about a millisecond, scaled up with the number of CPUs). A thread with a shorter
slice keeps a CPU that others wait for for less time at once, and when it
wakes it may preempt a thread with a longer one. For a server that shares its
cores with other processes (its clients or proxy on the same machine, a load
generator), that means a process woken while the server is busy waits at
most the server's slice instead of the default's, and a request that wakes
the server gets it running sooner; the price is more switches between them
while both have work. On a core of its own the server sees no difference.

Python has no ``os.sched_setattr``, so this makes the system call through
ctypes, for the thread that runs trio (threads it starts later inherit the
slice). It keeps the thread's policy and nice value, reads the value back
(an older kernel accepts the call and ignores the slice, and a real-time
policy has no slice), and puts the previous slice back when the run ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import struct
from collections.abc import Callable, Iterator
from typing import Final

#: ``sched_setattr`` and ``sched_getattr`` per machine (Linux system call numbers).
_SYSCALLS: Final = {"x86_64": (314, 315), "aarch64": (274, 275), "riscv64": (274, 275)}
#: ``struct sched_attr`` up to ``sched_period`` (SCHED_ATTR_SIZE_VER0, 48 bytes):
#: size, policy, flags, nice, priority, runtime, deadline, period.
_ATTR: Final = struct.Struct("=IIQiIQQQ")
#: The policies whose threads EEVDF schedules (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE).
_FAIR_POLICIES: Final = frozenset({0, 3, 5})


def _syscall() -> tuple[Callable[..., int], int, int] | None:
    """libc's ``syscall``, and the numbers of sched_setattr and sched_getattr here."""
    numbers = _SYSCALLS.get(platform.machine()) if platform.system() == "Linux" else None
    if numbers is None:
        return None
    return ctypes.CDLL(None, use_errno=True).syscall, numbers[0], numbers[1]


def _get(tid: int) -> tuple[int, ...] | None:
    """Thread `tid`'s scheduling attributes (0: the caller), or None where they cannot be read."""
    calls = _syscall()
    if calls is None:
        return None
    syscall, _, get = calls
    buffer = ctypes.create_string_buffer(_ATTR.size)
    if syscall(get, tid, buffer, _ATTR.size, 0) != 0:
        return None
    return _ATTR.unpack(buffer.raw)


def slice_ns(tid: int = 0) -> int | None:
    """The slice thread `tid` (0: the calling thread) runs with, in nanoseconds,
    as the kernel reports it (0 where it reports none: before Linux 6.12, or a
    real-time policy); None where it cannot be read."""
    attr = _get(tid)
    return None if attr is None else attr[5]


def _set(policy: int, nice: int, runtime_ns: int) -> bool:
    calls = _syscall()
    assert calls is not None
    syscall, put, _ = calls
    buffer = ctypes.create_string_buffer(
        _ATTR.pack(_ATTR.size, policy, 0, nice, 0, runtime_ns, 0, 0)
    )
    return bool(syscall(put, 0, buffer, 0) == 0)


@contextlib.contextmanager
def scheduling_slice(slice_us: int | None) -> Iterator[bool]:
    """Ask the kernel for a slice of `slice_us` microseconds for the calling
    thread while the block runs; yields whether it has it (False: None asked
    for, another system, a kernel before 6.12, or a real-time policy), and
    puts the slice it had back at the end."""
    attr = _get(0) if slice_us is not None else None
    if slice_us is None or attr is None or attr[1] not in _FAIR_POLICIES:
        yield False
        return
    _, policy, _, nice, _, before_ns, _, _ = attr
    wanted_ns = slice_us * 1000
    taken = _set(policy, nice, wanted_ns) and slice_ns() == wanted_ns
    try:
        yield taken
    finally:
        if taken:
            _set(policy, nice, before_ns)
