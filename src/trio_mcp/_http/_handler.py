"""What the HTTP server asks of the application it serves, and what it gives it.

A `Handler` routes each complete request to its answer, synchronously: a
`Response` (sent at once), a `StreamingResponse`, or a `DeferredResponse` for
an answer that needs waiting (authentication, a tool call, an event stream).
The server runs a deferred answer on the connection's own task with a
`ResponseWriter`, the only writer of that connection, so nothing a handler
writes can interleave with anything else. Sans-IO: these are the types and
the rules; the trio shell implements the writer.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Protocol, final, runtime_checkable

from ._connection import Headers, Request, Response


@final
class StreamingResponse:
    """A response whose body is produced while it is sent (SSE, large data).

    Sent with chunked framing on HTTP/1.1 and close-delimited on HTTP/1.0.
    The status and headers go out before the first chunk is produced; `body`
    is iterated by the connection's only writer, so chunks never interleave
    with other output.
    """

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Headers, body: AsyncIterable[bytes]) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class Cancellable(Protocol):
    """A cancel scope, as far as a handler needs one."""

    @property
    def cancel_called(self) -> bool: ...

    def cancel(self) -> None: ...


class SlowAnswer(Protocol):
    """What an answer does when it takes long (`ResponseWriter.slow`)."""

    @property
    def slow_after_s(self) -> float:
        """How long the answer runs before `keep_alive` starts (inf: never)."""
        ...

    async def keep_alive(self) -> None:
        """Keep the response alive until the answer ends (a stream of
        keepalives, say): run by the server in a task of its own, once."""
        ...


class ResponseWriter(Protocol):
    """Writes the answer of a `DeferredResponse`: one full response, or a stream.

    Either `respond` once (or `respond_nowait`, then `send_rest` with what it
    returned), or `start`, then any number of `send` (or `send_nowait`, then
    `send_framed` with its rest), then `end`. Writes to a peer that has gone
    away are dropped and set `broken`.
    """

    #: True once a write failed, or the server saw the client go.
    broken: bool
    #: What happens when the client goes while the answer is produced (the
    #: server watches the client of an answer that runs for more than a
    #: tick): False (the default), the handler is cancelled with the
    #: connection; True, the handler goes on, its writes dropped, and only the
    #: connection is closed at once.
    outlives_peer: bool
    #: How long the answer's handler may run (inf, the default: as long as it
    #: likes), timed from the server's first look at it, so it ends up to two
    #: ticks late: past it the server sets `overdue` and cancels the
    #: connection's scope. A handler that catches that cancellation may still
    #: send an answer in a shielded scope before the connection closes.
    time_limit_s: float
    #: True once the server cancelled the answer for its `time_limit_s`.
    overdue: bool
    #: What to do once the answer has run ``slow.slow_after_s`` (timed like
    #: `time_limit_s`): the server runs ``slow.keep_alive()`` in a task of its
    #: own, beside the handler. None (the default): nothing. Quick answers
    #: never cost that task. The server lets go of it when the answer ends.
    slow: SlowAnswer | None

    @property
    def started(self) -> bool:
        """True once the status line is out (nothing can change it any more)."""
        ...

    @property
    def streaming(self) -> bool:
        """True between `start` and `end`: a streamed body is open."""
        ...

    @property
    def cancel_scope(self) -> Cancellable:
        """The connection's scope: cancelling it abandons the answer and closes
        the connection."""
        ...

    async def respond(self, response: Response) -> None:
        """Send one complete response."""
        ...

    def respond_nowait(self, response: Response) -> bytes:
        """`respond` without waiting: what the socket did not take, for `send_rest`."""
        ...

    async def send_rest(self, rest: bytes) -> None:
        """Send the rest that `respond_nowait` returned."""
        ...

    async def start(self, status: int, headers: Headers, first: bytes = b"") -> None:
        """Send the head of a streamed answer, with the `first` piece of its body."""
        ...

    async def send(self, piece: bytes) -> None:
        """Send one piece of the streamed body."""
        ...

    def send_nowait(self, piece: bytes) -> bytes | None:
        """Send one piece now if the socket takes it: b"" when it all went, the
        framed rest for `send_framed`, None when the client is gone."""
        ...

    async def send_framed(self, data: bytes) -> None:
        """Send the rest that `send_nowait` returned."""
        ...

    async def end(self, last: bytes = b"") -> None:
        """Finish the streamed body, with the `last` piece."""
        ...

    async def end_and_close(self) -> None:
        """Finish the streamed body and close the connection."""
        ...

    def peer_watch(self) -> Callable[[], Awaitable[bool]] | None:
        """For an idle stream: an awaitable that returns when the client sends
        more (False) or closes its end (True); None where that cannot be watched."""
        ...


class DeferredResponse:
    """An answer decided while it is produced: ``await respond(writer)`` writes it.

    A handler returns this when the answer needs waiting, or when it cannot
    tell yet whether it will be one complete response or a stream (an MCP
    request answers with JSON unless the tool emits progress first). The
    server awaits ``respond`` on the connection's task with its writer.
    `outlives_peer`: the answer goes on when its client goes (see
    `ResponseWriter.outlives_peer`). (Final: its .pxd makes it a C type.)
    """

    __slots__ = ("respond", "outlives_peer")

    def __init__(
        self, respond: Callable[[ResponseWriter], Awaitable[None]], outlives_peer: bool = False
    ) -> None:
        self.respond = respond
        #: The writer's `ResponseWriter.outlives_peer` to begin with.
        self.outlives_peer = outlives_peer


#: What a handler answers a request with.
Answer = Response | StreamingResponse | DeferredResponse


@runtime_checkable
class Handler(Protocol):
    """An application served by the HTTP server (`serve`, `run`).

    `route` is called on the connection's task for every complete request and
    must not block: whatever needs waiting goes into a `DeferredResponse`. An
    exception from `route`, or from a deferred answer before it wrote
    anything, is answered 500 and logged. `drain` is called once when a
    graceful shutdown begins, so long-lived streams can end cleanly (or, for
    a handler that is also `DrainStages`, so it stops reporting ready). A
    handler with a ``router`` attribute has the server call that instead of
    `route` (read once: a handler picks its routing at start-up).
    """

    def route(self, request: Request) -> Answer: ...

    def drain(self) -> None: ...


@runtime_checkable
class DrainStages(Protocol):
    """The later moments of a graceful shutdown, for a `Handler` that has
    these methods too (`MCPEndpoint` has).

    The server calls `drain` first, and keeps its listener open for
    ``drain_delay_s`` (new requests are served, with ``Connection: close``);
    then it closes the listener and calls `listener_closed`: only work in
    flight is left, long-lived streams should end now. When
    ``shutdown_timeout_s`` has passed after that, it awaits
    `deadline_passed` (for at most a second), then cancels every answer
    still running, its writer `overdue` so the answer can say why.
    """

    def listener_closed(self) -> None: ...

    async def deadline_passed(self) -> None:
        """Finish what the handler runs outside the server's connections
        (cancel it, with an error answer where one is owed)."""


class HTTPObserver(Protocol):
    """What the server reports, when the application it serves has an
    ``observer`` attribute that is not None (metrics): read once, when the
    server is made, so an application without one costs nothing per request."""

    def serving(self, server: object) -> None:
        """The server that serves the application (for gauges read later)."""
        ...

    def http_answered(self, method: str, status: int, started: float) -> None:
        """A request was answered with `status`; `started` is the
        ``time.perf_counter()`` of its arrival (complete)."""
        ...

    def refused(self, status: int) -> None:
        """A refusal with no request to go with (at accept, a body over the
        budget, a request that could not be read)."""
        ...


#: The other kind of application `serve` takes: an async function from a
#: request to its answer (awaited for every request).
HandlerFunction = Callable[[Request], Awaitable[Answer]]
