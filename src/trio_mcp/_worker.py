"""One worker of a ``--workers`` group: ``python -m trio_mcp._worker --control-fd N``.

The supervisor (`_workers.py`) spawns this as a new interpreter, never a fork
of a process that runs trio. Everything it needs comes over the control
channel (`_control.py`), descriptor N: the configuration, secrets included
(never argv, which ``ps`` shows), its name, and the listening sockets it
inherits, and with ``worker_cpu_affinity`` the CPU it runs on. It serves
as ``trio-mcp run`` does with one process, except that it does not announce
itself (the supervisor says the group's start-up line once), it tells the
supervisor when it listens, and a task of its own trio run answers the
supervisor's heartbeat. When the control channel closes (the supervisor
died), it drains and exits as on SIGTERM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import trio

from ._cli import load_server
from ._control import LineBuffer, encode, receive_first
from ._logs import configure as configure_logging
from ._mcp._endpoint import MCPEndpoint
from ._settings import config_from_values
from ._trio._run import run
from ._trio._server import HTTPServer

if TYPE_CHECKING:
    from ._trio._spread import ConnectionSpread

logger = logging.getLogger("trio_mcp.worker")


class SupervisorLink:
    """The worker's end of the control channel, inside its trio run."""

    def __init__(self, sock: socket.socket, buffer: LineBuffer, exposition: Any = None) -> None:
        self.sock = sock
        self.buffer = buffer
        #: The endpoint's metrics (`Exposition`), None when off: each pong
        #: carries ours, each ping the other workers'.
        self.exposition = exposition
        self._listening = trio.Event()
        self._port = 0
        self._sending = trio.Lock()

    def started(self, server: HTTPServer) -> None:
        """`run`'s ``started``: the server listens (told by `_report_ready`)."""
        self._port = server.ports[0] if server.ports else 0
        self._listening.set()

    @contextlib.asynccontextmanager
    async def around(self, inner: AbstractAsyncContextManager[Any]) -> AsyncIterator[None]:
        """`inner` (the endpoint's lifespan), with the link's tasks beside it."""
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(self.sock))
        async with inner, trio.open_nursery() as nursery:
            nursery.start_soon(self._answer, stream)
            nursery.start_soon(self._report_ready, stream)
            yield
            nursery.cancel_scope.cancel()

    async def _send(self, stream: trio.SocketStream, message: dict[str, Any]) -> None:
        async with self._sending:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(encode(message))

    async def _report_ready(self, stream: trio.SocketStream) -> None:
        await self._listening.wait()
        await self._send(stream, {"ready": self._port})

    async def _answer(self, stream: trio.SocketStream) -> None:
        """Answer every ping; when the supervisor is gone, drain as on SIGTERM."""
        buffer = self.buffer
        pending = buffer.feed(b"")
        while True:
            for message in pending:
                if "ping" in message:
                    pong: dict[str, Any] = {"pong": message["ping"]}
                    exposition = self.exposition
                    if exposition is not None:
                        exposition.peers = message.get("peers", [])
                        pong["metrics"] = exposition.snapshot()
                    await self._send(stream, pong)
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                data = b""
            if not data:
                logger.warning("the supervisor is gone: draining")
                os.kill(os.getpid(), signal.SIGTERM)
                return
            pending = buffer.feed(data)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--control-fd":
        raise SystemExit("usage: python -m trio_mcp._worker --control-fd N")
    control = socket.socket(fileno=int(args[1]))
    hello, buffer = receive_first(control)
    try:
        _serve(hello, control, buffer)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _tell_failure(control, str(exc.code))
        raise
    except BaseException as exc:
        _tell_failure(control, f"{type(exc).__name__}: {exc}")
        raise


def _serve(hello: dict[str, Any], control: socket.socket, buffer: LineBuffer) -> None:
    cpu = hello.get("cpu")
    if cpu is not None:
        # (this thread, before there is another: threads started later,
        # trio's included, inherit the mask)
        os.sched_setaffinity(0, {cpu})
    # (the supervisor's import path, so that TARGET is found as it would be there)
    sys.path[:] = hello["path"]
    settings = config_from_values(hello["config"])
    configure_logging(settings.log_level, settings.log_format, settings.log_config)
    listeners = [socket.socket(fileno=fd) for fd in hello["fds"]]
    for listener in listeners:
        listener.setblocking(False)
    app = load_server(settings.app)
    config = settings.mcp
    endpoint = MCPEndpoint(app, config)
    link = SupervisorLink(control, buffer, endpoint._exposition)
    run(
        endpoint,
        config.http,
        around=link.around(endpoint.running()),
        started=link.started,
        listeners=listeners,
        spread=_spread(hello.get("spread"), config.http.backlog),
    )


def _spread(given: dict[str, Any] | None, backlog: int | None) -> ConnectionSpread | None:
    """This worker's share of the group's connections (None: each keeps
    what the kernel gives it)."""
    if given is None:
        return None
    from ._trio._spread import ConnectionSpread, SpreadCounts

    counts = SpreadCounts(given["counts"], len(given["paths"]))
    return ConnectionSpread(
        counts, given["slot"], given["paths"], given["slack"], backlog, local=given["local"]
    )


def _tell_failure(control: socket.socket, why: str) -> None:
    with contextlib.suppress(OSError):
        control.setblocking(True)
        control.sendall(encode({"failed": why.removeprefix("trio-mcp: ")}))


if __name__ == "__main__":
    main()
