"""Tasks started on a client's behalf, guarded: a failure ends its own task only.

A task in a nursery that others share (the server's connections, the
endpoint's HTTP+SSE requests) must not take its siblings down with it: trio
cancels a whole nursery when one of its tasks raises. `spawn` is the one way
such a task is started (``tests/test_tasks.py`` fails on any other
``start_soon``); what it runs should clean up after itself in ``finally``,
and anything it raises besides cancellation is logged here and goes no
further. `guarded` does the same for one step of a long-lived loop (a
broadcast, a sweep), so that one bad step is not the loop's end.

A task's root coroutine must be a Python one: trio's `Lock` reads the state
of its owner's root coroutine (`inspect.getcoroutinestate`), which
Cython's coroutines do not have, so a compiled coroutine function started
as a task fails at its first lock (coredis's connection pool takes one on
every command). The compiled modules start their tasks through `spawn` or
`in_python`, and this module stays pure Python (tests/test_tasks.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar, cast

import trio

logger = logging.getLogger("trio_mcp.tasks")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def spawn(
    nursery: trio.Nursery,
    what: str,
    async_fn: Callable[..., Awaitable[object]],
    *args: Any,
) -> None:
    """Start ``async_fn(*args)`` in `nursery`; an exception it raises is logged
    (as the failure of `what`) and ends that task alone."""
    nursery.start_soon(_guard, what, async_fn, *args)


async def in_python(async_fn: Callable[..., Awaitable[object]], *args: Any, **kwargs: Any) -> None:
    """``async_fn(*args, **kwargs)`` under a Python coroutine, for
    ``nursery.start_soon(in_python, fn, ...)`` and ``nursery.start(in_python, fn)``
    (whose ``task_status`` it passes on)."""
    await async_fn(*args, **kwargs)


def python_coroutine(async_fn: F) -> F:
    """`async_fn` as a Python coroutine function, for a public one that callers
    start as a task (``nursery.start(serve_mcp, ...)``) from a compiled module."""

    @functools.wraps(async_fn)
    async def in_python(*args: Any, **kwargs: Any) -> Any:
        return await async_fn(*args, **kwargs)

    return cast(F, in_python)


async def _guard(what: str, async_fn: Callable[..., Awaitable[object]], *args: Any) -> None:
    try:
        await async_fn(*args)
    except Exception:
        logger.exception("%s failed; it ended alone", what)


@contextlib.contextmanager
def guarded(what: str) -> Iterator[None]:
    """One step of a loop: an exception it raises is logged, and the loop goes on."""
    try:
        yield
    except Exception:
        logger.exception("%s failed; going on", what)
