"""The trio shell: listeners, one task per connection, time limits, shutdown.

Everything protocol-shaped is decided by `HTTP11Connection`; this module only
moves bytes, owns tasks and applies time limits. Each connection task is the
only writer on its socket, so response bytes and stream chunks never tear.

Time limits: each connection runs inside one cancel scope and keeps the
limit of its current phase (idle, head, body, writing; none while the handler
runs) as a plain number, set as it changes phase without reading the clock.
One sweeper task per server notes when it first sees each phase and cancels
the scopes whose limit has passed since, so a request costs no clock reading
and no work in trio's deadline heap; limits fire no earlier than set and up
to two ticks (`HTTPServer.timeout_tick_s`) late.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from email.utils import formatdate
from math import inf
from typing import Any, Final, Protocol, final

import trio

from .._config import ServerConfig
from .._errors import LocalProtocolError, RemoteProtocolError
from .._http._connection import (
    BODY,
    CLOSED,
    CONTINUE_RESPONSE,
    HEAD,
    IDLE,
    NEED_DATA,
    SEND_CONTINUE,
    DeferredResponse,
    Headers,
    HTTP11Connection,
    Phase,
    Request,
    Response,
    StreamingResponse,
)
from .._speedups import USING_EXTENSIONS
from ._scheduling import fifo_batches, lean_instruments, pooled_wakeups
from ._socketio import (
    RESOURCE_ERRNOS,
    BatchEndSender,
    SocketIO,
    bind_listeners,
    close_listener,
)

logger = logging.getLogger("trio_mcp.server")

#: The application boundary: an async callable from a complete request to its answer.
#: A handler object may also have a ``respond_now(request)`` method, which the
#: server calls first: its answer, or None when the request needs the handler
#: awaited. It must answer exactly as awaiting the handler would; it only saves
#: a coroutine for the requests it can answer synchronously (`MCPEndpoint`
#: answers POSTs this way).
Handler = Callable[[Request], Awaitable[Response | StreamingResponse | DeferredResponse]]

_INTERNAL_ERROR: Final = Response(
    500, [(b"content-type", b"text/plain; charset=utf-8")], b"internal server error\n"
)


@final
@dataclass(frozen=True, slots=True)
class HTTPServerStatistics:
    """A snapshot of a running server (see `HTTPServer.statistics`)."""

    connections_open: int
    connections_total: int
    requests_total: int
    draining: bool
    extensions_in_use: bool


class _DateCache:
    """The Date header value, formatted once per second.

    While a sweeper ticks (`HTTPServer.enforce_timeouts`, at least twice a
    second), it refreshes the value and a response reads it without the
    clock, so the Date may lag by up to a tick; otherwise every read checks
    the clock.
    """

    __slots__ = ("_second", "_value", "_tickers")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""
        #: How many sweepers refresh the value now.
        self._tickers = 0

    def get(self) -> bytes:
        if self._tickers:
            return self._value
        return self.refresh()

    def refresh(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._value = formatdate(now, usegmt=True).encode("ascii")
        return self._value

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """While entered, the caller calls `refresh` at least twice a second."""
        self.refresh()
        self._tickers += 1
        try:
            yield
        finally:
            self._tickers -= 1


class _ByteStream(Protocol):
    """What a connection task needs from its transport (trio streams and SocketIO)."""

    async def receive_some(self, max_bytes: int) -> bytes | bytearray: ...
    async def send_all(self, data: bytes) -> None: ...
    async def send_eof(self) -> None: ...
    async def aclose(self) -> None: ...


class _Connection:
    """Book-keeping the server needs for one connection: time limit and drain.

    `limit` is how long the current phase may take (inf: no limit) and `since`
    when the sweeper first saw that phase (None: not yet). The connection task
    sets both as it changes phase (`limit_phase`), without reading the clock;
    `HTTPServer.enforce_timeouts` stamps `since` and cancels `timer` once
    `limit` has passed since then. That keeps time limits off trio's deadline
    heap and off the clock on every request.
    """

    __slots__ = ("http", "timer", "limit", "since", "waiting_idle")

    def __init__(self, http: HTTP11Connection, timer: trio.CancelScope) -> None:
        self.http = http
        self.timer = timer
        self.limit = inf
        self.since: float | None = None
        #: True while blocked reading the first byte of a next request.
        self.waiting_idle = False

    def limit_phase(self, seconds: float) -> None:
        """A new phase begins that may take `seconds` (inf: no limit)."""
        self.limit = seconds
        self.since = None

    def drain(self) -> None:
        self.http.draining = True
        if self.waiting_idle:
            # waiting for a next request that is no longer welcome
            self.timer.cancel()


class HTTPServer:
    """A running HTTP server; handed out by `serve` through ``task_status``."""

    __slots__ = (
        "handler",
        "config",
        "sockets",
        "_connections",
        "_connections_total",
        "_requests_total",
        "_shutdown",
        "_dates",
        "_batch",
        "timeout_tick_s",
    )

    def __init__(self, handler: Handler, config: ServerConfig) -> None:
        self.handler = handler
        self.config = config
        self.sockets: list[socket.socket] = []
        self._connections: set[_Connection] = set()
        self._connections_total = 0
        self._requests_total = 0
        self._shutdown = trio.Event()
        self._dates = _DateCache()
        #: Sends the answers held by connections when trio's scheduler batch
        #: ends (while `_run` runs; ``config.batch_end_sends``).
        self._batch: BatchEndSender | None = None
        shortest = min(
            config.idle_timeout_s,
            config.head_timeout_s,
            config.body_timeout_s,
            config.write_timeout_s,
        )
        #: How often time limits are checked: they fire up to twice this late
        #: (a phase is timed from the first check that sees it).
        self.timeout_tick_s = min(0.5, shortest / 8)

    @property
    def ports(self) -> list[int]:
        """The TCP ports actually bound (useful with ``port=0``)."""
        return [s.getsockname()[1] for s in self.sockets]

    def statistics(self) -> HTTPServerStatistics:
        return HTTPServerStatistics(
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
        every connection is gone. If the handler has a ``drain()`` method, it is
        called first, so that it can end its long-lived streams gracefully.
        """
        if not self._shutdown.is_set():
            # A handler with long-lived streams may end them now (MCP listen/GET streams).
            drain = getattr(self.handler, "drain", None)
            if drain is not None:
                drain()
        self._shutdown.set()

    async def enforce_timeouts(self) -> None:
        """Apply the connections' time limits, forever (`serve` runs this).

        Run it beside `handle_stream` when serving streams yourself.
        """
        tick = self.timeout_tick_s
        dates = self._dates
        with dates.ticking():  # (tick is at most 0.5 s)
            while True:
                await trio.sleep(tick)
                dates.refresh()
                self._check_limits(trio.current_time())

    def _check_limits(self, now: float) -> None:
        for conn in self._connections:
            since = conn.since
            if since is None:
                conn.since = now  # a phase begun since the last tick
            elif now - since >= conn.limit:
                conn.timer.cancel()

    async def _run(self, task_status: trio.TaskStatus[HTTPServer]) -> None:
        config = self.config
        listeners = await bind_listeners(config)
        self.sockets = listeners
        if config.batch_end_sends:
            self._batch = BatchEndSender()
            trio.lowlevel.add_instrument(self._batch)
        try:
            async with trio.open_nursery() as clock:
                clock.start_soon(self.enforce_timeouts)
                async with trio.open_nursery() as connections:
                    async with trio.open_nursery() as acceptors:
                        for listener in listeners:
                            acceptors.start_soon(self._accept_loop, listener, connections)
                        task_status.started(self)
                        await self._shutdown.wait()
                        acceptors.cancel_scope.cancel()
                    for listener in listeners:
                        close_listener(listener)
                    for conn in list(self._connections):
                        conn.drain()
                    # In-flight requests get a deadline, then are cancelled.
                    connections.cancel_scope.deadline = (
                        trio.current_time() + config.shutdown_timeout_s
                    )
                clock.cancel_scope.cancel()
        finally:
            for listener in listeners:
                if listener.fileno() >= 0:
                    close_listener(listener)
            batch = self._batch
            if batch is not None:
                self._batch = None
                batch.before_io_wait(0)  # (a last flush: normally nothing is held by now)
                with contextlib.suppress(KeyError):  # (trio drops an instrument that raised)
                    trio.lowlevel.remove_instrument(batch)

    async def _accept_loop(self, listener: socket.socket, connections: trio.Nursery) -> None:
        accepted = 0
        while True:
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                accepted = 0
                await trio.lowlevel.wait_readable(listener)
                continue
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    raise
                # Out of file descriptors or memory: wait, don't spin (as trio does).
                logger.error("accept failed: %s; retrying in 100 ms", exc)
                await trio.sleep(0.1)
                continue
            connections.start_soon(self._serve_socket, sock)
            accepted += 1
            if accepted >= 64:  # a flood of connections must not starve the rest
                accepted = 0
                await trio.lowlevel.checkpoint()

    async def _serve_socket(self, sock: socket.socket) -> None:
        try:
            io = SocketIO(sock, self._batch, self.config.write_timeout_s)
        except OSError:
            sock.close()  # reset before we got to it
            return
        await self._serve(io)

    async def handle_stream(self, stream: trio.abc.HalfCloseableStream) -> None:
        """Serve one connection over any trio stream until it closes.

        Time limits apply only while `enforce_timeouts` runs (`serve` runs it).
        """
        await self._serve(stream)

    async def _serve(self, stream: _ByteStream) -> None:
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
            if timer.cancelled_caught and http.phase in (HEAD, BODY):
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
                if peer_gone or (timer.cancelled_caught and http.phase is IDLE):
                    await _close_quietly(stream)
                else:
                    await _lingering_close(stream)

    async def _converse(self, stream: _ByteStream, conn: _Connection) -> bool:
        """Read requests and answer them in order until the connection must close.

        Returns True when the peer is known to be gone (EOF, reset), so there is
        nothing to linger for.
        """
        http = conn.http
        config = self.config
        chunk_size = config.receive_chunk_bytes
        write_timeout = config.write_timeout_s
        handler = self.handler
        # (a handler may answer without a coroutine: see `Handler`)
        respond_now = getattr(handler, "respond_now", None)
        dates = self._dates
        # What runs per request, looked up once per connection: a method found
        # by name on each call costs a type lookup and a bound method each time.
        next_event = http.next_event
        receive_data = http.receive_data
        receive_some = stream.receive_some
        limit_phase = conn.limit_phase
        finish_deferred = self._finish_deferred
        idle_timeout = config.idle_timeout_s
        limited_phase: Phase | None = None
        while True:
            try:
                event = next_event()
            except RemoteProtocolError as exc:
                limit_phase(write_timeout)
                await _send_quietly(stream, http.error_response(exc, dates.get()))
                return False
            if event is NEED_DATA:
                phase = http.phase
                if phase is not limited_phase:
                    # Each phase gets its own whole-phase limit.
                    limited_phase = phase
                    if phase is IDLE:
                        if http.draining:
                            return False
                        limit_phase(idle_timeout)
                    elif phase is HEAD:
                        limit_phase(config.head_timeout_s)
                    else:
                        limit_phase(config.body_timeout_s)
                conn.waiting_idle = phase is IDLE
                try:
                    data = await receive_some(chunk_size)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
                conn.waiting_idle = False
                receive_data(data)
                continue
            if event is SEND_CONTINUE:
                await stream.send_all(CONTINUE_RESPONSE)
                continue
            if event is CLOSED:
                return True
            assert isinstance(event, Request)
            self._requests_total += 1
            limited_phase = None
            conn.limit = inf
            try:
                response = None if respond_now is None else respond_now(event)
                if response is None:
                    response = await handler(event)
            except Exception:
                logger.exception("handler failed on %r", event)
                response = _INTERNAL_ERROR
            # The request is answered: a long-lived answer (an event stream) must
            # not keep its head and body alive.
            del event
            if type(response) is Response:
                limit_phase(write_timeout)
                try:
                    await stream.send_all(http.full_response(response, dates.get()))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
            elif type(response) is DeferredResponse:
                # (inline, not a coroutine of its own: every tool call comes
                # this way; its writer sets the limit of each write)
                writer = ResponseWriter(stream, conn, dates, write_timeout)
                conn.limit = inf
                try:
                    await response.respond(writer)
                    failed = False
                except Exception:
                    logger.exception("deferred response failed")
                    failed = True
                del response  # (nor its request, while the connection waits)
                if (failed or writer.state is not _DONE) and not await finish_deferred(
                    writer, failed
                ):
                    return True
                if writer.broken:
                    return True
            else:
                assert isinstance(response, StreamingResponse)
                conn.limit_phase(write_timeout)
                if not await self._stream(stream, conn, response, write_timeout):
                    return True
            if http.must_close:
                return False

    async def _finish_deferred(self, writer: ResponseWriter, failed: bool) -> bool:
        """After a DeferredResponse that failed (`failed`) or did not finish its
        answer: a 500 if it wrote nothing, the end of its stream if it started
        one; False when the answer must be cut short or the peer went away."""
        if writer.state is _NEW:
            if not failed:
                logger.error("a deferred response wrote nothing; answering 500")
            await writer.respond(_INTERNAL_ERROR)
        elif failed:
            return False  # cut the stream short: the client sees it incomplete
        elif writer.state is _STREAMING:
            await writer.end()
        return not writer.broken

    async def _stream(
        self,
        stream: _ByteStream,
        conn: _Connection,
        response: StreamingResponse,
        write_timeout: float,
    ) -> bool:
        """Send a streamed response; False when the peer went away mid-stream."""
        http = conn.http
        body = response.body
        try:
            await stream.send_all(
                http.start_stream(response.status, response.headers, self._dates.get())
            )
            if http.stream_body_allowed:
                frame = http.stream_framer()
                conn.limit = inf  # producing the next piece may take long
                async for piece in body:
                    data = frame(piece)
                    if data:
                        conn.limit_phase(write_timeout)
                        await stream.send_all(data)
                        conn.limit = inf
            conn.limit_phase(write_timeout)
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


class _WriterState(enum.Enum):
    NEW = "new"
    STREAMING = "streaming"
    DONE = "done"


# As module globals: read per request, and Enum members read through their
# class are slow on CPython 3.11 (see _http._connection.IDLE).
_NEW: Final = _WriterState.NEW
_STREAMING: Final = _WriterState.STREAMING
_DONE: Final = _WriterState.DONE


class ResponseWriter:
    """Writes the answer of a `DeferredResponse`: one full response, or a stream.

    Either `respond` once (or `respond_nowait`, then `send_rest` with what it
    returned), or `start` then any number of `send` then `end`.
    Writes to a peer that has gone away are dropped (`broken` tells); the
    connection closes after the answer.
    """

    __slots__ = ("_stream", "_conn", "_dates", "_write_timeout", "_frame", "state", "broken")

    def __init__(
        self,
        stream: _ByteStream,
        conn: _Connection,
        dates: _DateCache,
        write_timeout: float,
    ) -> None:
        self._stream = stream
        self._conn = conn
        self._dates = dates
        self._write_timeout = write_timeout
        #: How each piece of a streamed answer is framed; set by `start`.
        self._frame: Callable[[bytes], bytes] = _not_started
        self.state = _NEW
        #: True once a write failed: the peer is gone.
        self.broken = False

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """The connection's own cancel scope: cancelling it abandons the request
        being answered and closes the connection (nothing more is written)."""
        return self._conn.timer

    @property
    def started(self) -> bool:
        """True once the status line is out (nothing can change it any more)."""
        return self.state is not _NEW

    async def _write(self, data: bytes) -> None:
        if self.broken or not data:
            return
        conn = self._conn
        conn.limit_phase(self._write_timeout)
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
        finally:
            conn.limit = inf

    async def respond(self, response: Response) -> None:
        """Send one complete response."""
        rest = self.respond_nowait(response)
        if rest:
            await self._write(rest)

    def respond_nowait(self, response: Response) -> bytes:
        """`respond` without a coroutine: hand one complete response to the
        socket, which sends it now or at the scheduler batch's end
        (`SocketIO.hold`), and return the rest (b"" when the socket took it
        all, or the peer is gone; all of it on a stream that is not a
        socket). A non-empty rest must go to `send_rest` before anything else
        is written; on a socket a JSON answer almost always goes whole."""
        if self.state is not _NEW:
            raise LocalProtocolError("this request was already answered")
        self.state = _DONE
        if self.broken:
            return b""
        return self._respond_now(response)

    async def send_rest(self, rest: bytes) -> None:
        """Send the rest that `respond_nowait` returned, waiting for the socket."""
        await self._write(rest)

    def _respond_now(self, response: Response) -> bytes:
        """The synchronous part of `respond`: what the socket did not take of
        the response (b"" when it all went, or the peer is gone)."""
        conn = self._conn
        data = conn.http.full_response(response, self._dates.get())
        stream = self._stream
        if type(stream) is not SocketIO:
            return data
        # This is every JSON answer: the socket holds it for the scheduler
        # batch's end (or takes it now), with no coroutine and no time limit
        # to set. The last answer of a connection goes now, so that its rest
        # is sent under the write limit, not the lingering close's. (`sio` is
        # typed SocketIO in the .pxd, so that hold is a C call.)
        sio = stream
        try:
            if conn.http.must_close:
                sent = sio.send_nowait(data)
                return data[sent:] if sent < len(data) else b""
            return sio.hold(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
            return b""
        finally:
            conn.limit = inf

    async def start(self, status: int, headers: Headers, first: bytes = b"") -> None:
        """Send the head of a streamed answer, and `first` piece of the body with it
        (one write instead of two)."""
        if self.state is not _NEW:
            raise LocalProtocolError("this request was already answered")
        self.state = _STREAMING
        http = self._conn.http
        head = http.start_stream(status, headers, self._dates.get())
        self._frame = frame = http.stream_framer()
        await self._write(head + frame(first) if first else head)

    async def send(self, piece: bytes) -> None:
        """Send one piece of the streamed body."""
        if self.state is not _STREAMING:
            raise LocalProtocolError("send() needs start() first, and no end()")
        await self._write(self._frame(piece))

    def send_nowait(self, piece: bytes) -> bytes | None:
        """Send one piece of the streamed body now if the socket takes it.

        Returns b"" when it all went, the framed rest (for `send_framed`) when
        the socket took only part of it or would block, and None when the
        client is gone. Only for a caller that knows no write is under way.
        """
        if self.broken:
            return None
        # (the framing start fixed: a broadcast to many streams touches no
        # connection or HTTP state per frame)
        data = self._frame(piece)
        stream = self._stream
        if type(stream) is not SocketIO or not data:
            return data  # a trio stream: the stream's task writes it
        sio = stream  # (typed SocketIO in the .pxd)
        try:
            sent = sio.send_nowait(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
            return None
        return data[sent:] if sent < len(data) else b""

    def peer_watch(self) -> Callable[[], Awaitable[bool]] | None:
        """For an idle stream: an awaitable that returns when the client sends
        more bytes (False) or closes its end (True); None for a transport
        that cannot watch."""
        watch: Callable[[], Awaitable[bool]] | None = getattr(self._stream, "wait_peer", None)
        return watch

    async def send_framed(self, data: bytes) -> None:
        """Send the rest that `send_nowait` returned."""
        await self._write(data)

    async def end_and_close(self) -> None:
        """Finish the streamed body and close the connection at once.

        Whatever the handler writes afterwards is dropped (`broken` is set);
        the connection is closed when the handler returns.
        """
        await self.end()
        if not self.broken:
            try:
                await self._stream.send_eof()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        self.broken = True

    async def end(self, last: bytes = b"") -> None:
        """Finish the streamed body, sending `last` piece with the end (one write)."""
        if self.state is not _STREAMING:
            raise LocalProtocolError("end() needs start() first")
        self.state = _DONE
        end = self._conn.http.end_stream()
        await self._write(self._frame(last) + end if last else end)


def _not_started(piece: bytes) -> bytes:
    raise LocalProtocolError("a piece of a streamed answer before start()")


async def _send_quietly(stream: _ByteStream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


_LINGER_S: Final = 1.0
_LINGER_BYTES: Final = 16 * 1024 * 1024


async def _lingering_close(stream: _ByteStream) -> None:
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
        await _close_quietly(stream)


async def _close_quietly(stream: _ByteStream) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()  # close at once, like trio.aclose_forcefully
        try:
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def serve(
    handler: Handler,
    config: ServerConfig | None = None,
    *,
    task_status: trio.TaskStatus[HTTPServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `handler` over HTTP/1.1 until `HTTPServer.shutdown` is called.

    Use with ``server = await nursery.start(serve, handler, config)``; the
    value handed to ``task_status`` is the running `HTTPServer` (ports, statistics,
    shutdown). Cancelling `serve` stops the server at once, without a drain.
    """
    server = HTTPServer(handler, config or ServerConfig())
    await server._run(task_status)


def run(
    handler: Handler,
    config: ServerConfig | None = None,
    *,
    around: AbstractAsyncContextManager[Any] | None = None,
) -> None:
    """Serve `handler` from a script; SIGINT or SIGTERM drains gracefully.

    `around`, if given, is entered before serving and exited after (an
    application's lifespan). Scheduler batches run first in, first out
    unless ``config.fifo_scheduling`` is off, trio's wake-ups reuse their
    values unless ``config.pooled_wakeups`` is off, and trio's per-step
    instrument checks run at C speed (see ``_scheduling.py``).
    """
    import signal

    async def main() -> None:
        lean_instruments()
        lifespan = around if around is not None else contextlib.nullcontext()
        async with lifespan, trio.open_nursery() as nursery:
            server: HTTPServer = await nursery.start(serve, handler, config)
            logger.info(
                "serving on %s port %s", server.config.host, ", ".join(map(str, server.ports))
            )
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    logger.info("got signal %d: draining", signum)
                    server.shutdown()
                    break

    settings = config or ServerConfig()
    with fifo_batches(settings.fifo_scheduling), pooled_wakeups(settings.pooled_wakeups):
        trio.run(main)
