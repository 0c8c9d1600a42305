"""The Streamable HTTP endpoint for the 2025 revisions, on the HTTP core.

`MCPEndpoint` is an HTTP handler: it checks what the transport rules ask of a
request (path, Origin/Host, Accept, Content-Type, authentication, session,
protocol version), decodes the JSON-RPC body and dispatches each request to
the application. A request is answered with one JSON object unless its
handler emits a notification (progress, a log message) before it returns;
then the answer becomes an SSE stream carrying those notifications and, last,
the response. Statuses are all decided before the first byte is written.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, Final

import trio

from .._app._schema import header_mismatch
from .._app._server import (
    LOG_LEVELS,
    Context,
    Server,
)
from .._config import MCPConfig
from .._errors import InputRequired, MCPError, Rejection, SessionsFull
from .._http._connection import DeferredResponse, Headers, Request, Response
from .._json import dumps
from .._protocol._admission import (
    JSON,
    SSE,
    accepts,
    host_allowed,
    is_json_content_type,
    origin_allowed,
)
from .._protocol._answers import JSON_HEADERS, refuse, rejection_response
from .._protocol._envelope import (
    META_SERVER_INFO,
    MODERN_VERSIONS,
    Envelope,
    check_envelope,
    is_modern,
)
from .._protocol._events import EventLimits, EventStore, MemoryEventStore, StoredEvent
from .._protocol._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MODERN,
    UNSUPPORTED_PROTOCOL_VERSION,
    Invalid,
    Notification,
    decode_body,
    error_message,
    error_status,
    request_bytes,
)
from .._protocol._jsonrpc import Request as RPCRequest
from .._protocol._jsonrpc import Response as RPCResponse
from .._protocol._request_state import StateSealer, params_digest
from .._protocol._revisions import BATCH_VERSION, HEADERLESS_VERSION, LEGACY_VERSIONS, negotiate
from .._protocol._sessions import Session, SessionTable
from .._speedups import decode_header_value, format_event
from .._trio._server import HTTPServer, run, serve
from ._dispatch import Dispatcher
from ._streams import (
    MESSAGE,
    SSE_HEADERS,
    LegacyStream,
    Listener,
    Outbox,
    PostStream,
    Waiter,
)

logger = logging.getLogger("trio_mcp.endpoint")

#: ``authenticate(request)`` returns the principal, or None to answer 401.
Authenticator = Callable[[Request], Awaitable[object | None]]

#: A session's protocol version as the MCP-Protocol-Version header value: its
#: requests' headers are compared without decoding them.
_HEADER_VALUES: Final = {version: version.encode("latin-1") for version in LEGACY_VERSIONS}
_ALLOW: Final = b"GET, POST, DELETE, OPTIONS"
_LOOPBACK_BINDS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


_FORBIDDEN: Final = MCPError(INVALID_REQUEST, "Forbidden: not authorized for this request")
#: The scope challenge that goes with an authorization refusal (RFC 6750 3.1).
_INSUFFICIENT_SCOPE: Final = [(b"www-authenticate", b'Bearer error="insufficient_scope"')]
#: Methods whose target is ``params.name``; the others that have one use ``params.uri``.
_NAMED: Final = frozenset({"tools/call", "prompts/get"})


#: The results that carry cache hints in 2026-07-28.
_CACHEABLE: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
#: subscriptions/listen flags and the server capability each needs (with listChanged).
_LISTEN_FLAGS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}
#: Which flag lets each notification onto a listen stream.
_LISTEN_METHODS: Final = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
    "notifications/resources/updated": "resourceSubscriptions",
}


#: The requests that may answer input_required (2026-07-28 MRTR).
_MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
#: A log level above every real one: nothing passes.
_LOGGING_OFF: Final = "off"


_BROADCAST_QUEUE: Final = 1024
# sessions per event-store call when a notification goes to every session
_BROADCAST_SLICE: Final = 512


def _query_value(query: str, name: str) -> str | None:
    for pair in query.split("&"):
        key, sep, value = pair.partition("=")
        if key == name and sep:
            return value
    return None


def _sessions_full() -> Rejection:
    return Rejection(
        503,
        MCPError(INTERNAL_ERROR, "Service Unavailable: too many sessions"),
        [(b"retry-after", b"5")],
    )


def _forbidden(request_id: Any, cors: Headers) -> Response:
    """The 403 for a request the application's authorize hook refuses."""
    body = dumps(error_message(request_id, _FORBIDDEN))
    return Response(403, JSON_HEADERS + _INSUFFICIENT_SCOPE + cors, body)


#: Request headers a browser may send (besides the Mcp-Param-* family).
_CORS_ALLOWED_HEADERS: Final = (
    b"content-type, accept, authorization, mcp-protocol-version, mcp-session-id, "
    b"last-event-id, mcp-method, mcp-name"
)


def _cors_headers(request: Request) -> Headers:
    """CORS headers for a request from an allowed Origin (none for non-browser requests)."""
    origin = dict.get(request.singles, b"origin")
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin),
        (b"access-control-expose-headers", b"mcp-session-id"),
        (b"vary", b"origin"),
    ]


def _preflight_headers(request: Request) -> Headers:
    """The answer to a CORS preflight: methods, headers (with any Mcp-Param-*), max age."""
    allowed = _CORS_ALLOWED_HEADERS
    requested = request.header(b"access-control-request-headers") or b""
    params = [
        name.strip().lower()
        for name in requested.split(b",")
        if name.strip().lower().startswith(b"mcp-param-")
    ]
    if params:
        allowed = allowed + b", " + b", ".join(params)
    return [
        (b"access-control-allow-methods", _ALLOW),
        (b"access-control-allow-headers", allowed),
        (b"access-control-max-age", b"600"),
    ]


class MCPEndpoint:
    """Serves an MCP `Server` application at ``config.path`` (an HTTP handler)."""

    __slots__ = (
        "app",
        "config",
        "authenticate",
        "sessions",
        "_accept_cache",
        "_host_verdicts",
        "_now",
        "_sweep_interval_s",
        "_swept_at",
        "_server_info_key",
        "_server_info_value",
        "events",
        "_broadcasts",
        "_listeners",
        "_nursery",
        "lifespan_state",
        "_paths",
        "_legacy_paths",
        "_loopback",
        "_origins",
        "_hosts",
        "dispatch",
        "sealer",
    )

    def __init__(
        self,
        app: Server,
        config: MCPConfig | None = None,
        *,
        authenticate: Authenticator | None = None,
    ) -> None:
        self.app = app
        self.config = config = config or MCPConfig()
        self.authenticate = authenticate
        #: How often idle sessions and old events are swept.
        self._sweep_interval_s = min(
            config.session_idle_timeout_s / 4, config.event_buffer_age_s / 4, 10.0
        )
        #: trio's clock at the last sweep. Sessions measure idle time with it,
        #: so a request reads no clock for them; it lags the clock by up to a
        #: sweep interval (plus the sweeper's own delay), and the table's grace
        #: of two intervals keeps any session from ending early.
        self._swept_at = 0.0
        self.sessions = SessionTable(
            config.max_sessions,
            config.session_idle_timeout_s,
            grace_s=2 * self._sweep_interval_s,
        )
        self._accept_cache: dict[tuple[bytes, ...], bool] = {}
        self._host_verdicts: dict[bytes | None, bool] = {}
        #: trio.current_time; the run's clock itself (two calls fewer) while running.
        self._now: Callable[[], float] = trio.current_time
        self._server_info_key: tuple[str, str, str | None] | None = None
        self._server_info_value: dict[str, Any] = {}
        #: Where the events of session streams wait for a client that resumes.
        self.events: EventStore = MemoryEventStore(
            EventLimits(
                config.event_buffer_events,
                config.event_buffer_bytes,
                config.event_buffer_age_s,
                config.event_buffer_session_bytes,
            )
        )
        self._broadcasts: trio.MemorySendChannel[Any] | None = None
        #: Open 2026-07-28 subscriptions/listen streams, in the order they
        #: opened (a dict for that order): a fan-out walks them as they were
        #: allocated, which at 10,000 streams halves its Python time against a
        #: set's address-hash order (each object a frame touches is a cache miss).
        self._listeners: dict[Listener, None] = {}
        #: Runs the requests of legacy HTTP+SSE sessions (answered on their stream).
        self._nursery: trio.Nursery | None = None
        #: What the app's lifespan yielded, while `running` is entered.
        self.lifespan_state: Any = None
        self._paths = frozenset({config.path, config.path + "/"})
        self._legacy_paths = (
            frozenset({config.sse_path, config.messages_path})
            if config.legacy_sse and config.eras != "modern"
            else frozenset()
        )
        self._loopback = config.http.host in _LOOPBACK_BINDS
        self._origins = frozenset(o.encode().lower().rstrip(b"/") for o in config.allowed_origins)
        self._hosts = frozenset(h.encode().lower() for h in config.allowed_hosts)
        self.dispatch = Dispatcher(app)
        #: Seals the requestState of 2026-07-28 multi round-trip requests.
        self.sealer = StateSealer(
            [key.encode() for key in config.request_state_keys], config.request_state_ttl_s
        )
        if self.sealer.generated and config.http.reuse_port:
            logger.warning(
                "request_state_keys is empty: this process seals 2026 requestState with its "
                "own random key, so other processes on the same port will refuse it; set the "
                "same keys on every worker"
            )

    # ---- HTTP --------------------------------------------------------------

    async def __call__(self, request: Request) -> Response | DeferredResponse:
        if request.path not in self._paths:
            if request.path in self._legacy_paths:
                return await self._legacy(request)
            return Response(404, [(b"content-type", b"text/plain")], b"not found\n")
        admitted = self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        cors = admitted
        response: Response | DeferredResponse
        try:
            method = request.method
            if method in ("GET", "DELETE") and self.config.eras == "modern":
                response = Response(405, [(b"allow", b"POST, OPTIONS")])
            elif method == "POST":
                self._check_post_head(request)
                principal = None if self.authenticate is None else await self._principal(request)
                response = self._post(request, cors, principal)
            elif method == "DELETE":
                response = await self._delete(request)
            elif method == "OPTIONS":
                if cors and request.header(b"access-control-request-method") is not None:
                    # a CORS preflight: answered before (and without) authentication
                    return Response(204, cors + _preflight_headers(request))
                response = Response(204, [(b"allow", _ALLOW)])
            elif method == "GET":
                response = await self._get(request, cors)
            else:
                response = Response(405, [(b"allow", _ALLOW)])
        except Rejection as rejection:
            response = rejection_response(rejection)
        if cors and type(response) is Response:
            response.headers = response.headers + cors
        return response

    def respond_now(self, request: Request) -> Response | DeferredResponse | None:
        """What `__call__` answers, for the requests that need no waiting to
        answer: a POST to the endpoint when no authenticate hook is set (the
        server tries this first, which saves a coroutine per request). None
        for every other request: await the endpoint for those."""
        if request.method != "POST" or self.authenticate is not None:
            return None
        if request.path not in self._paths:
            return None
        admitted = self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        cors = admitted
        response: Response | DeferredResponse
        try:
            self._check_post_head(request)
            response = self._post(request, cors, None)
        except Rejection as rejection:
            response = rejection_response(rejection)
        if cors and type(response) is Response:
            response.headers = response.headers + cors
        return response

    def drain(self) -> None:
        """The server is shutting down: end every long-lived stream gracefully.

        Listen streams end with their final response, GET streams and legacy
        SSE streams simply end (their clients reconnect, to another replica).
        """
        for listener in list(self._listeners):
            listener.outbox.close()
        for session in self.sessions.live():
            if session.get_stream is not None:
                session.get_stream.close()
                session.get_stream = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MCPEndpoint]:
        """Run what the endpoint needs while it serves: the application's lifespan
        (if any) and the task that delivers server notifications to sessions."""
        async with contextlib.AsyncExitStack() as stack:
            if self.app.lifespan is not None:
                self.lifespan_state = await stack.enter_async_context(self.app.lifespan(self.app))
            nursery = await stack.enter_async_context(trio.open_nursery())
            self._nursery = nursery
            self._now = trio.lowlevel.current_clock().current_time
            self._swept_at = trio.current_time()
            send, receive = trio.open_memory_channel[Any](_BROADCAST_QUEUE)
            self._broadcasts = send
            self.app.listeners.append(self._on_app_event)
            nursery.start_soon(self._broadcaster, receive)
            nursery.start_soon(self._sweeper)
            try:
                yield self
            finally:
                self.app.listeners.remove(self._on_app_event)
                self._broadcasts = None
                self._nursery = None
                self._now = trio.current_time
                send.close()
                for listener in list(self._listeners):
                    listener.outbox.close()
                nursery.cancel_scope.cancel()  # the sweeper and any legacy requests
                self.lifespan_state = None

    def _admit(self, request: Request) -> Response | Headers:
        """The CORS headers for the answer to `request`, or the 403 that
        refuses its Host or Origin."""
        try:
            self._check_origin(request)
        except Rejection as rejection:
            return rejection_response(rejection)
        return _cors_headers(request)

    def _check_origin(self, request: Request) -> None:
        singles = request.singles
        host = dict.get(singles, b"host")
        allowed = dict.get(self._host_verdicts, host)
        if allowed is None:
            # Clients send the same Host every time: judge each value once.
            if len(self._host_verdicts) >= 256:
                self._host_verdicts.clear()
            allowed = host_allowed(host, self._hosts, self._loopback)
            self._host_verdicts[host] = allowed
        if not allowed:
            raise refuse(403, "Forbidden: Host not allowed")
        origin = dict.get(singles, b"origin")
        if origin is not None and not origin_allowed(origin, self._origins, self._loopback):
            raise refuse(403, "Forbidden: Origin not allowed")

    async def _principal(self, request: Request) -> object:
        if self.authenticate is None:
            return None
        principal = await self.authenticate(request)
        if principal is None:
            raise refuse(401, "Unauthorized", [(b"www-authenticate", b"Bearer")])
        return principal

    def _session_for(self, request: Request, principal: object) -> Session | None:
        singles = request.singles
        raw = dict.get(singles, b"mcp-session-id")
        if raw is None:
            return None
        session = self.sessions.get(raw.decode("latin-1"), self._swept_at)
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

    def _check_post_head(self, request: Request) -> None:
        """A POST's Accept and Content-Type, checked before authentication."""
        accept = tuple(request.header_values(b"accept"))
        acceptable = dict.get(self._accept_cache, accept)
        if acceptable is None:
            # Clients send the same Accept every time: parse each value once.
            if len(self._accept_cache) >= 256:
                self._accept_cache.clear()
            acceptable = accepts(accept, JSON) and accepts(accept, SSE)
            self._accept_cache[accept] = acceptable
        if not acceptable:
            raise refuse(
                406, "Not Acceptable: Accept must allow application/json and text/event-stream"
            )
        if not is_json_content_type(dict.get(request.singles, b"content-type")):
            raise refuse(415, "Unsupported Media Type: use application/json")

    def _post(
        self, request: Request, cors: Headers, principal: object
    ) -> Response | DeferredResponse:
        """A POST after `_check_post_head` and authentication: its refusal or answer.

        Synchronous: with an authorize hook, the requests are authorized where
        they are answered (`_authorized_respond`)."""
        header = dict.get(request.singles, b"mcp-protocol-version")
        try:
            messages, batch = decode_body(request.body, allow_batch=True)
        except MCPError as exc:
            raise Rejection(400, exc) from None
        first = messages[0]
        eras = self.config.eras
        if not batch and is_modern(header, getattr(first, "params", None)):
            if eras == "legacy":
                # the legacy rule for a version we don't speak, in a body a dual-era
                # client does not read as a modern error: it falls back to initialize
                raise refuse(400, "Bad Request: unsupported MCP-Protocol-Version")
            return self._modern_post(request, first, principal, cors)
        if eras == "modern":
            requested = header.decode("latin-1") if header is not None else HEADERLESS_VERSION
            error = MCPError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "This server speaks 2026-07-28 only",
                {"supported": list(MODERN_VERSIONS), "requested": requested},
            )
            message_id = first.id if type(first) is RPCRequest else None
            raise Rejection(400, error, request_id=message_id)
        # The 2025 revisions (and 2024-11-05 clients that initialize here).
        session = self._session_for(request, principal)
        if session is not None:
            version = session.protocol_version
        elif header is not None:
            version = header.decode("latin-1")
        else:
            version = HEADERLESS_VERSION
        if batch and version != BATCH_VERSION:
            raise refuse(400, "Invalid request: batches are not supported")
        requests = [m for m in messages if type(m) is RPCRequest]
        if session is None:
            initializing = len(messages) == 1 and requests and requests[0].method == "initialize"
            if not initializing and not self.config.stateless:
                raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        invalid_seen = False
        for message in messages:
            if type(message) is Notification:
                self._notification(message, session)
            elif type(message) is RPCResponse and session is not None:
                waiter = session.pending.get(message.id) if type(message.id) is int else None
                if waiter is not None:
                    waiter.resolve(message)
            elif type(message) is Invalid:
                invalid_seen = True
        if not requests and not invalid_seen:
            return Response(202)
        if not requests and not batch:
            invalid = messages[0]
            assert isinstance(invalid, Invalid)
            raise Rejection(400, invalid.error)
        if self.app.authorize is not None:
            return DeferredResponse(
                partial(
                    self._authorized_respond,
                    request,
                    session,
                    version,
                    messages,
                    batch,
                    principal,
                    cors,
                )
            )
        if session is None and len(requests) == 1 and requests[0].method == "initialize":
            return self._initialize(request, requests[0], principal, batch)
        return DeferredResponse(
            partial(self._respond, request, session, version, messages, batch, principal, cors)
        )

    async def _authorized_respond(
        self,
        request: Request,
        session: Session | None,
        version: str,
        messages: list[Any],
        batch: bool,
        principal: object,
        cors: Headers,
        writer: Any,
    ) -> None:
        """The rest of `_post` when the application has an authorize hook: a
        refused single request is a 403; in a batch, each refused one is an error."""
        requests = [m for m in messages if type(m) is RPCRequest]
        denied = await self._denied(requests, principal)
        if denied and not batch:
            await writer.respond(_forbidden(requests[0].id, cors))
            return
        messages = [
            Invalid(m.id, _FORBIDDEN) if type(m) is RPCRequest and m.id in denied else m
            for m in messages
        ]
        if session is None and len(requests) == 1 and requests[0].method == "initialize":
            response = self._initialize(request, requests[0], principal, batch)
            response.headers = response.headers + cors
            await writer.respond(response)
            return
        await self._respond(request, session, version, messages, batch, principal, cors, writer)

    async def _denied(self, requests: list[RPCRequest], principal: object) -> set[Any]:
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

    # ---- the 2026-07-28 revision: stateless requests -------------------------

    def _modern_post(
        self, request: Request, message: Any, principal: object, cors: Headers
    ) -> Response | DeferredResponse:
        """A 2026-07-28 POST: its refusal, its listen stream, or its deferred answer
        (synchronous: the authorize hook, if any, runs in `_modern_respond`)."""
        checked = self._modern_checked(request, message)
        if isinstance(checked, Response):
            return checked
        envelope = checked
        if message.method == "subscriptions/listen":
            return self._listen(message, envelope, cors)
        return DeferredResponse(
            partial(self._modern_respond, request, message, envelope, principal, cors)
        )

    def _modern_checked(self, request: Request, message: Any) -> Response | Envelope:
        """A 2026-07-28 POST's checks before anything runs, in the digest's order:
        the request's `Envelope`, or the Response that refuses it."""
        if type(message) is Notification:
            return Response(202)  # no client notifications are defined on HTTP here
        if type(message) is Invalid:
            raise Rejection(400, message.error)
        if type(message) is not RPCRequest:
            raise refuse(400, "Invalid request: clients must not post responses")
        rpc = message  # (typed RPCRequest in the .pxd, and envelope Envelope)
        method = rpc.method
        try:
            envelope = check_envelope(method, rpc.params, request.singles)
            if envelope.log_level is not None and envelope.log_level not in LOG_LEVELS:
                raise Rejection(
                    400,
                    MCPError(
                        INVALID_PARAMS, f"Invalid params: unknown log level {envelope.log_level!r}"
                    ),
                )
        except Rejection as rejection:
            rejection.request_id = rpc.id
            return rejection_response(rejection)
        if method == "subscriptions/listen":
            return envelope
        if method == "tools/call":
            params = rpc.params
            name = dict.get(params, "name")
            tool = dict.get(self.app.tools, name) if isinstance(name, str) else None
            arguments = dict.get(params, "arguments")
            if tool is not None and tool.header_params and isinstance(arguments, dict):
                problem = header_mismatch(
                    tool.header_params, arguments, request.headers, decode_header_value
                )
                if problem is not None:
                    error = MCPError(HEADER_MISMATCH, problem)
                    raise Rejection(error_status(MODERN, HEADER_MISMATCH), error, request_id=rpc.id)
            if tool is not None:
                # a registered tool means the tools capability, so tools/call is
                # advertised: no need to rebuild the capabilities' key to know it
                return envelope
        if method not in self.dispatch.modern_methods():
            error = MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")
            raise Rejection(error_status(MODERN, METHOD_NOT_FOUND), error, request_id=rpc.id)
        return envelope

    async def _modern_respond(
        self,
        request: Request,
        message: RPCRequest,
        envelope: Envelope,
        principal: object,
        cors: Headers,
        writer: Any,
    ) -> None:
        if self.app.authorize is not None and await self._denied([message], principal):
            await writer.respond(_forbidden(message.id, cors))
            return
        stream = PostStream(self, writer, None, envelope.version, cors)
        try:
            answer = await self._run(
                message,
                request,
                None,
                envelope.version,
                principal,
                stream,
                envelope,
                stream.cancel_scope,  # closing the stream cancels the request (SEP-2575)
            )
            result = dict.get(answer, "result")
            if isinstance(result, dict):
                self._decorate(message.method, result)
            body = dumps(answer)
            if writer.started:
                await stream.emit(body, last=True)
            else:
                # (an answer has a result or an error: only an error needs looking at)
                status = (
                    200 if result is not None else error_status(MODERN, answer["error"]["code"])
                )
                rest = writer.respond_nowait(Response(status, JSON_HEADERS + cors, body))
                if rest:
                    await writer.send_rest(rest)
        finally:
            stream.finish()

    def _listen(
        self, message: RPCRequest, envelope: Envelope, cors: Headers
    ) -> Response | DeferredResponse:
        """subscriptions/listen: an open stream of the notifications the client asked for."""
        wanted = message.params.get("notifications")
        if not isinstance(wanted, dict):
            error = MCPError(INVALID_PARAMS, "Invalid params: notifications must be an object")
            raise Rejection(400, error, request_id=message.id)
        caps = self.app.shared_capabilities()
        honored: dict[str, Any] = {}
        for flag, capability in _LISTEN_FLAGS.items():
            if wanted.get(flag) is True and caps.get(capability, {}).get("listChanged"):
                honored[flag] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list) and caps.get("resources", {}).get("subscribe"):
            honored["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
        meta = b'"_meta":' + dumps({_SUBSCRIPTION_ID: message.id})
        listener = Listener(message.id, honored, meta)
        return DeferredResponse(partial(self._stream_listen, listener, envelope, cors))

    async def _stream_listen(
        self, listener: Listener, envelope: Envelope, cors: Headers, writer: Any
    ) -> None:
        self._listeners[listener] = None
        tag = {_SUBSCRIPTION_ID: listener.id}
        try:
            ack = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": tag, "notifications": listener.honored},
            }
            await writer.start(200, SSE_HEADERS + cors, format_event(dumps(ack), event=MESSAGE))
            await listener.outbox.pump(writer, self.config.keepalive_s)
            if not writer.broken:
                # the server ended the subscription: the response says so
                result = {"resultType": "complete", "_meta": tag}
                final = {"jsonrpc": "2.0", "id": listener.id, "result": result}
                await writer.send(format_event(dumps(final), event=MESSAGE))
        finally:
            self._listeners.pop(listener, None)
            listener.outbox.close()

    def _deliver_to_listeners(self, method: str, params: dict[str, Any], uri: str | None) -> None:
        flag = dict.get(_LISTEN_METHODS, method)
        if flag is None:
            return  # log messages and progress never go on a listen stream
        # Each listener's copy differs only in its _meta: encode the rest once.
        head = b'{"jsonrpc":"2.0","method":' + dumps(method) + b',"params":{'
        inner = dumps({k: v for k, v in params.items() if k != "_meta"})[1:-1]
        if inner:
            head += inner + b","
        now = self._now()
        for listener in list(self._listeners):
            if uri is not None:
                if uri not in dict.get(listener.honored, "resourceSubscriptions", ()):
                    continue
            elif not dict.get(listener.honored, flag):
                continue
            frame = format_event(head + listener.meta + b"}}", event=MESSAGE)
            if not listener.outbox.offer(frame, now):
                self._listeners.pop(listener, None)  # too slow: the client must listen again

    def _decorate(self, method: str, result: dict[str, Any]) -> None:
        """What every modern result carries: resultType, serverInfo, cache hints."""
        dict.setdefault(result, "resultType", "complete")
        meta = dict.setdefault(result, "_meta", {})
        meta[META_SERVER_INFO] = self._server_info()
        if method in _CACHEABLE and result["resultType"] == "complete":
            ttl, scope = self.config.cache_hints.get(
                method, (self.config.cache_ttl_ms, self.config.cache_scope)
            )
            dict.setdefault(result, "ttlMs", ttl)  # a resource's own hints were set by the read
            dict.setdefault(result, "cacheScope", scope)

    async def _delete(self, request: Request) -> Response:
        principal = await self._principal(request)
        session = self._session_for(request, principal)
        if session is None:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        self.sessions.delete(session.id)
        await self._release(session)
        return Response(200)

    # ---- initialize --------------------------------------------------------

    def _initialize(
        self, request: Request, message: RPCRequest, principal: object, batch: bool
    ) -> Response:
        if batch:
            body = dumps(
                [
                    error_message(
                        message.id, MCPError(INVALID_REQUEST, "initialize can't be batched")
                    )
                ]
            )
            return Response(200, JSON_HEADERS, body)
        try:
            version, capabilities, client_info, result = self._initialize_result(message.params)
        except MCPError as exc:
            return Response(200, JSON_HEADERS, dumps(error_message(message.id, exc)))
        headers = list(JSON_HEADERS)
        if not self.config.stateless:
            try:
                session = self.sessions.create(
                    principal, version, capabilities, client_info, self._swept_at
                )
            except SessionsFull:
                return rejection_response(_sessions_full())
            headers.append((b"mcp-session-id", session.id.encode("ascii")))
        body = dumps({"jsonrpc": "2.0", "id": message.id, "result": result})
        return Response(200, headers, body)

    def _initialize_result(
        self, params: dict[str, Any]
    ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(version, client capabilities, client info, InitializeResult) for an initialize."""
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
            "serverInfo": self._server_info(),
        }
        if self.app.instructions is not None:
            result["instructions"] = self.app.instructions
        return version, capabilities, client_info, result

    def _server_info(self) -> dict[str, Any]:
        """The serverInfo object; one shared dict, rebuilt only when the app's
        name, version or title changes (callers must not modify it)."""
        app = self.app
        name, version, title = app.name, app.version, app.title
        key = self._server_info_key
        # (identity, not equality: no tuple to build per request; a new but
        # equal value only rebuilds the dict once)
        if key is None or key[0] is not name or key[1] is not version or key[2] is not title:
            info: dict[str, Any] = {"name": name, "version": version}
            if title is not None:
                info["title"] = title
            self._server_info_key, self._server_info_value = (name, version, title), info
        return self._server_info_value

    # ---- notifications -----------------------------------------------------

    def _notification(self, message: Notification, session: Session | None) -> None:
        if message.method == "notifications/cancelled" and session is not None:
            scope = session.in_flight.get(message.params.get("requestId"))  # type: ignore[arg-type]
            if scope is not None:
                scope.cancel()

    # ---- requests ----------------------------------------------------------

    async def _respond(
        self,
        request: Request,
        session: Session | None,
        version: str,
        messages: list[Any],
        batch: bool,
        principal: object,
        cors: Headers,
        writer: Any,
    ) -> None:
        """Answer the requests of one POST (a DeferredResponse's body)."""
        stream = PostStream(self, writer, session, version, cors)
        scope = stream.cancel_scope
        answers: list[dict[str, Any]] = []
        try:
            for message in messages:
                if type(message) is Invalid:
                    answers.append(error_message(message.id, message.error))
                elif type(message) is RPCRequest:
                    answer = await self._run(
                        message, request, session, version, principal, stream, None, scope
                    )
                    if answer is not None:
                        answers.append(answer)
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

    # ---- the standalone GET stream, resumption, broadcasts -----------------

    async def _get(self, request: Request, cors: Headers) -> DeferredResponse:
        if not accepts(request.header_values(b"accept"), SSE):
            raise refuse(406, "Not Acceptable: Accept must allow text/event-stream")
        principal = await self._principal(request)
        session = self._session_for(request, principal)
        if session is None:
            raise refuse(400, "Bad Request: Mcp-Session-Id header is required")
        last = request.singles.get(b"last-event-id")
        number, backlog = 0, list[StoredEvent]()
        if last is not None:
            found = await self.events.replay(
                session.id, last.decode("latin-1"), trio.current_time()
            )
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
        return DeferredResponse(partial(self._stream_get, session, number, backlog, outbox, cors))

    async def _stream_get(
        self,
        session: Session,
        number: int,
        backlog: list[StoredEvent],
        outbox: Outbox,
        cors: Headers,
        writer: Any,
    ) -> None:
        """Replay what the client missed, then forward live events, with keepalives."""
        try:
            priming = b""
            if number == 0 and not backlog and session.protocol_version >= "2025-11-25":
                priming = await self.priming_event(session, 0)
            await writer.start(200, SSE_HEADERS + cors, priming)
            for event in backlog:
                await writer.send(
                    format_event(event.data, event_id=event.event_id.encode(), event=MESSAGE)
                )
            await outbox.pump(writer, self.config.keepalive_s)
        finally:
            if number == 0:
                self.sessions.end_request(session, self._swept_at)
            if session.get_stream is outbox:
                session.get_stream = None
            outbox.close()

    # ---- the 2024-11-05 HTTP+SSE transport ----------------------------------

    async def _legacy(self, request: Request) -> Response | DeferredResponse:
        admitted = self._admit(request)
        if isinstance(admitted, Response):
            return admitted
        cors = admitted
        try:
            if request.path == self.config.sse_path:
                if request.method not in ("GET", "HEAD"):
                    return Response(405, [(b"allow", b"GET")] + cors)
                return await self._legacy_open(request, cors)
            if request.method != "POST":
                return Response(405, [(b"allow", b"POST")] + cors)
            response = await self._legacy_post(request)
        except Rejection as rejection:
            response = rejection_response(rejection)
        response.headers = response.headers + cors
        return response

    async def _legacy_open(self, request: Request, cors: Headers) -> DeferredResponse:
        """GET /sse: a session whose every answer travels on this stream."""
        if not accepts(request.header_values(b"accept") or [b"*/*"], SSE):
            raise refuse(406, "Not Acceptable: use text/event-stream")
        if self._nursery is None:
            raise Rejection(
                503, MCPError(INTERNAL_ERROR, "Service Unavailable: the endpoint is not running")
            )
        principal = await self._principal(request)
        try:
            session = self.sessions.create(principal, "2024-11-05", {}, {}, self._swept_at)
        except SessionsFull:
            raise _sessions_full() from None
        outbox = Outbox()
        session.get_stream = outbox
        return DeferredResponse(partial(self._legacy_stream, session, outbox, cors))

    async def _legacy_stream(
        self, session: Session, outbox: Outbox, cors: Headers, writer: Any
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

    async def _legacy_post(self, request: Request) -> Response:
        """POST /messages?session_id=...: accepted at once, answered on the stream."""
        session_id = _query_value(request.query, "session_id")
        if session_id is None:
            raise refuse(400, "Bad Request: session_id is required")
        principal = await self._principal(request)
        session = self.sessions.get(session_id, self._swept_at)
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
            self._notification(message, session)
        elif type(message) is RPCResponse:
            waiter = session.pending.get(message.id) if type(message.id) is int else None
            if waiter is not None:
                waiter.resolve(message)
        elif type(message) is RPCRequest:
            assert self._nursery is not None
            self._nursery.start_soon(self._legacy_answer, request, session, message, principal)
        return Response(202, [(b"content-type", b"text/plain")], b"Accepted")

    async def _legacy_answer(
        self, request: Request, session: Session, message: RPCRequest, principal: object
    ) -> None:
        stream = LegacyStream(session)
        if message.method == "initialize":
            try:
                version, capabilities, client_info, result = self._initialize_result(message.params)
            except MCPError as exc:
                answer: dict[str, Any] | None = error_message(message.id, exc)
            else:
                session.protocol_version = version
                session.client_capabilities = capabilities
                session.client_info = client_info
                answer = {"jsonrpc": "2.0", "id": message.id, "result": result}
        else:
            answer = await self._answer(
                message, request, session, session.protocol_version, principal, stream
            )
        if answer is not None:
            await stream.emit(dumps(answer))

    async def _sweeper(self) -> None:
        """Expire idle sessions and old events, and free what expired sessions held."""
        while True:
            await trio.sleep(self._sweep_interval_s)
            now = self._swept_at = trio.current_time()
            self.sessions.expire(now)
            await self._release_ended()
            prune = getattr(self.events, "prune", None)
            if prune is not None:
                prune(now)

    async def _release_ended(self) -> None:
        for session in self.sessions.take_ended():
            await self._release(session)

    async def _release(self, session: Session) -> None:
        """Free everything a session that ended holds: requests, stream, buffers."""
        for scope in session.in_flight.values():
            scope.cancel()
        if session.get_stream is not None:
            session.get_stream.close()
            session.get_stream = None
        await self.events.drop_session(session.id)

    def _on_app_event(self, method: str, params: dict[str, Any], uri: str | None) -> None:
        """Called synchronously by the app; the broadcaster task does the sending."""
        if self._broadcasts is None:
            return
        try:
            self._broadcasts.send_nowait((method, params, uri))
        except trio.WouldBlock:
            logger.warning("notification backlog full: dropped %s", method)

    async def _broadcaster(self, receive: trio.MemoryReceiveChannel[Any]) -> None:
        async for method, params, uri in receive:
            self._deliver_to_listeners(method, params, uri)
            data = dumps({"jsonrpc": "2.0", "method": method, "params": params})
            is_log = method == "notifications/message"
            targets = [
                session
                for session in self.sessions.live()
                if (uri is None or uri in session.subscriptions)
                and not (
                    is_log
                    and session.log_level is not None
                    and LOG_LEVELS[params["level"]] < LOG_LEVELS[session.log_level]
                )
            ]
            now = self._now()  # one clock reading per broadcast
            # One store call per slice of sessions: few calls, and the first
            # streams get the event before the last ones are numbered. The
            # buffers for resumption are written after the last frame is out.
            try:
                for start in range(0, len(targets), _BROADCAST_SLICE):
                    part = targets[start : start + _BROADCAST_SLICE]
                    event_ids = await self.events.append_many([s.id for s in part], 0, data, now)
                    for session, event_id in zip(part, event_ids, strict=True):
                        # publish()'s rule for the GET stream, inline: this runs
                        # per session and a call costs measurably at 10,000 of them
                        outbox = session.get_stream
                        if outbox is not None:
                            frame = format_event(data, event_id=event_id.encode(), event=MESSAGE)
                            if not outbox.offer(frame, now):
                                session.get_stream = None
            finally:
                self.events.settle()

    async def publish(
        self, session: Session, number: int, data: bytes, now: float | None = None
    ) -> bytes:
        """Store `data` as the next event of stream `number`; returns its SSE frame.

        For the GET stream (0) the frame also goes to the attached client, if
        any; one that cannot keep up is detached and must resume. `now`, when
        the caller knows it, saves reading the clock.
        """
        if now is None:
            now = self._now()
        event_id = await self.events.append(session.id, number, data, now)
        frame = format_event(data, event_id=event_id.encode(), event=MESSAGE)
        outbox = session.get_stream
        if number == 0 and outbox is not None and not outbox.offer(frame, now):
            session.get_stream = None
        return frame

    async def priming_event(self, session: Session, number: int) -> bytes:
        """SEP-1699: an event with an id (and the retry hint) and no data, so a
        client can resume stream `number` even before its first real event."""
        event_id = await self.events.append(session.id, number, b"", self._now())
        return format_event(b"", event_id=event_id.encode(), retry_ms=self.config.sse_retry_ms)

    async def _answer(
        self,
        message: RPCRequest,
        request: Request,
        session: Session,
        version: str,
        principal: object,
        stream: LegacyStream,
    ) -> dict[str, Any] | None:
        """The response to one legacy HTTP+SSE request; None when it was cancelled.

        Such a request runs in a task of its own and gets a cancel scope; a
        POST's request is cancelled through its connection (`_run` with
        `PostStream.cancel_scope`).
        """
        with trio.CancelScope() as scope:
            return await self._run(
                message, request, session, version, principal, stream, None, scope
            )
        return None  # cancelled: the client no longer wants an answer

    async def _run(
        self,
        message: RPCRequest,
        request: Request,
        session: Session | None,
        version: str,
        principal: object,
        stream: PostStream | LegacyStream,
        envelope: Envelope | None,
        scope: trio.CancelScope,
    ) -> dict[str, Any]:
        """The response to one request, its handler run under `scope` (which cancels it).

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
        # (a request without a session is tracked nowhere: its connection is its scope)
        in_flight = session.in_flight if session is not None else None
        if in_flight is not None and request_id in in_flight:
            return error_message(
                request_id,
                MCPError(
                    INVALID_REQUEST, "Invalid request: this id is in use by a running request"
                ),
            )
        meta = dict.get(params, "_meta")
        progress_token = dict.get(meta, "progressToken") if isinstance(meta, dict) else None
        emit = stream.emit
        ask = None
        if session is not None and not self.config.json_response_only:
            ask = partial(self._ask_client, session, emit)
        log_level: str | None
        mrtr = envelope is not None and method in _MRTR_METHODS
        input_responses: dict[str, Any] = {}
        state: dict[str, Any] = {}
        if mrtr:
            responses = params.get("inputResponses")
            input_responses = responses if isinstance(responses, dict) else {}
            if "requestState" in params:
                try:
                    state, earlier = self.sealer.open(
                        params["requestState"],
                        principal=principal,
                        method=method,
                        digest=params_digest(params),
                        now=trio.current_time(),
                    )
                except MCPError as exc:
                    return error_message(request_id, exc)
                # answers from earlier rounds count too: the handler re-runs from the top
                input_responses = {**earlier, **input_responses}
        if envelope is not None:
            capabilities = envelope.client_capabilities
            log_level = envelope.log_level or _LOGGING_OFF  # no logLevel: no messages
            if isinstance(stream, PostStream):
                stream.on_broken = scope.cancel  # closing the stream cancels (SEP-2575)
        elif session is not None:
            capabilities, log_level = session.client_capabilities, session.log_level
        else:
            capabilities, log_level = {}, None
        # Positional, in the order of Context.__init__: with keywords, creating
        # the (C type) Context builds a dict of 16 arguments first, 0.4 µs per call.
        ctx = Context(
            request_id,
            session.id if session is not None else None,  # session_id
            principal,
            request.headers,
            version,  # protocol_version
            capabilities,  # client_capabilities
            progress_token,
            emit,
            log_level,
            scope,  # cancel_scope
            self.lifespan_state,  # lifespan
            ask,  # request
            stream.close_connection,  # close_stream
            input_responses,
            state,
            mrtr,
        )
        if session is not None and in_flight is not None:  # (both or neither)
            in_flight[request_id] = scope
            self.sessions.begin_request(session)
        try:
            result = await handler(params, ctx, session, version)
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        except InputRequired as exc:
            if envelope is None or method not in _MRTR_METHODS:
                logger.error("%s asked for input where the protocol has no way to", method)
                return error_message(request_id, MCPError(INTERNAL_ERROR, "Internal error"))
            token = self.sealer.seal(
                ctx.state,
                ctx.input_responses,
                principal=principal,
                method=method,
                digest=params_digest(params),
                now=trio.current_time(),
            )
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
            if session is not None and in_flight is not None:
                del in_flight[request_id]
                self.sessions.end_request(session, self._swept_at)

    async def _ask_client(
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
        session.next_request_id += 1
        request_id = session.next_request_id
        waiter = Waiter()
        session.pending[request_id] = waiter
        limit = timeout_s if timeout_s is not None else self.config.client_request_timeout_s
        try:
            await emit(request_bytes(request_id, method, params))
            with trio.move_on_after(limit):
                await waiter.done.wait()
        finally:
            del session.pending[request_id]
        response = waiter.response
        if response is None:
            raise MCPError(INTERNAL_ERROR, f"the client did not answer {method} within {limit} s")
        if response.error is not None:
            error = response.error
            raise MCPError(error["code"], error["message"], error.get("data"))
        return response.result


async def serve_mcp(
    app: Server,
    config: MCPConfig | None = None,
    *,
    authenticate: Authenticator | None = None,
    task_status: trio.TaskStatus[HTTPServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` over Streamable HTTP until the server is shut down (see `serve`)."""
    config = config or MCPConfig()
    endpoint = MCPEndpoint(app, config, authenticate=authenticate)
    async with endpoint.running():
        await serve(endpoint, config.http, task_status=task_status)


def run_mcp(
    app: Server, config: MCPConfig | None = None, *, authenticate: Authenticator | None = None
) -> None:
    """Serve `app` from a script; SIGINT or SIGTERM drains gracefully."""
    config = config or MCPConfig()
    endpoint = MCPEndpoint(app, config, authenticate=authenticate)
    run(endpoint, config.http, around=endpoint.running())
