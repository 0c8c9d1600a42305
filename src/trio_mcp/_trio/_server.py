"""The trio shell: listeners, a task per connection, time limits, shutdown.

Everything protocol-shaped is decided by `HTTP11Connection`; this module only
moves bytes, owns tasks and applies time limits. Each connection's task (until
it starts, its `Arrival`) is the only writer on its socket, so response bytes
and stream chunks never tear.
`serve` runs a server in the caller's nursery; `run` (``_run.py``) runs one
from a script, with signals and start-up errors handled.

Time limits: each connection runs inside one cancel scope and keeps the
limit of its current phase as a plain number; one sweeper task per server
(`enforce_timeouts`, with `_limits.TimeLimits`) ends those whose limit has
passed, up to two ticks (`HTTPServer.timeout_tick_s`) late. A deferred
answer's handler is timed the same way, against the `time_limit_s` it gives
its writer. Hostile work comes a few steps at a time, each waiting for its
turn (`_turns.py`: when nothing else is runnable): the accept loop admits
`ACCEPTS_PER_TURN` connections per turn, and a head that did not come
whole in one read waits in the slow lane (`_slow_lane.py`); a new
connection's first head does so without a task (`_arrivals.py`).

A graceful shutdown (`HTTPServer.shutdown`): a `Handler`'s ``drain()`` is
called first (an `MCPEndpoint` stops reporting ready). For
``config.drain_delay_s`` the listener stays open and every request is still
served, each answer with ``Connection: close``. Then the listener closes (a
`DrainStages` handler's ``listener_closed()`` ends its long-lived streams;
the connections already in its queue are accepted first), and a connection
still open may send one more request within `LAST_REQUEST_GRACE_S`: it is
served, with ``Connection: close``, and one that sends nothing is closed.
Refusing it instead (503) or closing an idle connection at once fails the
request a proxy may be sending on its kept-alive connection at that very
moment: nginx never passes a POST that reached a server on to another, so
its client would get a 502 or the 503. What still runs
``config.shutdown_timeout_s`` later is cancelled (a deferred answer with its
writer `overdue`, so an MCP request is answered with an error).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from math import inf
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, final

import trio

from .._config import ServerConfig
from .._errors import RemoteProtocolError
from .._http._connection import (
    BODY,
    CLOSED,
    CONTINUE_RESPONSE,
    HEAD,
    IDLE,
    NEED_DATA,
    SEND_CONTINUE,
    Phase,
    Request,
    Response,
)
from .._http._handler import (
    Answer,
    DeferredResponse,
    DrainStages,
    Handler,
    HandlerFunction,
    HTTPObserver,
    StreamingResponse,
)
from .._speedups import USING_EXTENSIONS
from ._arrivals import Doorway, First
from ._closing import LINGER_S, close_connection, send_quietly
from ._collector import LOOK_EVERY, young_collections
from ._connection import (
    LAST_REQUEST_GRACE_S,
    TOO_SLOW,
    ByteStream,
    Connection,
    DateCache,
    Interruptible,
    http_connection,
)
from ._limits import TimeLimits, end_gradually, start_clock
from ._quotas import ConnectionQuota, refuse
from ._socketio import (
    RESOURCE_ERRNOS,
    BatchEndSender,
    SocketIO,
    bind_listeners,
    close_listener,
    interrupt_wakes_readers,
)
from ._tasks import in_python, python_coroutine, spawn
from ._tls import TLSStream, handshake, server_context
from ._turns import take_turn
from ._writer import DONE, NEW, STREAMING, ConnectionWriter

if TYPE_CHECKING:
    from ._spread import ConnectionSpread

logger = logging.getLogger("trio_mcp.server")

_INTERNAL_ERROR: Final = Response(
    500, [(b"content-type", b"text/plain; charset=utf-8")], b"internal server error\n"
)
#: How many connections the accept loop admits per turn (`_turns.py`): each
#: new connection's first read and parse run in the turn, and the first step
#: of the task of one whose request came whole in the next batch, ahead of the
#: requests woken with it, so a flood of connections must come a few at a time.
ACCEPTS_PER_TURN: Final = 8
#: How long a `DrainStages` handler's ``deadline_passed`` may take before the
#: answers still running are cancelled anyway.
_DEADLINE_HOOK_S: Final = 1.0
_Admit = Callable[[socket.socket, Any, bool, trio.Nursery], None]


@final
@dataclass(frozen=True, slots=True)
class HTTPServerStatistics:
    """A snapshot of a running server (see `HTTPServer.statistics`)."""

    connections_open: int
    connections_total: int
    requests_total: int
    draining: bool
    extensions_in_use: bool
    #: Connections refused for a quota (the server's cap, an address's share).
    connections_refused: int = 0
    #: Connections still sending their request heads, at the last tick.
    heads_waiting: int = 0


class HTTPServer:
    """A running HTTP server; handed out by `serve` through ``task_status``."""

    __slots__ = (
        "handler",
        "_route",
        "_call",
        "config",
        "sockets",
        "_connections",
        "_connections_total",
        "_requests_total",
        "_shutdown",
        "_dates",
        "_batch",
        "quota",
        "_refused",
        "_limits",
        "_interruptible",
        "timeout_tick_s",
        "tls",
        "_stages",
        "_listener_closed",
        "observer",
        "peer_socket",
        "spread",
        "_doorway",
        "_young",
    )

    def __init__(
        self,
        handler: Handler | HandlerFunction,
        config: ServerConfig,
        *,
        tls: ssl.SSLContext | None = None,
        spread: ConnectionSpread | None = None,
    ) -> None:
        """`tls`: the SSL context, if made (`run` makes it first); else made
        here from ``config.ssl_certfile`` (`TLSConfigError` if unusable)."""
        self.handler = handler
        # Which kind of application this is, decided once: a `Handler` routes
        # each request synchronously, a function is awaited for each.
        self._route: Callable[[Request], Answer] | None = None
        self._call: HandlerFunction | None = None
        if isinstance(handler, Handler):
            self._route = getattr(handler, "router", None) or handler.route
        else:
            self._call = handler
        self.config = config
        self.sockets: list[socket.socket] = []
        self._connections: set[Connection] = set()
        self._connections_total = 0
        self._requests_total = 0
        self._young = young_collections()  # (looked at every LOOK_EVERY requests)
        self._shutdown = trio.Event()
        self._dates = DateCache()
        #: Sends the answers held by connections when trio's scheduler batch
        #: ends (while `_run` runs; ``config.batch_end_sends``).
        self._batch: BatchEndSender | None = None
        #: The connections accepted, in all and per client address.
        self.quota = ConnectionQuota(config) if not spread else spread.joined(config, self._admit)
        self.spread = spread  # (`run`'s)
        self._refused = 0
        #: The sweeper's view of the connections' time limits.
        self._limits = TimeLimits(config, self._connections, self.quota)
        #: Whether an overdue head's socket can be interrupted instead of
        #: its connection cancelled (`Connection.end_overdue`).
        self._interruptible = interrupt_wakes_readers()
        #: How often time limits are checked: they fire up to twice this late
        #: (a phase is timed from the first check that sees it).
        self.timeout_tick_s = self._limits.tick_s
        #: The SSL context connections are served with (None: plain HTTP).
        self.tls = tls if tls is not None else server_context(config)
        #: The handler, if it wants the later moments of a graceful shutdown.
        self._stages: DrainStages | None = handler if isinstance(handler, DrainStages) else None
        #: The listener is closed (graceful shutdown): idle connections wait a second.
        self._listener_closed = False
        #: The handler's ``observer`` (metrics), if any: told of answers and refusals.
        self.observer: HTTPObserver | None = getattr(handler, "observer", None)
        if self.observer is not None:
            self.observer.serving(self)
        self.peer_socket: str | None = getattr(handler, "peer_socket", None)  # (`serve_hop`)
        #: Where new connections' first heads arrive with no task (`_open_doorway`).
        self._doorway: Doorway | None = None

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
            connections_refused=self._refused,
            heads_waiting=self._limits.heads_waiting,
        )

    def active_requests(self) -> int:
        """Deferred answers (event streams too) being produced now; counted when asked."""
        return sum(1 for conn in self._connections if conn.answering is not None)

    def shutdown(self) -> None:
        """Start a graceful shutdown (the module's docstring says its steps);
        `serve` returns when every connection is gone. Calling this again
        does nothing; to stop at once, cancel `serve`."""
        if self._shutdown.is_set():
            return
        for conn in self._connections:
            conn.http.draining = True  # (their next answers close)
        if isinstance(self.handler, Handler):
            self.handler.drain()
        self._shutdown.set()

    async def enforce_timeouts(self) -> None:
        """Apply the connections' time limits, forever (`serve` runs this; run
        it beside `handle_stream` when serving streams yourself)."""
        tick = self.timeout_tick_s
        dates = self._dates
        look = self._limits.look
        with dates.ticking():  # (tick is at most 0.5 s)
            while True:
                await trio.sleep(tick)
                dates.refresh()
                await end_gradually(await look(trio.current_time()))

    async def _run(self, task_status: trio.TaskStatus[HTTPServer]) -> None:
        config = self.config
        listeners = self.sockets or await bind_listeners(config)  # (`run`'s listeners)
        self.sockets = listeners
        listeners = _with_peer_listener(listeners, self.peer_socket, config.backlog)
        if config.batch_end_sends:
            self._batch = BatchEndSender()
            trio.lowlevel.add_instrument(self._batch)
        try:
            async with trio.open_nursery() as clock:
                start_clock(clock, self.enforce_timeouts, self._limits, self._interruptible)
                async with trio.open_nursery() as connections:
                    self._limits.watchers = connections
                    self._doorway = _open_doorway(self, connections)
                    async with trio.open_nursery() as acceptors:
                        for sock in listeners:
                            acceptors.start_soon(in_python, _accept_loop, self, sock, connections)
                        if self.spread is not None:
                            spawn(acceptors, "passed connections", self.spread.receive, connections)
                        task_status.started(self)
                        await self._shutdown.wait()
                        # Not ready from now (`shutdown`), still serving: a load
                        # balancer stops sending before connections are refused.
                        await trio.sleep(config.drain_delay_s)
                        acceptors.cancel_scope.cancel()
                    _drain(self, listeners, connections, clock)
                self._limits.watchers = None
                self._doorway = None
                clock.cancel_scope.cancel()
        finally:
            _stopped(self, listeners)

    def _admit(
        self, sock: socket.socket, address: Any, ip: bool, connections: trio.Nursery
    ) -> None:
        """Serve a connection just accepted, or refuse it (its address's quota)."""
        if not ip:  # (the peer socket's hops: `serve_hop` admits them)
            spawn(connections, "a hop", _serve_hop, self._serve, self.quota, self.config, sock)
            return
        host = address[0]
        group = self.quota.admit(host)
        if group is None:
            self._refused += 1
            refuse(sock, self.quota.refusal(host, trio.current_time()))
            if self.observer is not None:
                self.observer.refused(503)
        elif self._doorway is None:
            spawn(connections, "a connection", self._serve_socket, sock, group, host)
        else:
            self._connections_total += 1  # (the task counts no arrival again)
            self._doorway.admit(sock, host, group, self._shutdown.is_set())

    async def _serve_socket(
        self,
        sock: socket.socket,
        group: str,
        host: str,
        conn: Connection | None = None,
        first: First = None,
    ) -> None:
        """Serve a connection accepted, or an arrival's (`conn`, `first`: `Doorway.start`)."""
        config = self.config
        context = self.tls
        try:
            try:
                # (over TLS no batch-end sends, and no interrupt of an overdue
                # head: _tls.py says why)
                batch = self._batch if context is None else None
                io = SocketIO(sock, batch, config.write_timeout_s)
            except OSError:
                if conn is not None:
                    self._connections.discard(conn)
                sock.close()  # reset before we got to it
                return
            if conn is not None:
                conn.interruptible = io
                await self._serve(io, conn=conn, first=first)
            elif context is None:
                await self._serve(io, host, io if self._interruptible else None, group)
            else:
                tls = TLSStream(io, context, config.receive_chunk_bytes)
                await self._serve(tls, host, None, group, tls)
        finally:
            self.quota.leave(group)

    async def handle_stream(self, stream: trio.abc.HalfCloseableStream) -> None:
        """Serve one connection over any trio stream until it closes (with
        time limits only while `enforce_timeouts` runs: `serve` runs it)."""
        await self._serve(stream)

    async def _serve(
        self,
        stream: ByteStream,
        client: str = "",
        interruptible: Interruptible | None = None,
        group: str | None = None,
        tls: TLSStream | None = None,
        hop: tuple[str, bytes] | None = None,
        conn: Connection | None = None,
        first: First = None,
    ) -> None:
        """Serve a connection: a new one, or an arrival's (`_serve_socket`)."""
        timer = trio.CancelScope()
        if conn is None:
            self._connections_total += 1
            http = http_connection(self.config, client, self.quota.trust, hop)
            conn = Connection(http, timer, interruptible, group)
            self._connections.add(conn)
            if self._shutdown.is_set():
                http.draining = True
        else:
            conn.timer = timer  # (the arrival stood in for it)
        peer_gone = True
        try:
            with timer:
                if tls is None or await handshake(tls, conn, self.config.ssl_handshake_timeout_s):
                    peer_gone = await self._converse(stream, conn, first)
            peer_gone = await _answer_overdue(stream, conn, peer_gone, self._dates)
        finally:
            self._connections.discard(conn)
            _let_go_of_answer(conn)
            if conn.holding:
                self.quota.give_body(conn.holding)
            # (a hop: nothing unread)
            await close_connection(stream, conn, peer_gone or hop is not None)

    async def _converse(self, stream: ByteStream, conn: Connection, first: First) -> bool:
        """Read requests and answer them in order until the connection must close;
        `first`: what the parser said already, if anything (an arrival's).

        Returns True when the peer is known to be gone (EOF, reset), so there is
        nothing to linger for.
        """
        http = conn.http
        config = self.config
        chunk_size = config.receive_chunk_bytes
        write_timeout = config.write_timeout_s
        route = self._route
        call = self._call
        dates = self._dates
        # What runs per request, looked up once per connection: a method found
        # by name on each call costs a type lookup and a bound method each time.
        next_event = http.next_event
        receive_data = http.receive_data
        receive_some = stream.receive_some
        limit_phase = conn.limit_phase
        finish_deferred = _finish_deferred
        idle_timeout = config.idle_timeout_s
        observer = self.observer
        started = 0.0
        limited_phase: Phase | None = None
        holding = 0  # the bytes of the bodies' budget this request's body holds
        while True:
            try:
                if first is None:
                    event = next_event()
                elif isinstance(first, RemoteProtocolError):
                    raise first
                else:
                    event, first = first, None
            except RemoteProtocolError as exc:
                limit_phase(write_timeout)
                await send_quietly(stream, http.error_response(exc, dates.get()))
                if observer is not None:
                    observer.refused(exc.status)
                return False
            if event is NEED_DATA:
                phase = http.phase
                if phase is not limited_phase:
                    # Each phase gets its own whole-phase limit.
                    limited_phase = phase
                    if phase is IDLE:
                        # (an answer begun before the drain said keep-alive:
                        # one more request, as `Connection.drain` allows)
                        limit_phase(LAST_REQUEST_GRACE_S if self._listener_closed else idle_timeout)
                    elif phase is HEAD:
                        conn.limit_head(config.head_timeout_s, self._limits.lane)
                    else:
                        limit_phase(config.body_timeout_s)
                        # A body that did not come whole with its head waits in
                        # memory: all such bodies together have a budget.
                        holding = http.body_size()
                        if not self.quota.take_body(holding):
                            holding = 0
                            refusal = self.quota.bodies_refusal(trio.current_time())
                            await send_quietly(stream, refusal)
                            if observer is not None:
                                observer.refused(503)
                            return False
                        conn.holding = holding  # (for the connection's end)
                try:
                    data = await receive_some(chunk_size)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return True
                if not data and conn.overdue:
                    return False  # (`_serve` answers the interrupted head)
                receive_data(data)
                continue
            if event is SEND_CONTINUE:
                await stream.send_all(CONTINUE_RESPONSE)
                continue
            if event is CLOSED:
                return True
            assert isinstance(event, Request)
            if holding:  # (a local: the common case costs no attribute read)
                self.quota.give_body(holding)
                holding = conn.holding = 0
            self._requests_total += 1
            if self._young is not None and not self._requests_total % LOOK_EVERY:
                self._young.look()
            limited_phase = None
            conn.limit = inf
            response: Answer
            if observer is not None:
                started = event.started = perf_counter()  # (the transports' start too)
                method = event.method
            try:
                if route is not None:
                    response = route(event)
                else:
                    assert call is not None
                    response = await call(event)
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
                # (the writer is the connection's answer now: the sweeper
                # watches the client of one that runs long)
                writer = ConnectionWriter(stream, conn, dates, write_timeout)
                writer.outlives_peer = response.outlives_peer
                conn.limit = inf
                try:
                    await response.respond(writer)
                    failed = False
                except Exception:
                    logger.exception("deferred response failed")
                    failed = True
                # (not in a finally: that costs an exception-state save per
                # request; a connection cancelled here ends, and its watch
                # with it when the socket closes)
                writer.finished()
                del response  # (nor its request, while the connection waits)
                if (failed or writer.state is not DONE) and not await finish_deferred(
                    writer, failed
                ):
                    return True
                if writer.broken:
                    return True
            else:
                assert isinstance(response, StreamingResponse)
                conn.limit_phase(write_timeout)
                if not await _send_streaming(stream, conn, response, write_timeout, dates):
                    return True
            if observer is not None:
                observer.http_answered(method, http.status, started)
            if http.must_close:
                return False


def _open_doorway(server: HTTPServer, connections: trio.Nursery) -> Doorway | None:
    """Where `server`'s new plain connections wait for their first head, their
    tasks started in `connections` (None: each gets its task at once)."""
    lane = server._limits.lane
    if lane is None or server.tls is not None:
        return None
    doorway = Doorway(server.config, lane, server._connections, server.quota, server._dates)
    doorway.serve_in(connections, server._serve_socket)
    return doorway


async def _accept_loop(
    server: HTTPServer, listener: socket.socket, connections: trio.Nursery
) -> None:
    accepted = 0
    ip = listener.family in (socket.AF_INET, socket.AF_INET6)
    spread = server.spread
    admit = server._admit if spread is None or not ip else spread.admit_or_pass
    while True:
        if accepted >= ACCEPTS_PER_TURN:
            accepted = 0
            await take_turn()
        try:
            sock, address = listener.accept()
        except BlockingIOError:
            await trio.lowlevel.wait_readable(listener)
            accepted = ACCEPTS_PER_TURN  # (the first accepts wait for a turn too)
            continue
        except OSError as exc:
            if exc.errno not in RESOURCE_ERRNOS:
                raise
            # Out of file descriptors or memory: wait, don't spin (as trio does).
            logger.error("accept failed: %s; retrying in 100 ms", exc)
            await trio.sleep(0.1)
            continue
        admit(sock, address, ip, connections)
        accepted += 1


def _drain(
    server: HTTPServer, listeners: list[Any], connections: trio.Nursery, clock: trio.Nursery
) -> None:
    """The drain's moment to stop accepting (the module docstring): close the
    listeners (serving what their queues hold), give the connections waiting
    for a request a last grace, keep the connections' nursery open for the
    arrivals still arriving, and end what still runs at the deadline."""
    _close_listeners(listeners, server._admit, connections)
    server._listener_closed = True
    if server._stages is not None:
        server._stages.listener_closed()
    for conn in list(server._connections):
        conn.drain()
    if server._doorway is not None:
        spawn(connections, "the last arrivals", server._doorway.lane.arrivals_gone)
    deadline = trio.current_time() + server.config.shutdown_timeout_s
    clock.start_soon(
        in_python, _stop_at, deadline, connections, server._connections, server._stages
    )


def _with_peer_listener(listeners: list[Any], path: str | None, backlog: int | None) -> Any:
    """`listeners` and the group's peer listener (`_peers.py`: loaded in a group only)."""
    if path is None:
        return listeners
    from ._peers import with_peer_listener

    return with_peer_listener(listeners, path, backlog)


def _close_listeners(listeners: list[Any], admit: _Admit, connections: trio.Nursery) -> None:
    """Close the `listeners` after admitting what waits in their queues:
    closing one would reset those connections, whose clients connected
    while it was open."""
    for listener in listeners:
        _accept_queued(listener, admit, connections)
        close_listener(listener)


def _accept_queued(listener: socket.socket, admit: _Admit, connections: trio.Nursery) -> None:
    """Admit the connections waiting in `listener`'s queue (`HTTPServer._admit`)."""
    ip = listener.family in (socket.AF_INET, socket.AF_INET6)
    while True:
        try:
            sock, address = listener.accept()
        except OSError:  # (BlockingIOError: none left)
            return
        admit(sock, address, ip, connections)


def _stopped(server: HTTPServer, listeners: list[Any]) -> None:
    """Close what `HTTPServer._run` opened: the listeners still open, and
    the batch-end sender (what it holds is sent first)."""
    for listener in listeners:
        if listener.fileno() >= 0:
            close_listener(listener)
    batch = server._batch
    if batch is not None:
        server._batch = None
        _last_flush(batch)


def _last_flush(batch: BatchEndSender) -> None:
    batch.before_io_wait(0)  # (normally nothing is held by now)
    with contextlib.suppress(KeyError):  # (trio drops an instrument that raised)
        trio.lowlevel.remove_instrument(batch)


def _let_go_of_answer(conn: Connection) -> None:
    """At a connection's end: let go of its answer's writer. One cancelled
    before it finished still refers back to the connection, and its
    keepalives (`slow`) to it: left as a cycle, each vanished call would
    hold its connection, socket and buffers until a full collection."""
    writer = conn.answering
    if writer is not None:
        conn.answering = writer.slow = None


async def _serve_hop(*args: Any) -> None:
    from ._peers import serve_hop

    await serve_hop(*args)


async def _finish_deferred(writer: ConnectionWriter, failed: bool) -> bool:
    """After a DeferredResponse that failed (`failed`) or did not finish its
    answer: a 500 if it wrote nothing, the end of its stream if it started
    one; False when the answer must be cut short or the peer went away."""
    if writer.state is NEW:
        if not failed:
            logger.error("a deferred response wrote nothing; answering 500")
        await writer.respond(_INTERNAL_ERROR)
    elif failed:
        return False  # cut the stream short: the client sees it incomplete
    elif writer.state is STREAMING:
        await writer.end()
    return not writer.broken


async def _stop_at(
    deadline: float,
    connections: trio.Nursery,
    open_connections: set[Connection],
    stages: DrainStages | None,
) -> None:
    """At the shutdown deadline, end what still runs: the handler's own work
    first (`DrainStages.deadline_passed`), then every answer in progress, each
    writer `overdue` so that the answer can still say why (in a shielded
    scope), then everything else."""
    await trio.sleep_until(deadline)
    if stages is not None:
        with trio.move_on_after(_DEADLINE_HOOK_S):
            await stages.deadline_passed()
    for conn in list(open_connections):
        writer = conn.answering
        if writer is not None:
            writer.overdue = True
            conn.timer.cancel()
    connections.cancel_scope.cancel()


async def _send_streaming(
    stream: ByteStream,
    conn: Connection,
    response: StreamingResponse,
    write_timeout: float,
    dates: DateCache,
) -> bool:
    """Send a streamed response; False when the peer went away mid-stream."""
    http = conn.http
    body = response.body
    try:
        await stream.send_all(http.start_stream(response.status, response.headers, dates.get()))
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
        if isinstance(body, AsyncGenerator):
            with trio.CancelScope(shield=True):
                await body.aclose()


async def _answer_overdue(
    stream: ByteStream, conn: Connection, peer_gone: bool, dates: DateCache
) -> bool:
    """After a connection's conversation: a 408 if its head or body took too
    long. Whether to close at once (True) rather than linger."""
    http = conn.http
    interruptible = conn.interruptible
    if conn.overdue and interruptible is not None and http.phase is HEAD:
        # The sweeper interrupted a head that took too long: what the kernel
        # takes of the 408 goes now, and the socket closes with no lingering
        # (a client still sending may see a reset; one that trickles its head
        # is not owed more).
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            interruptible.send_nowait(http.error_response(TOO_SLOW, dates.get()))
        return True
    if conn.timer.cancelled_caught and http.phase in (HEAD, BODY):
        with trio.move_on_after(LINGER_S):
            await send_quietly(stream, http.error_response(TOO_SLOW, dates.get()))
        return False
    return peer_gone


@python_coroutine
async def serve(
    handler: Handler | HandlerFunction,
    config: ServerConfig | None = None,
    *,
    task_status: trio.TaskStatus[HTTPServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `handler` over HTTP/1.1 until `HTTPServer.shutdown` is called.

    `handler` is a `Handler` (an object whose ``route(request)`` answers each
    request without waiting, as `MCPEndpoint` does) or an async function
    awaited for each request.

    Use with ``server = await nursery.start(serve, handler, config)``; the
    value handed to ``task_status`` is the running `HTTPServer` (ports, statistics,
    shutdown). Cancelling `serve` stops the server at once, without a drain.
    """
    server = HTTPServer(handler, config or ServerConfig())
    await server._run(task_status)
