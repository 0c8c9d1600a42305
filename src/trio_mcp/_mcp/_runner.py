"""The request runner: one MCP request, from its method to its answer.

`RequestRunner.run` is where every transport hands a request over (the 2025
POST, the 2026-07-28 POST, the 2024-11-05 HTTP+SSE message): it finds the
method, builds the handler's `Context` (cancellation, progress and log
messages on the request's stream, requests to the client, the sealed state of
a 2026 multi round-trip request), runs the handler and turns what it returned
or raised into the JSON-RPC answer. The transport decides where that answer
goes. `ask_client` sends a request to the client on the running request's
stream and waits for the answer a later POST brings; `denied` applies the
application's authorize hook.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from .._app._context import Context
from .._app._server import Server
from .._config import MCPConfig
from .._errors import InputRequired, MCPError, Rejection
from .._http._connection import Headers
from .._http._handler import Cancellable
from .._protocol._answers import too_many
from .._protocol._envelope import Envelope
from .._protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Notification,
    RequestId,
    RPCRequest,
    RPCResponse,
    error_message,
    request_bytes,
)
from .._protocol._request_state import StateSealer, default_principal_key, params_digest
from .._protocol._sessions import Session
from .._stores._requests import TOO_MANY
from .._stores._stores import Stores
from ._dispatch import Dispatcher
from ._streams import RequestStream, Waiter

if TYPE_CHECKING:
    from ._tracing import Tracing

logger = logging.getLogger("trio_mcp.endpoint")

#: The requests that may answer input_required (2026-07-28 multi round-trip requests).
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Methods whose target is ``params.name``; the others that have one use ``params.uri``.
_NAMED: Final = frozenset({"tools/call", "prompts/get"})
#: A log level above every real one: nothing passes.
_LOGGING_OFF: Final = "off"


class Refused(dict[str, Any]):
    """The error answer to a request a quota refused, which a transport may
    send as its `rejection` instead (429 with ``Retry-After``) while nothing
    of the response has started."""

    __slots__ = ("rejection",)

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(error_message(rejection.request_id, rejection.error))
        self.rejection = rejection


class RequestRunner:
    """Runs requests against one application (see the module docstring)."""

    __slots__ = (
        "app",
        "config",
        "dispatch",
        "requests",
        "sealer",
        "principal_key",
        "lifespan_state",
        "stopping",
        "tracing",
        "asks_clients",
    )

    def __init__(
        self,
        app: Server,
        config: MCPConfig,
        stores: Stores,
        sealer: StateSealer,
        principal_key: Callable[[object], str] = default_principal_key,
        transport: str = "tcp",
    ) -> None:
        self.app = app
        self.config = config
        #: A request with a session may ask its client for input (elicitation,
        #: sampling, roots): not when every answer is one JSON object.
        self.asks_clients = not config.json_response_only
        self.dispatch = Dispatcher(app, stores.sessions)
        #: The requests in flight (and those sent to clients), by session.
        self.requests = stores.requests
        #: Seals the requestState of 2026-07-28 multi round-trip requests.
        self.sealer = sealer
        #: The stable key of a principal, which sealed states are bound to.
        self.principal_key = principal_key
        #: What the app's lifespan yielded, while the endpoint runs.
        self.lifespan_state: Any = None
        #: The server's shutdown deadline has passed: requests ended now are
        #: ended for that (`overdue_answer`).
        self.stopping = False
        #: Makes a span of each request (``config.traces``; `transport`, tcp
        #: or pipe, is the span's network.transport), or None.
        self.tracing: Tracing | None = None
        if config.traces:
            from ._tracing import Tracing

            self.tracing = Tracing(app, transport)

    async def run(
        self,
        message: RPCRequest,
        stream: RequestStream,
        headers: Headers,
        principal: object,
        envelope: Envelope | None,
    ) -> dict[str, Any]:
        """The answer to one request, its handler run under ``stream.cancel_scope``.

        `envelope` is set for a 2026-07-28 request: its capabilities and log
        level come from the request itself, never from a session.
        """
        method, request_id, params = message.method, message.id, message.params
        handler = dict.get(self.dispatch.methods, method)
        if handler is None:
            if method == "initialize":
                error = MCPError(INVALID_REQUEST, "Invalid request: already initialized")
            else:
                error = MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")
            return error_message(request_id, error)
        session = stream.session
        scope = stream.cancel_scope
        # (a request without a session is tracked nowhere: its connection is its scope)
        requests = self.requests
        if session is not None:
            refused = requests.begin(session.id, request_id, scope)
            if refused:
                return self._not_begun(refused, request_id)
        try:
            mrtr = envelope is not None and method in MRTR_METHODS
            input_responses: dict[str, Any] = {}
            state: dict[str, Any] = {}
            if mrtr:
                try:
                    state, input_responses = self._open_state(params, principal, method)
                except MCPError as exc:
                    return error_message(request_id, exc)
            ctx = self._context(
                message, stream, scope, headers, principal, envelope, mrtr, input_responses, state
            )
            if self.tracing is None:
                result = await handler(params, ctx, session, stream.version)
            else:
                answer = handler(params, ctx, session, stream.version)
                result = await self.tracing.traced(answer, message, session, stream.version)
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        except InputRequired as exc:
            if not mrtr:
                logger.error("%s asked for input where the protocol has no way to", method)
                return error_message(request_id, MCPError(INTERNAL_ERROR, "Internal error"))
            try:
                token = self._seal_state(ctx, params, principal, method)
            except TypeError:  # a principal with no key, a state with no JSON form
                logger.exception("%s: its requestState cannot be sealed", method)
                return error_message(request_id, MCPError(INTERNAL_ERROR, "Internal error"))
            input_required = {
                "resultType": "input_required",
                "inputRequests": exc.requests,
                "requestState": token,
            }
            return {"jsonrpc": "2.0", "id": request_id, "result": input_required}
        except MCPError as exc:
            return error_message(request_id, exc)
        except Exception:
            logger.exception("%s failed", method)
            return error_message(request_id, MCPError(INTERNAL_ERROR, "Internal error"))
        finally:
            if session is not None:
                requests.end(session.id, request_id)

    def overdue_answer(self, message: RPCRequest) -> dict[str, Any]:
        """The error answer of `message`, ended for running past
        ``request_timeout_s`` (logged: a handler that hangs is a bug), or
        still running at the server's shutdown deadline (`stopping`)."""
        if self.stopping:
            logger.warning("%s still ran at the shutdown deadline: ended", message.method)
            error = MCPError(INTERNAL_ERROR, "Internal error: the server is shutting down")
            return error_message(message.id, error)
        timeout = self.config.request_timeout_s
        logger.warning("%s ran past request_timeout_s (%s s): ended", message.method, timeout)
        error = MCPError(INTERNAL_ERROR, f"Internal error: the request took over {timeout} s")
        return error_message(message.id, error)

    def _not_begun(self, refused: int, request_id: RequestId) -> dict[str, Any]:
        """The answer to a request the registry did not begin: its id is in
        use, or its session has its quota running (a `Refused` answer)."""
        if refused == TOO_MANY:
            return Refused(
                too_many(
                    request_id,
                    f"Too many requests: this session has {self.config.max_requests_per_session}"
                    " running",
                )
            )
        error = MCPError(INVALID_REQUEST, "Invalid request: this id is in use by a running request")
        return error_message(request_id, error)

    def _context(
        self,
        message: RPCRequest,
        stream: RequestStream,
        scope: Cancellable,
        headers: Headers,
        principal: object,
        envelope: Envelope | None,
        mrtr: bool,
        input_responses: dict[str, Any],
        state: dict[str, Any],
    ) -> Context:
        """The handler's `Context` for `message`."""
        params = message.params
        meta = dict.get(params, "_meta")
        progress_token = dict.get(meta, "progressToken") if isinstance(meta, dict) else None
        session = stream.session
        capabilities: dict[str, Any]
        log_level: str | None
        if envelope is not None:
            capabilities = envelope.client_capabilities
            log_level = envelope.log_level or _LOGGING_OFF  # no logLevel: no messages
        elif session is not None:
            capabilities, log_level = session.client_capabilities, session.log_level
        else:
            capabilities, log_level = {}, None
        # Positional, in the order of Context.__init__: with keywords, creating
        # the (C type) Context builds a dict of its arguments first.
        return Context(
            message.id,  # request_id
            session.id if session is not None else None,  # session_id
            principal,
            headers,
            stream.version,  # protocol_version
            capabilities,  # client_capabilities
            progress_token,
            stream,
            log_level,
            scope,  # cancel_scope
            self.lifespan_state,  # lifespan
            self if session is not None and self.asks_clients else None,  # asker
            input_responses,
            state,
            mrtr,
        )

    def _open_state(
        self, params: dict[str, Any], principal: object, method: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The handler state and the input responses so far of a 2026-07-28
        request (the earlier rounds' answers count too: the handler re-runs
        from the top). MCPError when its requestState is not valid."""
        responses = params.get("inputResponses")
        input_responses = responses if isinstance(responses, dict) else {}
        if "requestState" not in params:
            return {}, input_responses
        state, earlier = self.sealer.open(
            params["requestState"],
            principal=self.principal_key(principal),
            method=method,
            digest=params_digest(params),
            now=time.time(),  # (wall-clock: the replicas' shared time)
        )
        return state, {**earlier, **input_responses}

    def _seal_state(
        self, ctx: Context, params: dict[str, Any], principal: object, method: str
    ) -> str:
        return self.sealer.seal(
            ctx.state,
            ctx.input_responses,
            principal=self.principal_key(principal),
            method=method,
            digest=params_digest(params),
            now=time.time(),
        )

    async def ask_client(
        self,
        session: Session,
        emit: Callable[[bytes], Awaitable[None]],
        method: str,
        params: dict[str, Any],
        capability: str,
        timeout_s: float | None,
    ) -> Any:
        """Send `method` to the client on the current response stream; await its answer."""
        if capability not in session.client_capabilities:
            raise MCPError(
                INVALID_REQUEST,
                f"the client did not declare the {capability!r} capability, so {method} "
                "can't be sent",
            )
        waiter = Waiter()
        requests = self.requests
        request_id = requests.expect(session.id, waiter)
        if request_id is None:
            raise too_many(
                None,
                f"Too many requests: this session's client has "
                f"{self.config.max_client_requests_per_session} requests to answer",
            ).error
        limit = timeout_s if timeout_s is not None else self.config.client_request_timeout_s
        try:
            await emit(request_bytes(request_id, method, params))
            with trio.move_on_after(limit):
                await waiter.done.wait()
        finally:
            requests.forget(session.id, request_id)
        response = waiter.response
        if response is None:
            raise MCPError(INTERNAL_ERROR, f"the client did not answer {method} within {limit} s")
        if response.error is not None:
            error = response.error
            raise MCPError(error["code"], error["message"], error.get("data"))
        return response.result

    def notify(self, message: Notification, session: Session | None) -> None:
        """A notification from the client: ``notifications/cancelled`` cancels
        the running request it names (the others need nothing here)."""
        if message.method == "notifications/cancelled" and session is not None:
            self.requests.cancel(session.id, message.params.get("requestId"))

    def resolve(self, message: RPCResponse, session: Session) -> None:
        """The client's answer to a request we sent it (`ask_client`)."""
        self.requests.answer(session.id, message)

    async def denied(self, requests: list[RPCRequest], principal: object) -> set[Any]:
        """The ids of the requests the application's authorize hook refuses."""
        authorize = self.app.authorize
        assert authorize is not None
        denied = set()
        for message in requests:
            params = message.params
            target = params.get("name") if message.method in _NAMED else params.get("uri")
            name = target if isinstance(target, str) else None
            if not await authorize(principal, message.method, name):
                denied.add(message.id)
        return denied
