"""Streamable HTTP with sessions: the 2025 revisions (and 2024-11-05 clients
that initialize on the endpoint).

`SessionsTransport` takes over once the router has decoded a POST's body and
found it is not a 2026-07-28 request: `post` checks the session (404, 403,
400), answers notifications and responses (202), initializes (minting the
session) and defers the requests to `_answer`, which runs them and answers
with one JSON object, a batch, or an SSE stream if a handler emitted first.
`get` opens the session's GET stream or resumes a stream with
``Last-Event-ID``; `delete` ends a session. Statuses are all decided before
the first byte is written.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from .._config import MCPConfig
from .._errors import MCPError, Rejection, SessionsFull
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._json import dumps
from .._protocol._answers import (
    FORBIDDEN,
    JSON_HEADERS,
    forbidden,
    refuse,
    rejection_response,
    sessions_full,
)
from .._protocol._events import EventStore, StoredEvent
from .._protocol._jsonrpc import (
    INVALID_REQUEST,
    Invalid,
    Message,
    Notification,
    error_message,
)
from .._protocol._jsonrpc import Request as RPCRequest
from .._protocol._jsonrpc import Response as RPCResponse
from .._protocol._revisions import BATCH_VERSION, HEADERLESS_VERSION, LEGACY_VERSIONS
from .._protocol._sessions import Session, SessionTable
from .._speedups import format_event
from ._fanout import Broadcaster, Sweeper
from ._handshake import Handshake
from ._runner import RequestRunner
from ._streams import MESSAGE, SSE_HEADERS, Outbox, PostStream

#: A session's protocol version as the MCP-Protocol-Version header value: its
#: requests' headers are compared without decoding them.
_HEADER_VALUES: Final = {version: version.encode("latin-1") for version in LEGACY_VERSIONS}


class SessionsTransport:
    """The 2025 revisions' POST, GET and DELETE (see the module docstring)."""

    __slots__ = ("config", "sessions", "events", "runner", "broadcaster", "sweeper", "handshake")

    def __init__(
        self,
        config: MCPConfig,
        sessions: SessionTable,
        events: EventStore,
        runner: RequestRunner,
        broadcaster: Broadcaster,
        sweeper: Sweeper,
        handshake: Handshake,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.events = events
        self.runner = runner
        self.broadcaster = broadcaster
        self.sweeper = sweeper
        self.handshake = handshake

    def session_for(self, request: Request, principal: object) -> Session | None:
        """The live session the request names (None when it names none), or the
        refusal: unknown or expired 404, another principal's 403, another
        protocol version 400."""
        singles = request.singles
        raw = dict.get(singles, b"mcp-session-id")
        if raw is None:
            return None
        sessions = self.sessions
        session = sessions.get(raw.decode("latin-1"), sessions.now)
        if session is None:
            raise refuse(404, "Session not found: initialize a new session")
        if session.principal != principal:
            raise refuse(403, "Forbidden: the session belongs to another principal")
        header = dict.get(singles, b"mcp-protocol-version")
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
        """A POST's refusal or answer, once its body is decoded (synchronous:
        with an authorize hook, the requests are authorized in `_authorized`)."""
        session = self.session_for(request, principal)
        if session is not None:
            version = session.protocol_version
        else:
            header = dict.get(request.singles, b"mcp-protocol-version")
            version = header.decode("latin-1") if header is not None else HEADERLESS_VERSION
        if batch and version != BATCH_VERSION:
            raise refuse(400, "Invalid request: batches are not supported")
        requests = [m for m in messages if type(m) is RPCRequest]
        if session is None:
            initializing = len(messages) == 1 and requests and requests[0].method == "initialize"
            if not initializing and not self.config.stateless:
                raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        invalid_seen = False
        runner = self.runner
        for message in messages:
            if type(message) is Notification:
                runner.notify(message, session)
            elif type(message) is RPCResponse and session is not None:
                runner.resolve(message, session)
            elif type(message) is Invalid:
                invalid_seen = True
        if not requests and not invalid_seen:
            return Response(202)
        if not requests and not batch:
            invalid = messages[0]
            assert isinstance(invalid, Invalid)
            raise Rejection(400, invalid.error)
        if runner.app.authorize is not None:
            return DeferredResponse(
                partial(
                    self._authorized, request, session, version, messages, batch, principal, cors
                )
            )
        if session is None and len(requests) == 1 and requests[0].method == "initialize":
            return self.initialize(requests[0], principal, batch)
        return DeferredResponse(
            partial(self._answer, request, session, version, messages, batch, principal, cors)
        )

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
        """The rest of `post` when the application has an authorize hook: a
        refused single request is a 403; in a batch, each refused one is an error."""
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
        if session is None and len(requests) == 1 and requests[0].method == "initialize":
            response = self.initialize(requests[0], principal, batch)
            response.headers = response.headers + cors
            await writer.respond(response)
            return
        await self._answer(request, session, version, messages, batch, principal, cors, writer)

    def initialize(self, message: RPCRequest, principal: object, batch: bool) -> Response:
        """The answer to an initialize, with a new session's id (unless stateless)."""
        if batch:
            error = MCPError(INVALID_REQUEST, "initialize can't be batched")
            return Response(200, JSON_HEADERS, dumps([error_message(message.id, error)]))
        try:
            version, capabilities, client_info, result = self.handshake.initialize_result(
                message.params
            )
        except MCPError as exc:
            return Response(200, JSON_HEADERS, dumps(error_message(message.id, exc)))
        headers = list(JSON_HEADERS)
        if not self.config.stateless:
            sessions = self.sessions
            try:
                session = sessions.create(
                    principal, version, capabilities, client_info, sessions.now
                )
            except SessionsFull:
                return rejection_response(sessions_full())
            headers.append((b"mcp-session-id", session.id.encode("ascii")))
        body = dumps({"jsonrpc": "2.0", "id": message.id, "result": result})
        return Response(200, headers, body)

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
        """Answer the requests of one POST (a DeferredResponse's body)."""
        stream = PostStream(self.broadcaster, writer, session, version, cors)
        runner = self.runner
        headers = request.headers
        answers: list[dict[str, Any]] = []
        try:
            for message in messages:
                if type(message) is Invalid:
                    answers.append(error_message(message.id, message.error))
                elif type(message) is RPCRequest:
                    answers.append(await runner.run(message, stream, headers, principal, None))
            if not answers:
                if not writer.started:
                    await writer.respond(Response(202, cors))
                return
            body = dumps(answers if batch else answers[0])
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

    # ---- GET: the session's stream, and resumption ------------------------------

    def get(self, request: Request, cors: Headers, principal: object) -> DeferredResponse:
        """A GET stream (after `Admission.check_get_head`): checked here, the
        replay looked up and the stream run in `_open_get` (whose refusals are
        still answered before any byte of the stream)."""
        session = self.session_for(request, principal)
        if session is None:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        last = dict.get(request.singles, b"last-event-id")
        return DeferredResponse(partial(self._open_get, session, last, cors))

    async def _open_get(
        self, session: Session, last: bytes | None, cors: Headers, writer: ResponseWriter
    ) -> None:
        try:
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
            found = await self.events.replay(session.id, last.decode("latin-1"), self.sessions.now)
            if found is None:
                raise refuse(400, "Bad Request: Last-Event-ID names no event of this session")
            number, backlog = found
        outbox = Outbox()
        if number == 0:
            if session.get_stream is not None:
                raise refuse(409, "Conflict: this session already has a GET stream")
            session.get_stream = outbox
            self.sessions.begin_request(session)  # a listening client is not idle
        else:
            live = session.live_streams.get(number)
            if live is not None:
                live.attach(outbox)
            else:
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
            await outbox.pump(writer, self.config.keepalive_s)
        finally:
            if number == 0:
                self.sessions.end_request(session, self.sessions.now)
            if session.get_stream is outbox:
                session.get_stream = None
            outbox.close()

    # ---- DELETE --------------------------------------------------------------

    def delete(self, request: Request, cors: Headers, principal: object) -> DeferredResponse:
        """End the session the request names, and free what it held."""
        session = self.session_for(request, principal)
        if session is None:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        self.sessions.delete(session.id)
        return DeferredResponse(partial(self._release, session, cors))

    async def _release(self, session: Session, cors: Headers, writer: ResponseWriter) -> None:
        await self.sweeper.release(session)
        await writer.respond(Response(200, cors))
