"""The trio shell: listeners, one task per connection, time limits, shutdown.

Everything protocol-shaped is decided by `HTTP11Connection`; this module only
moves bytes, owns tasks and applies time limits. Each connection task is the
only writer on its socket, so response bytes and stream chunks never tear.

Time limits use one cancel scope per connection whose deadline is moved as
the connection changes phase (idle, head, body, writing), rather than a new
scope per await.
"""

from __future__ import annotations

import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Final, final

import trio

from .._config import ServerConfig
from .._errors import RemoteProtocolError
from .._http11 import (
    CLOSED,
    CONTINUE_RESPONSE,
    NEED_DATA,
    SEND_CONTINUE,
    HTTP11Connection,
    Phase,
    Request,
    Response,
    StreamingResponse,
)
from .._speedups import USING_EXTENSIONS

logger = logging.getLogger("trio_mcp.server")

#: The application boundary: an async callable from a complete request to its answer.
Handler = Callable[[Request], Awaitable[Response | StreamingResponse]]

_INTERNAL_ERROR: Final = Response(
    500, [(b"content-type", b"text/plain; charset=utf-8")], b"internal server error\n"
)


@final
@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """A snapshot of a running server (see `Server.statistics`)."""

    connections_open: int
    connections_total: int
    requests_total: int
    draining: bool
    extensions_in_use: bool


class _DateCache:
    """The Date header value, formatted once per second."""

    __slots__ = ("_second", "_value")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def get(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._value = formatdate(now, usegmt=True).encode("ascii")
        return self._value


@final
class _Connection:
    """Book-keeping the server needs to drain one connection."""

    __slots__ = ("http", "timer", "waiting_idle")

    def __init__(self, http: HTTP11Connection, timer: trio.CancelScope) -> None:
        self.http = http
        self.timer = timer
        #: True while blocked reading the first byte of a next request.
        self.waiting_idle = False

    def drain(self) -> None:
        self.http.draining = True
        if self.waiting_idle:
            # waiting for a next request that is no longer welcome
            self.timer.cancel()


@final
class Server:
    """A running HTTP server; handed out by `serve` through ``task_status``."""

    def __init__(self, handler: Handler, config: ServerConfig) -> None:
        self.handler = handler
        self.config = config
        self.sockets: list[trio.socket.SocketType] = []
        self._connections: set[_Connection] = set()
        self._connections_total = 0
        self._requests_total = 0
        self._shutdown = trio.Event()
        self._dates = _DateCache()

    @property
    def ports(self) -> list[int]:
        """The TCP ports actually bound (useful with ``port=0``)."""
        return [s.getsockname()[1] for s in self.sockets]

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(
            connections_open=len(self._connections),
            connections_total=self._connections_total,
            requests_total=self._requests_total,
            draining=self._shutdown.is_set(),
            extensions_in_use=USING_EXTENSIONS,
        )

    def shutdown(self) -> None:
        """Start a graceful shutdown: stop accepting, let in-flight requests finish.

        Idle connections close at once; a connection in the middle of a
        request answers it with ``Connection: close``. Whatever still runs
        after ``config.shutdown_timeout_s`` is cancelled. `serve` returns when
        every connection is gone.
        """
        self._shutdown.set()

    async def _run(self, task_status: trio.TaskStatus[Server]) -> None:
        config = self.config
        if config.reuse_port:
            listeners = await _reuse_port_listeners(config)
        else:
            listeners = await trio.open_tcp_listeners(
                config.port, host=config.host, backlog=config.backlog
            )
        self.sockets = [listener.socket for listener in listeners]
        try:
            async with trio.open_nursery() as connections:
                async with trio.open_nursery() as acceptors:
                    for listener in listeners:
                        acceptors.start_soon(self._accept_loop, listener, connections)
                    task_status.started(self)
                    await self._shutdown.wait()
                    acceptors.cancel_scope.cancel()
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
                for conn in list(self._connections):
                    conn.drain()
                # In-flight requests get a deadline, then are cancelled.
                connections.cancel_scope.deadline = trio.current_time() + config.shutdown_timeout_s
        finally:
            for listener in listeners:
                listener.socket.close()

    async def _accept_loop(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                # Out of file descriptors or memory: wait, don't spin (as trio does).
                logger.error("accept failed: %s; retrying in 100 ms", exc)
                await trio.sleep(0.1)
                continue
            connections.start_soon(self.handle_stream, stream)

    async def handle_stream(self, stream: trio.abc.HalfCloseableStream) -> None:
        """Serve one connection until it closes (also usable over any trio stream)."""
        self._connections_total += 1
        http = HTTP11Connection(self.config)
        timer = trio.CancelScope()
        conn = _Connection(http, timer)
        self._connections.add(conn)
        if self._shutdown.is_set():
            http.draining = True
        peer_gone = True
        try:
            with timer:
                peer_gone = await self._converse(stream, conn)
            if timer.cancelled_caught and http.phase in (Phase.HEAD, Phase.BODY):
                peer_gone = False
                with trio.move_on_after(_LINGER_S):
                    await _send_quietly(
                        stream,
                        http.error_response(
                            RemoteProtocolError("request took too long to arrive", 408),
                            self._dates.get(),
                        ),
                    )
        finally:
            self._connections.discard(conn)
            with trio.CancelScope(shield=True):
                if peer_gone or (timer.cancelled_caught and http.phase is Phase.IDLE):
                    await trio.aclose_forcefully(stream)
                else:
                    await _lingering_close(stream)

    async def _converse(self, stream: trio.abc.HalfCloseableStream, conn: _Connection) -> bool:
        """Read requests and answer them in order until the connection must close.

        Returns True when the peer is known to be gone (EOF, reset), so there is
        nothing to linger for.
        """
        http = conn.http
        timer = conn.timer
        config = self.config
        chunk_size = config.receive_chunk_bytes
        handler = self.handler
        dates = self._dates
        deadline_phase: Phase | None = None
        while True:
            try:
                event = http.next_event()
            except RemoteProtocolError as exc:
                timer.deadline = trio.current_time() + config.write_timeout_s
                await _send_quietly(stream, http.error_response(exc, dates.get()))
                return False
            if event is NEED_DATA:
                phase = http.phase
                if phase is not deadline_phase:
                    # Each phase gets its own whole-phase deadline.
                    deadline_phase = phase
                    if phase is Phase.IDLE:
                        if http.draining:
                            return False
                        limit = config.idle_timeout_s
                    elif phase is Phase.HEAD:
                        limit = config.head_timeout_s
                    else:
                        limit = config.body_timeout_s
                    timer.deadline = trio.current_time() + limit
                conn.waiting_idle = phase is Phase.IDLE
                try:
                    data = await stream.receive_some(chunk_size)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
                conn.waiting_idle = False
                http.receive_data(data)
                continue
            if event is SEND_CONTINUE:
                await stream.send_all(CONTINUE_RESPONSE)
                continue
            if event is CLOSED:
                return True
            assert isinstance(event, Request)
            self._requests_total += 1
            deadline_phase = None
            timer.deadline = math.inf
            try:
                response = await handler(event)
            except Exception:
                logger.exception("handler failed on %r", event)
                response = _INTERNAL_ERROR
            write_timeout = config.write_timeout_s
            if type(response) is Response:
                timer.deadline = trio.current_time() + write_timeout
                try:
                    await stream.send_all(http.full_response(response, dates.get()))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
            else:
                assert isinstance(response, StreamingResponse)
                if not await self._stream(stream, http, timer, response, write_timeout):
                    return True
            if http.must_close:
                return False

    async def _stream(
        self,
        stream: trio.abc.HalfCloseableStream,
        http: HTTP11Connection,
        timer: trio.CancelScope,
        response: StreamingResponse,
        write_timeout: float,
    ) -> bool:
        """Send a streamed response; False when the peer went away mid-stream."""
        body = response.body
        try:
            timer.deadline = trio.current_time() + write_timeout
            await stream.send_all(http.start_stream(response, self._dates.get()))
            if http.stream_body_allowed:
                async for piece in body:
                    data = http.stream_chunk(piece)
                    if data:
                        timer.deadline = trio.current_time() + write_timeout
                        await stream.send_all(data)
                        timer.deadline = math.inf
            timer.deadline = trio.current_time() + write_timeout
            await stream.send_all(http.end_stream())
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        except Exception:
            # The head is out, so no status can tell the client; a close without
            # the last chunk does (the client sees an incomplete body).
            logger.exception("streaming response failed")
            return False
        finally:
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                with trio.CancelScope(shield=True):
                    await aclose()


async def _send_quietly(stream: trio.abc.HalfCloseableStream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


_LINGER_S: Final = 1.0
_LINGER_BYTES: Final = 16 * 1024 * 1024


async def _lingering_close(stream: trio.abc.HalfCloseableStream) -> None:
    """Close after our last response without destroying it.

    Closing a socket with unread input makes the kernel send a reset, which
    can throw away a response (a 413, say) before the client reads it. So:
    send FIN, read and drop what the client still sends, for a bounded time
    and size, then close.
    """
    try:
        with trio.move_on_after(_LINGER_S):
            await stream.send_eof()
            drained = 0
            while drained < _LINGER_BYTES:
                data = await stream.receive_some(65536)
                if not data:
                    break
                drained += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def _reuse_port_listeners(config: ServerConfig) -> list[trio.SocketListener]:
    listeners = []
    infos = await trio.socket.getaddrinfo(
        config.host, config.port, type=trio.socket.SOCK_STREAM, flags=trio.socket.AI_PASSIVE
    )
    for family, type_, proto, _, addr in infos:
        sock = trio.socket.socket(family, type_, proto)
        try:
            sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
            sock.setsockopt(trio.socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            await sock.bind(addr)
            sock.listen(config.backlog or 0xFFFF)
        except BaseException:
            sock.close()
            raise
        listeners.append(trio.SocketListener(sock))
    return listeners


async def serve(
    handler: Handler,
    config: ServerConfig | None = None,
    *,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `handler` over HTTP/1.1 until `Server.shutdown` is called.

    Use with ``server = await nursery.start(serve, handler, config)``; the
    value handed to ``task_status`` is the running `Server` (ports, statistics,
    shutdown). Cancelling `serve` stops the server at once, without a drain.
    """
    server = Server(handler, config or ServerConfig())
    await server._run(task_status)


def run(handler: Handler, config: ServerConfig | None = None) -> None:
    """Serve `handler` from a script; SIGINT or SIGTERM drains gracefully."""
    import signal

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(serve, handler, config)
            logger.info(
                "serving on %s port %s", server.config.host, ", ".join(map(str, server.ports))
            )
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    logger.info("got signal %d: draining", signum)
                    server.shutdown()
                    break

    trio.run(main)
