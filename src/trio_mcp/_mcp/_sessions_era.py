"""Streamable HTTP with sessions: the 2025 revisions (and 2024-11-05 clients
that initialize on the endpoint).

`SessionsTransport` takes over once the router has decoded a POST's body and
found it is not a 2026-07-28 request. `post` answers at once what needs no
session (a refusal, initialize, a stateless request); a POST that names a
session is answered in `_in_session`, which looks the session up in the
store (404, 403, 400), then answers notifications and responses (202) and
runs the requests (`_answer`): one JSON object, a batch, or an SSE stream if
a handler emitted first or ran long (`PostStream.keep_alive`). `get` opens
the session's GET stream or resumes a stream with ``Last-Event-ID``;
`delete` ends a session. Statuses are all decided before the first byte is
written.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

import trio

from .._config import MCPConfig
from .._errors import EventsLost, MCPError, Rejection
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._json import dumps, loads
from .._protocol._answers import (
    FORBIDDEN,
    JSON_HEADERS,
    forbidden,
    refuse,
    rejection_response,
)
from .._protocol._events import StoredEvent
from .._protocol._jsonrpc import (
    INVALID_REQUEST,
    UNENCODABLE,
    Invalid,
    Message,
    Notification,
    RPCRequest,
    RPCResponse,
    answer_bytes,
    error_message,
)
from .._protocol._revisions import BATCH_VERSION, HEADERLESS_VERSION, LEGACY_VERSIONS
from .._protocol._sessions import Session, session_owner
from .._speedups import format_event
from .._stores._stores import Stores
from ._fanout import Broadcaster, Sweeper
from ._handshake import Handshake
from ._runner import Refused, RequestRunner
from ._streams import MESSAGE, SSE_HEADERS, Outbox, PostStream

if TYPE_CHECKING:
    from .._observe import Observer

#: A session's protocol version as the MCP-Protocol-Version header value: its
#: requests' headers are compared without decoding them.
_HEADER_VALUES: Final = {version: version.encode("latin-1") for version in LEGACY_VERSIONS}


class SessionsTransport:
    """The 2025 revisions' POST, GET and DELETE (see the module docstring)."""

    __slots__ = (
        "config",
        "sessions",
        "events",
        "bus",
        "runner",
        "broadcaster",
        "sweeper",
        "handshake",
        "observer",
    )

    def __init__(
        self,
        config: MCPConfig,
        stores: Stores,
        runner: RequestRunner,
        broadcaster: Broadcaster,
        sweeper: Sweeper,
        handshake: Handshake,
    ) -> None:
        self.config = config
        self.sessions = stores.sessions
        self.events = stores.events
        self.bus = stores.bus
        self.runner = runner
        self.broadcaster = broadcaster
        self.sweeper = sweeper
        self.handshake = handshake
        self.observer: Observer | None = None  # (metrics and the access log; None: off)

    def check_session(
        self, session: Session | None, request: Request, principal: object
    ) -> Session:
        """The session a request names, as the store found it, or the refusal:
        unknown or expired 404, another principal's 403, another protocol
        version 400."""
        if session is None or session.http_sse:  # (an HTTP+SSE session is not one here)
            raise refuse(404, "Session not found: initialize a new session")
        if session.principal != principal:
            raise refuse(403, "Forbidden: the session belongs to another principal")
        header = dict.get(request.singles, b"mcp-protocol-version")
        version = session.protocol_version
        if header is not None and header != (
            dict.get(_HEADER_VALUES, version) or version.encode("latin-1")
        ):
            raise refuse(400, "Bad Request: MCP-Protocol-Version differs from the session's")
        return session

    # ---- POST ----------------------------------------------------------------

    def post(
        self,
        request: Request,
        messages: list[Message | Invalid],
        batch: bool,
        cors: Headers,
        principal: object,
    ) -> Response | DeferredResponse:
        """A POST's refusal or answer, once its body is decoded. Synchronous
        when the session store answers at once (`get_nowait`, `create_nowait`);
        otherwise the lookup, or the new session, is awaited in the answer."""
        raw = dict.get(request.singles, b"mcp-session-id")
        if raw is not None:
            session_id = raw.decode("latin-1")
            try:
                found = self.sessions.get_nowait(session_id)
            except trio.WouldBlock:
                return DeferredResponse(
                    partial(self._look_up, request, session_id, messages, batch, principal, cors)
                )
            session = self.check_session(found, request, principal)
            version = session.protocol_version
            answered = self._accepted(messages, batch, version, session)
            if answered is not None:
                return answered
            return self._deferred(request, session, version, messages, batch, principal, cors)
        header = dict.get(request.singles, b"mcp-protocol-version")
        version = header.decode("latin-1") if header is not None else HEADERLESS_VERSION
        if batch and version != BATCH_VERSION:
            raise refuse(400, "Invalid request: batches are not supported")
        first = messages[0]
        initialize = (
            first
            if len(messages) == 1 and type(first) is RPCRequest and first.method == "initialize"
            else None
        )
        if initialize is None and not self.config.stateless:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        answered = self._accepted(messages, batch, version, None)
        if answered is not None:
            return answered
        if initialize is not None:
            owner = session_owner(principal, request.client, self.runner.principal_key)
            if self.runner.app.authorize is None:
                try:
                    response = self.handshake.initialize_nowait(initialize, principal, batch, owner)
                except trio.WouldBlock:
                    pass
                else:
                    return _initialized(self.observer, request, initialize, response, principal)
            return DeferredResponse(
                partial(_initialize, self, request, initialize, principal, batch, owner, cors)
            )
        return self._deferred(request, None, version, messages, batch, principal, cors)

    def _deferred(
        self,
        request: Request,
        session: Session | None,
        version: str,
        messages: list[Message | Invalid],
        batch: bool,
        principal: object,
        cors: Headers,
    ) -> DeferredResponse:
        """The answer to a POST's requests, run when the server awaits it.

        A session's requests outlive their client (the 2025 rule: a
        disconnect is no cancellation, and their events stay for a resume); a
        stateless one is cancelled, since nothing could resume it."""
        if self.runner.app.authorize is not None:
            return DeferredResponse(
                partial(
                    self._authorized, request, session, version, messages, batch, principal, cors
                ),
                session is not None,
            )
        return DeferredResponse(
            partial(self._answer, request, session, version, messages, batch, principal, cors),
            session is not None,
        )

    def _accepted(
        self,
        messages: list[Message | Invalid],
        batch: bool,
        version: str,
        session: Session | None,
    ) -> Response | None:
        """What a POST's notifications and responses need, done: 202 when it
        carries nothing else, None when it has requests to answer (the refusal
        of a batch where the revision allows none, or of a lone invalid message)."""
        if batch and version != BATCH_VERSION:
            raise refuse(400, "Invalid request: batches are not supported")
        runner = self.runner
        has_requests = invalid_seen = False
        for message in messages:
            if type(message) is RPCRequest:
                has_requests = True
            elif type(message) is Notification:
                runner.notify(message, session)
            elif type(message) is RPCResponse:
                if session is not None:
                    runner.resolve(message, session)
            elif type(message) is Invalid:
                invalid_seen = True
        if has_requests:
            return None
        if not invalid_seen:
            return Response(202)
        if not batch:
            invalid = messages[0]
            assert isinstance(invalid, Invalid)
            raise Rejection(400, invalid.error)
        return None

    async def _look_up(
        self,
        request: Request,
        session_id: str,
        messages: list[Message | Invalid],
        batch: bool,
        principal: object,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        """`post` for a session the store could not find at once."""
        try:
            found = await self.sessions.get(session_id)
            session = self.check_session(found, request, principal)
            version = session.protocol_version
            answered = self._accepted(messages, batch, version, session)
        except Rejection as rejection:
            await writer.respond(rejection_response(rejection, cors))
            return
        if answered is not None:
            answered.headers = answered.headers + cors
            await writer.respond(answered)
        else:
            deferred = self._deferred(request, session, version, messages, batch, principal, cors)
            writer.outlives_peer = deferred.outlives_peer
            await deferred.respond(writer)

    async def _answer(
        self,
        request: Request,
        session: Session | None,
        version: str,
        messages: list[Message | Invalid],
        batch: bool,
        principal: object,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        """Answer the requests of one POST."""
        observer = self.observer
        started = 0.0
        if observer is not None:  # (when the server saw it arrive, if it says)
            started = request.started or perf_counter()
        writer.time_limit_s = self.config.request_timeout_s
        stream = PostStream(self.broadcaster, writer, session, version, cors, messages, batch)
        runner = self.runner
        headers = request.headers
        answers: list[dict[str, Any]] = []
        try:
            for message in messages:
                if type(message) is Invalid:
                    answers.append(error_message(message.id, message.error))
                elif type(message) is RPCRequest:
                    try:
                        answers.append(await runner.run(message, stream, headers, principal, None))
                    except trio.Cancelled:
                        await _answer_late(runner, stream, messages, answers, batch)
                        raise
            if not answers:
                if not writer.started:
                    await writer.respond(Response(202, cors))
                return
            answer = answers if batch else answers[0]
            if not batch and type(answer) is Refused and not writer.started:
                await writer.respond(rejection_response(answer.rejection, cors))
                return
            try:  # (answer_bytes inline: a call per answer costs more than the try)
                body = dumps(answer)
            except UNENCODABLE:
                body = answer_bytes(answer)
            if writer.started:
                await stream.emit(body, last=True)
            else:
                headers = JSON_HEADERS + cors if cors else JSON_HEADERS
                # (no coroutine for the answer: the socket almost always takes it whole,
                # to send now or at the batch's end)
                rest = writer.respond_nowait(Response(200, headers, body))
                if rest:
                    await writer.send_rest(rest)
        finally:
            stream.finish()
            if observer is not None:
                _observe(observer, request, stream, messages, batch, answers, principal, started)

    async def _authorized(
        self,
        request: Request,
        session: Session | None,
        version: str,
        messages: list[Message | Invalid],
        batch: bool,
        principal: object,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        """`_answer` when the application has an authorize hook: a refused
        single request is a 403; in a batch, each refused one is an error."""
        requests = [m for m in messages if type(m) is RPCRequest]
        denied = await self.runner.denied(requests, principal)
        if denied and not batch:
            await writer.respond(forbidden(requests[0].id, cors))
            return
        refused = MCPError(INVALID_REQUEST, FORBIDDEN)
        messages = [
            Invalid(m.id, refused) if type(m) is RPCRequest and m.id in denied else m
            for m in messages
        ]
        await self._answer(request, session, version, messages, batch, principal, cors, writer)

    # ---- GET: the session's stream, and resumption ------------------------------

    def get(self, request: Request, cors: Headers, principal: object) -> DeferredResponse:
        """A GET stream (after `Admission.check_get_head`), looked up and run in
        `_open_get`, whose refusals still come before any byte of the stream."""
        if b"mcp-session-id" not in request.singles:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        return DeferredResponse(partial(self._open_get, request, principal, cors))

    async def _open_get(
        self, request: Request, principal: object, cors: Headers, writer: ResponseWriter
    ) -> None:
        try:
            found = await self.sessions.get(request.singles[b"mcp-session-id"].decode("latin-1"))
            session = self.check_session(found, request, principal)
            if request.method == "HEAD":  # GET's head, and no stream (RFC 9110 9.3.2)
                await writer.respond(Response(200, SSE_HEADERS + cors))
                return
            last = dict.get(request.singles, b"last-event-id")
            number, backlog, outbox = await self._attach(session, last)
        except Rejection as rejection:
            await writer.respond(rejection_response(rejection, cors))
            return
        await self._stream_get(session, number, backlog, outbox, cors, writer)

    async def _attach(
        self, session: Session, last: bytes | None
    ) -> tuple[int, list[StoredEvent], Outbox]:
        """The stream a GET attaches to, what it missed, and its live end."""
        number, backlog = 0, list[StoredEvent]()
        if last is not None:
            try:
                found = await self.events.replay(
                    session.id, last.decode("latin-1"), trio.current_time()
                )
            except EventsLost:
                raise refuse(
                    410, "Gone: events after Last-Event-ID are no longer kept; send again"
                ) from None
            if found is None:
                raise refuse(400, "Bad Request: Last-Event-ID names no event of this session")
            number, backlog = found
        outbox = Outbox(self.config.stream_queue_bytes)
        if number == 0:
            if last is not None:  # the client lost its stream: this one replaces it
                await self.bus.take_over(session.id, outbox)
            elif not await self.bus.attach(session.id, outbox):
                raise refuse(409, "Conflict: this session already has a GET stream")
        elif not await self.bus.resume(session.id, number, outbox):
            outbox.close()  # that POST has finished: replay, then end
        return number, backlog, outbox

    async def _stream_get(
        self,
        session: Session,
        number: int,
        backlog: list[StoredEvent],
        outbox: Outbox,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        """Replay what the client missed, then forward live events, with keepalives."""
        try:
            priming = b""
            if number == 0 and not backlog and session.protocol_version >= "2025-11-25":
                priming = await self.broadcaster.priming_event(session, 0)
            await writer.start(200, SSE_HEADERS + cors, priming)
            for event in backlog:
                await writer.send(
                    format_event(event.data, event_id=event.event_id.encode(), event=MESSAGE)
                )
            await outbox.pump(writer, self.config.keepalive_s, self.broadcaster.keepalives)
        finally:
            if number == 0:
                self.bus.detach(session.id, outbox)
            outbox.close()

    # ---- DELETE --------------------------------------------------------------

    def delete(self, request: Request, cors: Headers, principal: object) -> DeferredResponse:
        """End the session the request names, and free what it held."""
        raw = dict.get(request.singles, b"mcp-session-id")
        if raw is None:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        session_id = raw.decode("latin-1")
        try:
            found = self.sessions.get_nowait(session_id)
        except trio.WouldBlock:
            return DeferredResponse(partial(self._delete, request, session_id, principal, cors))
        self.check_session(found, request, principal)
        return DeferredResponse(partial(self._end, session_id, cors))

    async def _delete(
        self,
        request: Request,
        session_id: str,
        principal: object,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        try:
            self.check_session(await self.sessions.get(session_id), request, principal)
        except Rejection as rejection:
            await writer.respond(rejection_response(rejection, cors))
            return
        await self._end(session_id, cors, writer)

    async def _end(self, session_id: str, cors: Headers, writer: ResponseWriter) -> None:
        if await self.sessions.delete(session_id):
            await self.sweeper.release(session_id)
        await writer.respond(Response(200, cors))


async def _answer_late(
    runner: RequestRunner,
    stream: PostStream,
    messages: list[Message | Invalid],
    answers: list[dict[str, Any]],
    batch: bool,
) -> None:
    """If the server ended a POST for its time limit (the writer's `overdue`),
    its answer: what was answered, and the error for each request it did not
    finish. (Awaited in the cancelled scope: with nothing to send, it returns
    at once, with no checkpoint.)"""
    if not stream.overdue:
        return
    answered = len(answers)
    for message in messages:
        if type(message) is not Invalid and type(message) is not RPCRequest:
            continue  # (notifications and responses have no answer)
        if answered:
            answered -= 1
        elif type(message) is RPCRequest:
            answers.append(runner.overdue_answer(message))
        elif type(message) is Invalid:
            answers.append(error_message(message.id, message.error))
    await stream.answer_late(answer_bytes(answers if batch else answers[0]), 200)


async def _initialize(
    transport: SessionsTransport,
    request: Request,
    message: RPCRequest,
    principal: object,
    batch: bool,
    owner: str,
    cors: Headers,
    writer: ResponseWriter,
) -> None:
    """`Handshake.initialize_nowait` behind an authorize hook, or with a store
    to wait for (a function, not a method: the class keeps to its budget)."""
    runner, handshake = transport.runner, transport.handshake
    if runner.app.authorize is not None and await runner.denied([message], principal):
        await writer.respond(forbidden(message.id, cors))
        return
    try:
        response = handshake.initialize_nowait(message, principal, batch, owner)
    except trio.WouldBlock:
        response = await handshake.initialize(message, principal, owner)
    response = _initialized(transport.observer, request, message, response, principal)
    if cors:
        response.headers = response.headers + cors
    await writer.respond(response)


def _observe(
    observer: Observer,
    request: Request,
    stream: PostStream,
    messages: list[Message | Invalid],
    batch: bool,
    answers: list[dict[str, Any]],
    principal: object,
    started: float,
) -> None:
    """Report a POST's requests to the observer, each with its answer (None
    for one the POST did not finish: its client went, or it ran too long,
    which the access log shows as status 499). The POST's status is 200 but
    for a single request a quota refused before it ran (429)."""
    client = request.client
    session = stream.session
    session_id = session.id if session is not None else None
    version = stream.version
    status = 429 if not batch and answers and type(answers[0]) is Refused else 200
    answered = 0
    for message in messages:
        if type(message) is Invalid:
            answered += 1
        elif type(message) is RPCRequest:
            rpc = message  # (typed RPCRequest in the .pxd)
            answer = answers[answered] if answered < len(answers) else None
            answered += 1
            observer.answered(
                client,
                rpc.method,
                rpc.params,
                answer,
                status if answer is not None else 499,
                version,
                principal,
                session_id,
                started,
            )


def _initialized(
    observer: Observer | None,
    request: Request,
    message: RPCRequest,
    response: Response,
    principal: object,
) -> Response:
    """`response`, the answer to an initialize, reported to the observer if
    there is one (a rare request: its error, if any, is read back from its body)."""
    if observer is None:
        return response
    answer = loads(response.body) if response.body else None
    if not isinstance(answer, dict):
        answer = None
    raw = dict(response.headers).get(b"mcp-session-id")
    observer.answered(
        request.client,
        message.method,
        message.params,
        answer,
        response.status,
        HEADERLESS_VERSION if answer is None else _negotiated(answer),
        principal,
        raw.decode("latin-1") if raw is not None else None,
        perf_counter(),
    )
    return response


def _negotiated(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    return version if isinstance(version, str) else HEADERLESS_VERSION
