"""The 2024-11-05 HTTP+SSE transport, served beside the endpoint.

``GET /sse`` opens a session whose every message travels on that one stream
(`HTTPSSETransport.open`); it announces the URL for the client's POSTs,
``/messages?session_id=...``, which are accepted at once (202) and answered on
the stream (`post`). Each request runs in a task of its own in the endpoint's
nursery, under a cancel scope of its own; the stream is the session, so when
it ends, the session ends with everything it holds.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

import trio

from .._config import MCPConfig
from .._errors import MCPError, Rejection, SessionsFull
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._json import dumps
from .._protocol._admission import SSE, accepts, is_json_content_type, query_value
from .._protocol._answers import refuse, sessions_full
from .._protocol._jsonrpc import INTERNAL_ERROR, Notification, decode_body, error_message
from .._protocol._jsonrpc import Request as RPCRequest
from .._protocol._jsonrpc import Response as RPCResponse
from .._protocol._sessions import Session, SessionTable
from .._speedups import format_event
from ._handshake import Handshake
from ._runner import RequestRunner
from ._streams import SSE_HEADERS, Outbox, SSEStream

#: The revision of the sessions this transport opens (until their initialize).
HTTP_SSE_VERSION: Final = "2024-11-05"


class HTTPSSETransport:
    """``GET /sse`` and ``POST /messages`` (see the module docstring)."""

    __slots__ = ("config", "sessions", "runner", "handshake", "nursery")

    def __init__(
        self,
        config: MCPConfig,
        sessions: SessionTable,
        runner: RequestRunner,
        handshake: Handshake,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.runner = runner
        self.handshake = handshake
        #: Runs the sessions' requests, while the endpoint runs.
        self.nursery: trio.Nursery | None = None

    def check_open(self, request: Request) -> None:
        """GET /sse's refusals before authentication: its Accept (406), and an
        endpoint that is not running (503)."""
        if not accepts(request.header_values(b"accept") or [b"*/*"], SSE):
            raise refuse(406, "Not Acceptable: use text/event-stream")
        if self.nursery is None:
            raise Rejection(
                503, MCPError(INTERNAL_ERROR, "Service Unavailable: the endpoint is not running")
            )

    def open(self, request: Request, cors: Headers, principal: object) -> DeferredResponse:
        """GET /sse (after `check_open`): a new session whose every answer
        travels on this stream."""
        sessions = self.sessions
        try:
            session = sessions.create(principal, HTTP_SSE_VERSION, {}, {}, sessions.now)
        except SessionsFull:
            raise sessions_full() from None
        outbox = Outbox()
        session.get_stream = outbox
        return DeferredResponse(partial(self._stream, session, outbox, cors))

    async def _stream(
        self, session: Session, outbox: Outbox, cors: Headers, writer: ResponseWriter
    ) -> None:
        endpoint = f"{self.config.messages_path}?session_id={session.id}".encode()
        try:
            await writer.start(200, SSE_HEADERS + cors, format_event(endpoint, event=b"endpoint"))
            await outbox.pump(writer, self.config.keepalive_s)
        finally:
            # The stream is the session: when it goes, so does everything it holds.
            self.sessions.delete(session.id)
            for scope in session.in_flight.values():
                scope.cancel()
            session.get_stream = None
            outbox.close()

    def check_post(self, request: Request) -> None:
        """POST /messages' refusal before authentication: no session named (400)."""
        if query_value(request.query, "session_id") is None:
            raise refuse(400, "Bad Request: session_id is required")

    def post(self, request: Request, principal: object) -> Response:
        """POST /messages?session_id=... (after `check_post`): accepted at once,
        answered on the stream."""
        session_id = query_value(request.query, "session_id")
        assert session_id is not None
        sessions = self.sessions
        session = sessions.get(session_id, sessions.now)
        if session is None or session.get_stream is None:
            raise refuse(404, "Session not found")
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
            self.nursery.start_soon(self._answer, request, session, message, principal)
        return Response(202, [(b"content-type", b"text/plain")], b"Accepted")

    async def _answer(
        self, request: Request, session: Session, message: RPCRequest, principal: object
    ) -> None:
        """Run one request and send its answer on the session's stream (none when
        the client cancelled it)."""
        answer = None
        with trio.CancelScope() as scope:
            stream = SSEStream(session, scope)
            if message.method == "initialize":
                answer = self._initialize(session, message)
            else:
                answer = await self.runner.run(message, stream, request.headers, principal, None)
        if answer is not None:
            await stream.emit(dumps(answer))

    def _initialize(self, session: Session, message: RPCRequest) -> dict[str, Any]:
        try:
            version, capabilities, client_info, result = self.handshake.initialize_result(
                message.params
            )
        except MCPError as exc:
            return error_message(message.id, exc)
        session.protocol_version = version
        session.client_capabilities = capabilities
        session.client_info = client_info
        return {"jsonrpc": "2.0", "id": message.id, "result": result}
