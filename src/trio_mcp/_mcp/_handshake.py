"""What the server says about itself: ``serverInfo`` and the answer to
``initialize``, which mints the session of the 2025 revisions.

Shared by the transports that answer an initialize (the 2025 POST, the
2024-11-05 HTTP+SSE message, stdio) and the 2026-07-28 results, which carry
``serverInfo`` in their ``_meta``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._app._server import Server
from .._config import MCPConfig
from .._errors import MCPError, Rejection, SessionsFull
from .._http._connection import Response
from .._json import dumps
from .._protocol._answers import JSON_HEADERS, rejection_response, sessions_full
from .._protocol._jsonrpc import INVALID_PARAMS, INVALID_REQUEST, RPCRequest, error_message
from .._protocol._revisions import negotiate
from .._protocol._sessions import Session
from .._stores._sessions import SessionStore

if TYPE_CHECKING:
    from .._observe import Observer


class Handshake:
    """``serverInfo`` (one shared dict, rebuilt when the app's name, version or
    title changes), the InitializeResult of one application, and the answer
    to an initialize with its new session."""

    __slots__ = ("app", "config", "sessions", "_server_info_key", "_server_info", "observer")

    def __init__(self, app: Server, config: MCPConfig, sessions: SessionStore) -> None:
        self.app = app
        self.config = config
        #: Where the sessions an initialize mints are kept.
        self.sessions = sessions
        self._server_info_key: tuple[str, str, str | None] | None = None
        self._server_info: dict[str, Any] = {}
        #: Told when a session begins (None: metrics are off).
        self.observer: Observer | None = None

    def server_info(self) -> dict[str, Any]:
        """The serverInfo object (callers must not modify it)."""
        app = self.app
        name, version, title = app.name, app.version, app.title
        key = self._server_info_key
        # (identity, not equality: no tuple to build per request; a new but
        # equal value only rebuilds the dict once)
        if key is None or key[0] is not name or key[1] is not version or key[2] is not title:
            info: dict[str, Any] = {"name": name, "version": version}
            if title is not None:
                info["title"] = title
            self._server_info_key, self._server_info = (name, version, title), info
        return self._server_info

    def initialize_result(
        self, params: dict[str, Any]
    ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(version, client capabilities, client info, InitializeResult) for an
        initialize with `params`; MCPError -32602 when it lacks what it must carry."""
        capabilities = dict.get(params, "capabilities")
        client_info = dict.get(params, "clientInfo")
        if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
            raise MCPError(
                INVALID_PARAMS, "Invalid params: capabilities and clientInfo are required"
            )
        version = negotiate(dict.get(params, "protocolVersion"))
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.app.shared_capabilities(),
            "serverInfo": self.server_info(),
        }
        if self.app.instructions is not None:
            result["instructions"] = self.app.instructions
        return version, capabilities, client_info, result

    def initialize_nowait(
        self, message: RPCRequest, principal: object, batch: bool, owner: str
    ) -> Response:
        """The answer to an initialize, with a new session's id (unless
        stateless) counted in `owner`'s share; ``trio.WouldBlock`` when the
        store cannot make the session without waiting."""
        try:
            if batch:
                raise MCPError(INVALID_REQUEST, "initialize can't be batched")
            version, capabilities, client_info, result = self.initialize_result(message.params)
        except MCPError as exc:
            answer = error_message(message.id, exc)
            return Response(200, JSON_HEADERS, dumps([answer] if batch else answer))
        if self.config.stateless:
            return _welcome(message, result, None)
        try:
            session = self.sessions.create_nowait(
                principal, version, capabilities, client_info, owner=owner
            )
        except SessionsFull as full:
            return rejection_response(sessions_full(full))
        if self.observer is not None:
            self.observer.session_started(session.id)
        return _welcome(message, result, session)

    async def initialize_session(self, session_id: str, message: RPCRequest) -> dict[str, Any]:
        """The answer to an initialize on a transport whose session exists
        before it (2024-11-05 HTTP+SSE, stdio): what was negotiated goes into
        that session's record."""
        try:
            version, capabilities, client_info, result = self.initialize_result(message.params)
        except MCPError as exc:
            return error_message(message.id, exc)
        await self.sessions.update(session_id, version, capabilities, client_info)
        return {"jsonrpc": "2.0", "id": message.id, "result": result}

    async def initialize(self, message: RPCRequest, principal: object, owner: str) -> Response:
        """`initialize_nowait`'s answer (for a valid initialize, not batched,
        with a session), the store awaited."""
        version, capabilities, client_info, result = self.initialize_result(message.params)
        try:
            session = await self.sessions.create(
                principal, version, capabilities, client_info, owner=owner
            )
        except SessionsFull as full:
            return rejection_response(sessions_full(full))
        except Rejection as rejection:  # (a shared store that cannot answer: 503)
            return rejection_response(rejection)
        if self.observer is not None:
            self.observer.session_started(session.id)
        return _welcome(message, result, session)


def _welcome(message: RPCRequest, result: dict[str, Any], session: Session | None) -> Response:
    """The InitializeResult answer, with the new session's id when there is one."""
    headers = list(JSON_HEADERS)
    if session is not None:
        headers.append((b"mcp-session-id", session.id.encode("ascii")))
    body = dumps({"jsonrpc": "2.0", "id": message.id, "result": result})
    return Response(200, headers, body)
