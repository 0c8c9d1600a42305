"""The 2024-11-05 HTTP+SSE transport, served beside the endpoint.

``GET /sse`` opens a session whose every message travels on that one stream
(`HTTPSSETransport.open`); it announces the URL for the client's POSTs,
``/messages?session_id=...``, which are accepted at once (202) and answered on
the stream (`post`). Each request runs in a task of its own in the endpoint's
nursery, under a cancel scope of its own; the stream is the session, so when
it ends, the session ends with everything it holds.

In a graceful shutdown, a session whose requests still run keeps its stream
(`drain`) until the last is answered; at the shutdown deadline (`stop`) those
requests are cancelled and answered with the shutdown error there.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

import trio

from .._config import MCPConfig
from .._errors import MCPError, Rejection, SessionsFull
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._protocol._admission import SSE, accepts, is_json_content_type, query_value
from .._protocol._answers import refuse, rejection_response, sessions_full
from .._protocol._jsonrpc import (
    INTERNAL_ERROR,
    Notification,
    RPCRequest,
    RPCResponse,
    answer_bytes,
    decode_body,
)
from .._protocol._sessions import Session, session_owner
from .._speedups import format_event
from .._stores._bus import Subscriber
from .._stores._stores import Stores
from .._trio._tasks import spawn
from ._fanout import Sweeper
from ._handshake import Handshake
from ._runner import RequestRunner
from ._streams import SSE_HEADERS, Outbox, SSEStream

if TYPE_CHECKING:
    from .._observe import Observer

#: The revision of the sessions this transport opens (until their initialize).
HTTP_SSE_VERSION: Final = "2024-11-05"


class HTTPSSETransport:
    """``GET /sse`` and ``POST /messages`` (see the module docstring)."""

    __slots__ = (
        "config",
        "sessions",
        "bus",
        "runner",
        "sweeper",
        "handshake",
        "nursery",
        "_answering",
        "_running",
        "_open_streams",
        "_draining",
        "_stopping",
        "_quiet",
        "observer",
    )

    def __init__(
        self,
        config: MCPConfig,
        stores: Stores,
        runner: RequestRunner,
        sweeper: Sweeper,
        handshake: Handshake,
    ) -> None:
        self.config = config
        self.sessions = stores.sessions
        self.bus = stores.bus
        self.runner = runner
        self.sweeper = sweeper
        self.handshake = handshake
        #: Runs the sessions' requests, while the endpoint runs.
        self.nursery: trio.Nursery | None = None
        #: session id -> its requests running or waiting for the stream here
        self._answering: dict[str, int] = {}
        #: The cancel scopes of the requests running here (for `stop`).
        self._running: set[trio.CancelScope] = set()
        #: Streams open here, and how a graceful shutdown has gone so far:
        #: a session's stream closes after its last answer (`drain`); the
        #: requests still running are ended (`stop`), which waits for `_quiet`.
        self._open_streams = 0
        self._draining = False
        self._stopping = False
        self._quiet: trio.Event | None = None
        #: Metrics and the access log (None: both off).
        self.observer: Observer | None = None

    def check_open(self, request: Request) -> None:
        """GET /sse's refusals before authentication: its Accept (406), and an
        endpoint that is not running (503)."""
        if not accepts(request.header_values(b"accept") or [b"*/*"], SSE):
            raise refuse(406, "Not Acceptable: use text/event-stream")
        if self.nursery is None:
            raise Rejection(
                503, MCPError(INTERNAL_ERROR, "Service Unavailable: the endpoint is not running")
            )

    def answering(self) -> int:
        """How many requests run or wait for their stream (for statistics)."""
        return sum(self._answering.values())

    def open(
        self, request: Request, cors: Headers, principal: object
    ) -> Response | DeferredResponse:
        """GET /sse (after `check_open`): a new session whose every answer
        travels on this stream. HEAD gets GET's head, and no session."""
        if request.method == "HEAD":
            return Response(200, SSE_HEADERS + cors)
        owner = session_owner(principal, request.client, self.runner.principal_key)
        return DeferredResponse(partial(self._stream, principal, owner, cors))

    async def _stream(
        self, principal: object, owner: str, cors: Headers, writer: ResponseWriter
    ) -> None:
        try:
            session = await self.sessions.create(
                principal, HTTP_SSE_VERSION, {}, {}, http_sse=True, owner=owner
            )
        except SessionsFull as full:
            await writer.respond(rejection_response(sessions_full(full), cors))
            return
        if self.observer is not None:
            self.observer.session_started(session.id)
        outbox = Outbox(self.config.stream_queue_bytes)
        self._open_streams += 1
        try:
            await self.bus.attach(session.id, outbox)  # (a new session has no stream)
            endpoint = f"{self.config.messages_path}?session_id={session.id}".encode()
            await writer.start(200, SSE_HEADERS + cors, format_event(endpoint, event=b"endpoint"))
            await outbox.pump(writer, self.config.keepalive_s)
        finally:
            # The stream is the session: when it goes, so does everything it holds.
            outbox.close()
            with trio.CancelScope(shield=True):
                if await self.sessions.delete(session.id):
                    await self.sweeper.release(session.id)
            self._open_streams -= 1
            if not self._open_streams and self._quiet is not None:
                self._quiet.set()

    def check_post(self, request: Request) -> None:
        """POST /messages' refusal before authentication: no session named (400)."""
        if query_value(request.query, "session_id") is None:
            raise refuse(400, "Bad Request: session_id is required")

    def post(self, request: Request, principal: object) -> DeferredResponse:
        """POST /messages?session_id=... (after `check_post`): accepted at once,
        answered on the stream."""
        return DeferredResponse(partial(self._post, request, principal))

    async def _post(self, request: Request, principal: object, writer: ResponseWriter) -> None:
        try:
            response = await self._accept(request, principal)
        except Rejection as rejection:
            response = rejection_response(rejection)
        await writer.respond(response)

    async def _accept(self, request: Request, principal: object) -> Response:
        session_id = query_value(request.query, "session_id")
        assert session_id is not None
        session = await self.sessions.get(session_id)
        outbox = self.bus.stream_of(session_id)
        if session is None or outbox is None or not session.http_sse:
            raise refuse(404, "Session not found")  # (an endpoint session is not one here)
        if session.principal != principal:
            raise refuse(403, "Forbidden: the session belongs to another principal")
        if not is_json_content_type(request.singles.get(b"content-type")):
            raise refuse(415, "Unsupported Media Type: use application/json")
        try:
            messages, _ = decode_body(request.body, allow_batch=False)
        except MCPError as exc:
            raise Rejection(400, exc) from None
        message = messages[0]
        if type(message) is Notification:
            self.runner.notify(message, session)
        elif type(message) is RPCResponse:
            self.runner.resolve(message, session)
        elif type(message) is RPCRequest:
            assert self.nursery is not None
            answering = dict.get(self._answering, session.id, 0)
            if answering >= self.config.max_answering_per_session:
                raise refuse(
                    429,
                    f"Too Many Requests: {answering} requests of this session are being "
                    "answered; read the stream",
                    [(b"retry-after", b"1")],
                )
            self._answering[session.id] = answering + 1
            spawn(
                self.nursery,
                "an HTTP+SSE request",
                self._answer,
                request,
                session,
                outbox,
                message,
                principal,
            )
        return Response(202, [(b"content-type", b"text/plain")], b"Accepted")

    async def _answer(
        self,
        request: Request,
        session: Session,
        outbox: Subscriber,
        message: RPCRequest,
        principal: object,
    ) -> None:
        """Run one request and send its answer on the session's stream (none when
        the client cancelled it)."""
        started = perf_counter()
        answer: dict[str, Any] | None = None
        timeout = self.config.request_timeout_s
        scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        if self._stopping:
            scope.cancel()
        self._running.add(scope)
        try:
            with scope:
                stream = SSEStream(session, outbox, scope)
                if message.method == "initialize":
                    answer = await self.handshake.initialize_session(session.id, message)
                else:
                    answer = await self.runner.run(
                        message, stream, request.headers, principal, None
                    )
            if scope.cancelled_caught and (self._stopping or trio.current_time() >= scope.deadline):
                answer = self.runner.overdue_answer(message)
            if answer is not None:
                await stream.emit(answer_bytes(answer))
        finally:
            self._running.discard(scope)
            if self.observer is not None:
                self.observer.answered(
                    request.client,
                    message.method,
                    message.params,
                    answer,
                    # (the POST's status: the answer went on the stream)
                    202 if answer is not None else 499,
                    session.protocol_version,
                    principal,
                    session.id,
                    started,
                )
            left = self._answering[session.id] - 1
            if left:
                self._answering[session.id] = left
            else:
                del self._answering[session.id]
                if self._draining:
                    outbox.close()  # (its last answer is queued: the stream ends after it)

    def drain(self) -> set[str]:
        """The server's listener has closed: the sessions whose requests still
        run keep their streams until the last is answered. Returns them."""
        self._draining = True
        return set(self._answering)

    async def stop(self) -> None:
        """The server's shutdown deadline: cancel the requests still running
        (each is answered with the shutdown error on its stream, which then
        ends), and wait until every stream here has ended."""
        self._stopping = True
        for scope in self._running:
            scope.cancel()
        if self._open_streams:
            self._quiet = trio.Event()
            await self._quiet.wait()
