"""Serving from a script: `run`, an `HTTPServer` under ``trio.run`` with what
a process needs around it.

The first SIGINT or SIGTERM drains, a second stops at once; a server that
cannot start exits with one line; for the run, the trio tweaks
(``_tweaks.py``), the paced, frozen garbage collections (``_collector.py``)
and the scheduling slice asked for (``_slice.py``) are in effect.
Everything about serving itself is `_server.py`'s; this module only starts
it and stops it, so it imports `_server` and never the reverse.

Not compiled: it runs once a process, and a Python module's coroutines may be
trio tasks as they are (``_tasks.py`` says why compiled ones may not).
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import trio

from .._config import ServerConfig
from .._errors import StartupError
from .._http._handler import Handler, HandlerFunction
from ._collector import (
    collect_fully,
    freeze_survivors,
    frozen_survivors,
    heap_trimmer,
    paced_full_collections,
    young_collections_in_turns,
)
from ._server import HTTPServer, logger
from ._slice import scheduling_slice
from ._tls import server_context
from ._tweaks import applied as trio_tweaks
from ._tweaks import lean_instruments

if TYPE_CHECKING:
    from ._spread import ConnectionSpread


def run(
    handler: Handler | HandlerFunction,
    config: ServerConfig | None = None,
    *,
    around: AbstractAsyncContextManager[Any] | None = None,
    started: Callable[[HTTPServer], None] | None = None,
    listeners: list[socket.socket] | None = None,
    spread: ConnectionSpread | None = None,
) -> None:
    """Serve `handler` from a script; SIGINT or SIGTERM drains gracefully.

    The first SIGINT or SIGTERM starts a graceful shutdown
    (`HTTPServer.shutdown`); a second one, while it lasts, stops at once:
    every request is cancelled and every connection closed, unanswered.
    `around`, if given, is entered before serving and exited after (an
    application's lifespan); `started` is called once the server listens
    (by default it logs the address). A server that cannot start (its
    address taken, say) exits with one line saying why (SystemExit, status
    1), not a traceback. With ``config.trio_tweaks`` (the default), the
    trio tweaks are in effect for the run on a tested trio (``_tweaks.py``);
    with ``config.gc_full_interval_s``, full garbage collections are paced
    and younger ones wait for a turn,
    and with ``config.gc_freeze`` what survives start-up and each of them is
    frozen, and with ``config.malloc_trim`` the C allocator's free pages go
    back to the system at the same pace (``_collector.py``); with
    ``config.sched_slice_us``, the thread runs with that scheduling slice
    (``_slice.py``). `listeners`: listening sockets to serve
    instead of binding ``config.host`` and ``config.port`` (non-blocking,
    closed at the end). `spread`: a worker's share of its group's
    connections (``_spread.py``: it passes some to the others).
    """
    settings = config or ServerConfig()
    failures: list[StartupError] = []
    try:
        # (before trio starts: a certificate that cannot be used is one plain error)
        tls = server_context(settings)
    except StartupError as exc:
        raise SystemExit(f"trio-mcp: {exc}") from None

    async def main() -> None:
        if tweaks.lean_instruments:
            lean_instruments()
        lifespan = around if around is not None else contextlib.nullcontext()
        # The wait for signals, which ends when the server has stopped.
        waiting = trio.CancelScope()

        server = HTTPServer(handler, settings, tls=tls, spread=spread)
        if listeners:
            server.sockets = listeners

        async def serving(task_status: trio.TaskStatus[HTTPServer]) -> None:
            try:
                await server._run(task_status)
            finally:
                waiting.cancel()

        # (handlers before the listener: a SIGTERM once the port is open drains, never kills)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with lifespan, trio.open_nursery() as nursery:
                if freezing:
                    freeze_survivors()  # (the application, its stores and the server are built)
                try:
                    await nursery.start(serving)
                except StartupError as exc:
                    failures.append(exc)
                    return
                collections: list[trio.CancelScope] = []
                if pacing is not None:
                    trim = heap_trimmer(settings.malloc_trim)
                    collections.append(await nursery.start(collect_fully, pacing, freezing, trim))
                if young is not None:
                    collections.append(await nursery.start(young.collect))
                (started or _log_listening)(server)
                with waiting:
                    async for signum in signals:
                        if server.statistics().draining:
                            logger.warning("got signal %d again: stopping at once", signum)
                            nursery.cancel_scope.cancel()
                            break
                        logger.info("got signal %d: draining (a second one stops at once)", signum)
                        server.shutdown()
                for scope in collections:
                    scope.cancel()

    with (
        trio_tweaks(settings.trio_tweaks) as tweaks,
        paced_full_collections(settings.gc_full_interval_s) as pacing,
        young_collections_in_turns(pacing is not None) as young,
        frozen_survivors(settings.gc_freeze) as freezing,
        scheduling_slice(settings.sched_slice_us) as sliced,
    ):
        if settings.sched_slice_us is not None and not sliced:
            logger.warning(
                "sched_slice_us: this kernel keeps its own scheduling slice "
                "(a thread may ask for one on Linux 6.12 and later, with a policy other than "
                "real-time); running without"
            )
        trio.run(main)
    if failures:
        raise SystemExit(f"trio-mcp: {failures[0]}")


def _log_listening(server: HTTPServer) -> None:
    logger.info(
        "serving %s on %s port %s",
        "https" if server.config.ssl_certfile is not None else "http",
        server.config.host,
        ", ".join(map(str, server.ports)),
    )
