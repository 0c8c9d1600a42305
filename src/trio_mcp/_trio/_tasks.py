"""Tasks started on a client's behalf, guarded: a failure ends its own task only.

A task in a nursery that others share (the server's connections, the
endpoint's HTTP+SSE requests) must not take its siblings down with it: trio
cancels a whole nursery when one of its tasks raises. `spawn` is the one way
such a task is started (``tests/test_tasks.py`` fails on any other
``start_soon``); what it runs should clean up after itself in ``finally``,
and anything it raises besides cancellation is logged here and goes no
further. `guarded` does the same for one step of a long-lived loop (a
broadcast, a sweep), so that one bad step is not the loop's end.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import trio

logger = logging.getLogger("trio_mcp.tasks")


def spawn(
    nursery: trio.Nursery,
    what: str,
    async_fn: Callable[..., Awaitable[object]],
    *args: Any,
) -> None:
    """Start ``async_fn(*args)`` in `nursery`; an exception it raises is logged
    (as the failure of `what`) and ends that task alone."""
    nursery.start_soon(_guard, what, async_fn, *args)


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
