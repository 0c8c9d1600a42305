"""The MCP endpoint: one HTTP `Handler` for every protocol revision.

Where a request enters: `MCPEndpoint.route`. It picks the resource by path
(the endpoint, or the 2024-11-05 HTTP+SSE pair), applies admission (Origin
and Host, Accept and Content-Type, CORS), authenticates when an
``authenticate`` hook is set (in a `DeferredResponse`, since that waits),
decodes a POST's body and tells the era apart per request: a 2026-07-28
request goes to `ModernTransport`, anything else to `SessionsTransport`.
Those, the request runner, the broadcaster and the sweeper are built here
and share the endpoint's stores; none of them calls back into this module.
`running` runs what the endpoint needs while it serves.

Beside the endpoint, two probes for load balancers and orchestrators
(``health_path``, ``ready_path``) are answered at routing, before admission
and authentication, only when the path is none of the endpoint's; the
endpoint's life in a graceful shutdown (`drain`, `listener_closed`,
`deadline_passed`) decides what the readiness probe says.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from math import inf
from typing import TYPE_CHECKING, Any, Final, final

import trio

from .._app._server import Server
from .._config import MCPConfig
from .._errors import MCPError, Rejection
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._json import dumps
from .._logs import default_logging
from .._observe import Observer, observer_for
from .._protocol._admission import ALLOW, Admission, cors_headers, preflight_headers
from .._protocol._answers import JSON_HEADERS, refuse, rejection_response
from .._protocol._envelope import ALL_VERSIONS, MODERN_VERSIONS, is_modern
from .._protocol._jsonrpc import (
    UNSUPPORTED_PROTOCOL_VERSION,
    Invalid,
    Message,
    Notification,
    RPCRequest,
    decode_body,
    error_message,
)
from .._protocol._request_state import StateSealer, default_principal_key
from .._protocol._revisions import HEADERLESS_VERSION
from .._protocol._sessions import new_session_id
from .._stores._stores import Stores, memory_stores
from .._trio._run import run
from .._trio._server import HTTPServer, serve
from .._trio._tasks import in_python, python_coroutine
from ._fanout import Broadcaster, Sweeper, sweep_interval_s
from ._handshake import Handshake
from ._http_sse import HTTPSSETransport
from ._modern_era import ModernTransport
from ._runner import RequestRunner
from ._sessions_era import SessionsTransport
from ._startup import announce

if TYPE_CHECKING:
    from .._trio._peer_broadcast import PeerBroadcast

logger = logging.getLogger("trio_mcp.endpoint")

#: ``authenticate(request)`` returns the principal, or None to answer 401.
Authenticator = Callable[[Request], Awaitable[object | None]]
#: ``principal_key(principal)``: a string equal for the same principal in every
#: process, to which 2026 requestState is bound (the default takes None, str,
#: int, bytes and JSON values; another type of principal needs one).
PrincipalKey = Callable[[object], str]

_NOT_FOUND: Final = (b"content-type", b"text/plain")
#: The probes' answers: short text, never cached (a cached "ready" would
#: outlive the drain), and no CORS headers (browsers have no use for them).
_PROBE_HEADERS: Final = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"cache-control", b"no-store"),
]
_PROBE_METHODS: Final = [(b"allow", b"GET, HEAD"), (b"cache-control", b"no-store")]
#: How much longer than the owner's own time limit a passed-on answer may
#: take: the error the owner answers at its limit still comes through.
_HOP_GRACE_S: Final = 5.0
#: What a transport method does once the request's principal is known.
_Then = Callable[[Request, Headers, object], Response | DeferredResponse]


@final
@dataclass(frozen=True, slots=True)
class MCPStatistics:
    """What an endpoint holds in this process now (`MCPEndpoint.statistics`).

    Every count is back to zero once every client has left and its session
    ended (deleted, expired, its HTTP+SSE stream closed, or drained).
    """

    #: Live session records.
    sessions: int
    #: Open standalone (GET, HTTP+SSE) and subscriptions/listen streams.
    streams: int
    #: POST streams being produced (their events can be resumed live).
    post_streams: int
    #: Sessions with events (or an entry) kept for resumption, and those bytes.
    buffered_sessions: int
    buffered_bytes: int
    #: Requests running, and requests sent to clients waiting for answers.
    requests_running: int
    client_requests_waiting: int
    #: Sessions with an entry in the request registry.
    request_entries: int
    #: HTTP+SSE requests running or waiting for their session's stream.
    http_sse_answering: int


class MCPEndpoint:
    """Serves an MCP `Server` application at ``config.path`` (an HTTP `Handler`)."""

    __slots__ = (
        "app",
        "config",
        "authenticate",
        "admission",
        "stores",
        "runner",
        "broadcaster",
        "sweeper",
        "handshake",
        "streamable",
        "modern",
        "http_sse",
        "_paths",
        "_sse_paths",
        "_health_path",
        "_ready_path",
        "ready",
        "observer",
        "_metrics_path",
        "_exposition",
        "passing",
        "peer_socket",
        "router",
        "_via",
        "peer_broadcast",
    )

    def __init__(
        self,
        app: Server,
        config: MCPConfig | None = None,
        *,
        authenticate: Authenticator | None = None,
        stores: Stores | None = None,
        principal_key: PrincipalKey = default_principal_key,
    ) -> None:
        self.app = app
        self.config = config = config or MCPConfig()
        self.authenticate = authenticate
        self.admission = Admission(config.allowed_hosts, config.allowed_origins, config.http.host)
        sealer = StateSealer(
            [key.encode() for key in config.request_state_keys], config.request_state_ttl_s
        )
        hints = None
        if config.owner_name:  # (imported only then, as the hop's modules are)
            from .._protocol._owners import OwnerHints, passing_on

            hints = OwnerHints(config.owner_name, sealer.keys)  # (the group's ring)
        #: Where the endpoint keeps shared state: the sessions' records, their
        #: events, the live streams and the requests in flight.
        new_id = hints or new_session_id
        if stores is None:
            grace_s = 2 * sweep_interval_s(config)
            if config.redis_url:
                from .._stores._redis_stores import redis_stores

                stores = redis_stores(config, grace_s, principal_key, new_id)
            else:
                stores = memory_stores(config, grace_s, new_id)
        self.stores = stores
        #: Which requests go to their session's owner (None: none).
        self.passing = passing_on(config, hints, self.stores.shared) if hints else None
        #: The unix socket the group passes this process requests on (the
        #: HTTP server listens there too), while requests are passed on.
        self.peer_socket = (
            os.path.join(config.peer_sockets_dir, config.owner_name + ".sock")
            if self.passing is not None
            else None
        )
        #: What the HTTP server calls for each request, chosen here once:
        #: `route`, or `route_passing_on` (so that a process that passes
        #: nothing on asks nothing per request).
        self.router = self.route if self.passing is None else self.route_passing_on
        #: What this process adds to the Via header of what it passes on.
        self._via = b"1.1 " + config.owner_name.encode("ascii")
        if sealer.generated and config.http.reuse_port:
            logger.warning(
                "request_state_keys is empty: this process seals 2026 requestState with its "
                "own random key, so other processes on the same port will refuse it; set the "
                "same keys on every worker"
            )
        stores = self.stores
        self.runner = RequestRunner(app, config, stores, sealer, principal_key)
        self.broadcaster = Broadcaster(config, stores)
        #: The group's broadcasts between workers (None: no group, or shared
        #: stores, which reach every process themselves): decided with passing on.
        self.peer_broadcast = group_broadcast(config, self.broadcaster) if self.passing else None
        if stores.broadcast is not None:  # (shared stores: every process sharing them)
            stores.broadcast.on_message = self.broadcaster.on_peer_message
            self.broadcaster.peers = stores.broadcast
        self.sweeper = Sweeper(config, stores)
        self.handshake = Handshake(app, config, stores.sessions)
        self.streamable = SessionsTransport(
            config, stores, self.runner, self.broadcaster, self.sweeper, self.handshake
        )
        self.modern = ModernTransport(
            app, config, stores, self.runner, self.broadcaster, self.handshake
        )
        self.http_sse = HTTPSSETransport(config, stores, self.runner, self.sweeper, self.handshake)
        self._paths = frozenset({config.path, config.path + "/"})
        self._sse_paths = (
            frozenset({config.sse_path, config.messages_path})
            if config.legacy_sse and config.eras != "modern"
            else frozenset()
        )
        self._health_path = config.health_path
        self._ready_path = config.ready_path
        #: Whether the endpoint accepts new work (what ``ready_path`` says):
        #: from the start of `running` until a graceful shutdown begins.
        self.ready = False
        #: Metrics and the access log: None when both are off (the request
        #: path then tests this once where a request ends). The HTTP server
        #: finds it here (`HTTPObserver`).
        self.observer: Observer | None = observer_for(
            config,
            {*self.runner.dispatch.methods, "initialize", "subscriptions/listen"},
            app.tools,
            app.prompts,
            ALL_VERSIONS,
            principal_key,
        )
        self._metrics_path = config.metrics_path
        self._exposition: Any = None
        observer = self.observer
        if observer is not None:
            observer.gauges = self.statistics
            observer.peer_broadcast = self.peer_broadcast or stores.broadcast
            for part in (self.streamable, self.modern, self.http_sse, self.handshake, self.sweeper):
                part.observer = observer
            if config.metrics_path is not None:
                from .._observe._exposition import Exposition

                self._exposition = Exposition(observer)

    def statistics(self) -> MCPStatistics:
        """A snapshot of what the endpoint holds in this process."""
        stores = self.stores
        events, requests = stores.events, stores.requests
        return MCPStatistics(
            sessions=stores.sessions.count(),
            streams=stores.bus.open_streams(),
            post_streams=stores.bus.producing_streams(),
            buffered_sessions=events.buffered_sessions(),
            buffered_bytes=events.buffered_bytes(),
            requests_running=requests.running(),
            client_requests_waiting=requests.waiting(),
            request_entries=requests.entries(),
            http_sse_answering=self.http_sse.answering(),
        )

    # ---- routing -------------------------------------------------------------

    def route(self, request: Request) -> Response | DeferredResponse:
        """The answer to `request`, without waiting (the server's `Handler` contract)."""
        path = request.path
        on_endpoint = path in self._paths
        if not on_endpoint and path not in self._sse_paths:
            return self._elsewhere(request)
        try:
            self.admission.check_origin(request)
        except Rejection as rejection:
            return rejection_response(rejection)
        cors = cors_headers(request)
        response: Response | DeferredResponse
        try:
            if on_endpoint:
                response = self._route_endpoint(request, cors)
            else:
                response = self._route_http_sse(request, cors)
        except Rejection as rejection:
            response = rejection_response(rejection)
        if cors and type(response) is Response:
            response.headers = response.headers + cors
        return response

    def route_passing_on(self, request: Request) -> Response | DeferredResponse:
        """`route` in a process that passes requests to their sessions' owners
        (the server calls this one instead, `router`): a request the owner
        of its session should answer is passed on before anything else (the
        owner applies admission and authentication itself, to the client
        that the hop names), any other routed as usual."""
        path = request.path
        on_endpoint = path in self._paths
        if on_endpoint or path in self._sse_paths:
            passing = self.passing
            assert passing is not None
            owner = passing.owner_to_ask(request, on_endpoint)
            if owner is not None:
                return pass_on(request, self.config, owner, self._via)
        return self.route(request)

    def _elsewhere(self, request: Request) -> Response:
        """A path that is none of the endpoint's: the metrics, a probe, or 404.

        The probes skip the Origin and Host checks and authentication: a
        load balancer's probe comes with an address for Host and no
        credentials, and they tell nothing and change nothing (a page a DNS
        rebinding points here could learn only that the server is up; with
        no CORS headers it cannot even read that). Nothing logs them.
        """
        path = request.path
        if path == self._metrics_path:
            return self._metrics(request)
        if path == self._health_path:
            status, body = 200, b"ok\n"
        elif path == self._ready_path:
            status, body = (200, b"ready\n") if self.ready else (503, b"not ready\n")
        else:
            return Response(404, [_NOT_FOUND], b"not found\n")
        if request.method not in ("GET", "HEAD"):
            return Response(405, _PROBE_METHODS)
        return Response(status, _PROBE_HEADERS, body)

    def _metrics(self, request: Request) -> Response:
        """The metrics in the Prometheus text format (GET only; like a health
        check, no Host, Origin or authentication check)."""
        if request.method != "GET":
            return Response(405, [(b"allow", b"GET")])
        exposition = self._exposition
        return Response(200, [(b"content-type", exposition.content_type)], exposition.render())

    def _route_endpoint(self, request: Request, cors: Headers) -> Response | DeferredResponse:
        """The endpoint's methods (a Response's CORS headers are added by `route`)."""
        method = request.method
        if method == "POST":
            self.admission.check_post_head(request)
            if self.authenticate is None:
                return self._post(request, cors, None)
            return self._authenticated(self._post, request, cors)
        if method in ("GET", "HEAD", "DELETE") and self.config.eras == "modern":
            return Response(405, [(b"allow", b"POST, OPTIONS")])
        if method == "GET" or method == "HEAD":
            self.admission.check_get_head(request)
            return self._with_principal(self.streamable.get, request, cors)
        if method == "DELETE":
            return self._with_principal(self.streamable.delete, request, cors)
        if method == "OPTIONS":
            if cors and request.header(b"access-control-request-method") is not None:
                # a CORS preflight: answered before (and without) authentication
                return Response(204, preflight_headers(request))
            return Response(204, [(b"allow", ALLOW)])
        return Response(405, [(b"allow", ALLOW)])

    def _post(
        self, request: Request, cors: Headers, principal: object
    ) -> Response | DeferredResponse:
        """A POST to the endpoint, once admitted and authenticated: its body
        decoded, and the era it speaks told apart (digest 3.12)."""
        header = dict.get(request.singles, b"mcp-protocol-version")
        try:
            messages, batch = decode_body(request.body, allow_batch=True)
        except MCPError as exc:
            raise Rejection(400, exc) from None
        first = messages[0]
        eras = self.config.eras
        params = first.params if type(first) is RPCRequest or type(first) is Notification else None
        if not batch and is_modern(header, params):
            if eras == "legacy":
                # the legacy rule for a version we don't speak, in a body a dual-era
                # client does not read as a modern error: it falls back to initialize
                raise refuse(400, "Bad Request: unsupported MCP-Protocol-Version")
            return self.modern.post(request, first, principal, cors)
        if eras == "modern":
            return _modern_only(header, first)
        return self.streamable.post(request, messages, batch, cors, principal)

    def _authenticated(self, then: _Then, request: Request, cors: Headers) -> DeferredResponse:
        """An answer that waits for the request's principal first (`_principal`),
        then is `then`'s."""
        return DeferredResponse(partial(self._after_authentication, then, request, cors))

    async def _after_authentication(
        self, then: _Then, request: Request, cors: Headers, writer: ResponseWriter
    ) -> None:
        try:
            principal = await self._principal(request)
            response = then(request, cors, principal)
        except Rejection as rejection:
            response = rejection_response(rejection)
        if type(response) is Response:
            if cors:
                response.headers = response.headers + cors
            await writer.respond(response)
        else:
            assert type(response) is DeferredResponse
            writer.outlives_peer = response.outlives_peer  # (the server read this one's)
            await response.respond(writer)

    async def _principal(self, request: Request) -> object:
        """Who sent `request` (None without an authenticate hook); 401 for nobody."""
        if self.authenticate is None:
            return None
        principal = await self.authenticate(request)
        if principal is None:
            raise refuse(401, "Unauthorized", [(b"www-authenticate", b"Bearer")])
        return principal

    def _route_http_sse(self, request: Request, cors: Headers) -> Response | DeferredResponse:
        """The 2024-11-05 HTTP+SSE pair: ``GET /sse`` and ``POST /messages``."""
        if request.path == self.config.sse_path:
            if request.method not in ("GET", "HEAD"):
                return Response(405, [(b"allow", b"GET")])
            self.http_sse.check_open(request)
            return self._with_principal(self.http_sse.open, request, cors)
        if request.method != "POST":
            return Response(405, [(b"allow", b"POST")])
        self.http_sse.check_post(request)
        return self._with_principal(self._http_sse_post, request, cors)

    def _http_sse_post(
        self, request: Request, cors: Headers, principal: object
    ) -> Response | DeferredResponse:
        return self.http_sse.post(request, principal)

    def _with_principal(
        self, then: _Then, request: Request, cors: Headers
    ) -> Response | DeferredResponse:
        """`then`'s answer, authenticated first when there is a hook."""
        if self.authenticate is None:
            return then(request, cors, None)
        return self._authenticated(then, request, cors)

    # ---- the endpoint's life -------------------------------------------------

    def drain(self) -> None:
        """A graceful shutdown begins: from now on the endpoint is not ready
        (``ready_path`` answers 503), so load balancers stop sending it new
        work; it still serves what comes (the server closes each connection
        after its answer) until the listener closes (`listener_closed`)."""
        self.ready = False

    def listener_closed(self) -> None:
        """The server's listener has closed: end every long-lived stream gracefully.

        Listen streams end with their final response, GET streams and HTTP+SSE
        streams end with a ``retry:`` hint (their clients reconnect, to
        another replica, and a GET stream resumes there with Last-Event-ID);
        an HTTP+SSE stream whose requests still run ends after its last answer.
        """
        self.ready = False
        farewell = b"retry: %d\n\n" % self.config.sse_retry_ms
        self.stores.bus.close_all(keep=self.http_sse.drain(), farewell=farewell)

    async def deadline_passed(self) -> None:
        """The server's shutdown deadline has passed: a request ended from now
        on is answered with the shutdown error (the server cancels those on
        its connections next); the HTTP+SSE requests, which run here, are
        cancelled and answered on their streams, which then end."""
        self.runner.stopping = True
        await self.http_sse.stop()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MCPEndpoint]:
        """Run what the endpoint needs while it serves: the application's lifespan
        (if any), the broadcaster of server notifications and the sweeper."""
        async with contextlib.AsyncExitStack() as stack:
            if self.app.lifespan is not None:
                state = await stack.enter_async_context(self.app.lifespan(self.app))
                self.runner.lifespan_state = state
            if self.observer is not None:
                self.observer.open()
                stack.push_async_callback(self._close_observer, self.observer)
            if self.stores.opened is not None:
                await stack.enter_async_context(self.stores.opened())
            nursery = await stack.enter_async_context(trio.open_nursery())
            self.http_sse.nursery = nursery
            if self.peer_broadcast is not None:
                await nursery.start(in_python, self.peer_broadcast.run)
            broadcaster = self.broadcaster
            await nursery.start(in_python, broadcaster.run, name=broadcaster.run)
            keepalives = broadcaster.keepalives.run
            await nursery.start(in_python, keepalives, name=keepalives)
            self.app.listeners.append(self.broadcaster.on_app_event)
            nursery.start_soon(in_python, self.sweeper.run, name=self.sweeper.run)
            self.ready = True
            try:
                yield self
            finally:
                self.ready = False
                self.app.listeners.remove(self.broadcaster.on_app_event)
                self.http_sse.nursery = None
                self.stores.bus.close_all()
                nursery.cancel_scope.cancel()  # the sweeper and any HTTP+SSE requests
                self.runner.lifespan_state = None

    async def _close_observer(self, observer: Observer) -> None:
        """The access log's last lines written, even when the run was cancelled
        (waits up to ``CLOSE_WAIT_S`` for a writer stuck on a full pipe)."""
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(observer.close)

    @property
    def lifespan_state(self) -> Any:
        """What the application's lifespan yielded, while `running` is entered."""
        return self.runner.lifespan_state


def _modern_only(header: bytes | None, first: Message | Invalid) -> Response:
    """The refusal of a pre-2026 request by an endpoint that speaks 2026-07-28 only."""
    requested = header.decode("latin-1") if header is not None else HEADERLESS_VERSION
    error = MCPError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "This server speaks 2026-07-28 only",
        {"supported": list(MODERN_VERSIONS), "requested": requested},
    )
    message_id = first.id if type(first) is RPCRequest else None
    return Response(400, JSON_HEADERS, dumps(error_message(message_id, error)))


def group_broadcast(config: MCPConfig, broadcaster: Broadcaster) -> PeerBroadcast:
    """The broadcasts between this process and the others of its group: what
    the application broadcasts here goes to them, and theirs comes here."""
    from .._trio._peer_broadcast import PeerBroadcast

    peers = PeerBroadcast(
        config.peer_sockets_dir,
        config.owner_name,
        config.peer_broadcast_queue_bytes,
        broadcaster.on_peer_message,
    )
    broadcaster.peers = peers
    return peers


def pass_on(request: Request, config: MCPConfig, owner: str, via: bytes) -> DeferredResponse:
    """Pass `request` to `owner`, the process that owns its session, and
    relay its answer (`via` names this process in its Via header); a 404
    when that process is gone (the client then starts a new session), as
    for any session this process does not know."""
    from .._http._relay import hop_preamble, hop_request
    from .._trio._peers import relay

    gone = rejection_response(
        refuse(404, "Session not found: initialize a new session"), cors_headers(request)
    )
    return DeferredResponse(
        partial(
            relay,
            hop_preamble(request),
            hop_request(request, via),
            request.method == "HEAD",
            os.path.join(config.peer_sockets_dir, owner + ".sock"),
            gone,
            # (a stream lasts as long as its client; an answer as long as
            # the owner lets its request run)
            inf if request.method in ("GET", "HEAD") else config.request_timeout_s + _HOP_GRACE_S,
            via,
        )
    )


@python_coroutine
async def serve_mcp(
    app: Server,
    config: MCPConfig | None = None,
    *,
    authenticate: Authenticator | None = None,
    stores: Stores | None = None,
    principal_key: PrincipalKey = default_principal_key,
    task_status: trio.TaskStatus[HTTPServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` over Streamable HTTP until the server is shut down (see `serve`)."""
    config = config or MCPConfig()
    endpoint = MCPEndpoint(
        app, config, authenticate=authenticate, stores=stores, principal_key=principal_key
    )
    async with endpoint.running():
        await serve(endpoint, config.http, task_status=task_status)


def run_mcp(
    app: Server,
    config: MCPConfig | None = None,
    *,
    authenticate: Authenticator | None = None,
    principal_key: PrincipalKey = default_principal_key,
) -> None:
    """Serve `app` from a script; SIGINT or SIGTERM drains gracefully.

    Says where it serves in one line at start-up, and why it cannot start in
    one line (exit status 1). Logs go to stderr at level info unless logging
    is configured already."""
    config = config or MCPConfig()
    endpoint = MCPEndpoint(app, config, authenticate=authenticate, principal_key=principal_key)
    with default_logging():
        run(
            endpoint,
            config.http,
            around=endpoint.running(),
            started=partial(announce, config),
        )
