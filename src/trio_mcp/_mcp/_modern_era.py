"""The 2026-07-28 revision: stateless requests on the same endpoint.

`ModernTransport.post` takes a POST whose body the router found to be a
2026-07-28 request and applies the digest's checks in order (3.7): the
envelope and its mirrored headers, the method against what the server
advertises, a tool's ``Mcp-Param-*`` headers. A request that passes is run by
`_answer` (closing the response stream cancels it); ``subscriptions/listen``
opens a stream of the notifications the client asked for. Every result
carries ``resultType``, ``serverInfo`` and, where the method is cacheable,
cache hints.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

import trio

from .._app._schema import header_mismatch
from .._app._server import Server
from .._config import MCPConfig
from .._errors import MCPError, Rejection
from .._http._connection import Headers, Request, Response
from .._http._handler import DeferredResponse, ResponseWriter
from .._json import dumps
from .._protocol._answers import JSON_HEADERS, forbidden
from .._protocol._envelope import META_SERVER_INFO, Envelope, check_envelope
from .._protocol._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MODERN,
    UNENCODABLE,
    Invalid,
    Message,
    Notification,
    RPCRequest,
    answer_bytes,
    error_status,
)
from .._speedups import decode_header_value, format_event
from .._stores._stores import Stores
from ._fanout import Broadcaster
from ._handshake import Handshake
from ._runner import RequestRunner
from ._streams import MESSAGE, SSE_HEADERS, Listener, PostStream

if TYPE_CHECKING:
    from .._observe import Observer

#: The results that carry cache hints.
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
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
#: subscriptions/listen flags and the server capability each needs (with listChanged).
_LISTEN_FLAGS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}


class ModernTransport:
    """The 2026-07-28 POST and subscriptions/listen (see the module docstring)."""

    __slots__ = ("app", "config", "bus", "runner", "broadcaster", "handshake", "observer")

    def __init__(
        self,
        app: Server,
        config: MCPConfig,
        stores: Stores,
        runner: RequestRunner,
        broadcaster: Broadcaster,
        handshake: Handshake,
    ) -> None:
        self.app = app
        self.config = config
        #: Where the listen streams are found by the notifications they want.
        self.bus = stores.bus
        self.runner = runner
        self.broadcaster = broadcaster
        self.handshake = handshake
        #: Metrics and the access log (None: both off).
        self.observer: Observer | None = None

    def post(
        self, request: Request, message: Message | Invalid, principal: object, cors: Headers
    ) -> Response | DeferredResponse:
        """A 2026-07-28 POST: its refusal, its listen stream, or its deferred answer
        (synchronous: the authorize hook, if any, runs in `_answer`)."""
        checked = self.checked(request, message)
        if isinstance(checked, Response):
            return checked
        envelope = checked
        rpc = message
        assert type(rpc) is RPCRequest  # (checked refuses every other kind)
        if rpc.method == "subscriptions/listen":
            return self._listen(rpc, cors)
        return DeferredResponse(partial(self._answer, request, rpc, envelope, principal, cors))

    def checked(self, request: Request, message: Message | Invalid) -> Response | Envelope:
        """A POST's checks before anything runs, in the digest's order: the
        request's `Envelope`, the 202 of a notification, or the refusal."""
        if type(message) is Notification:
            return Response(202)  # no client notifications are defined on HTTP here
        if type(message) is Invalid:
            raise Rejection(400, message.error)
        if type(message) is not RPCRequest:
            raise Rejection(
                400, MCPError(INVALID_REQUEST, "Invalid request: clients must not post responses")
            )
        rpc = message  # (typed RPCRequest in the .pxd, and envelope Envelope)
        method = rpc.method
        try:
            envelope = check_envelope(method, rpc.params, request.singles)
        except Rejection as rejection:
            rejection.request_id = rpc.id
            raise
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
                    raise Rejection(error_status(MODERN, HEADER_MISMATCH), error, (), rpc.id)
            if tool is not None:
                # a registered tool means the tools capability, so tools/call is
                # advertised: no need to rebuild the capabilities' key to know it
                return envelope
        if method not in self.runner.dispatch.modern_methods():
            error = MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")
            raise Rejection(error_status(MODERN, METHOD_NOT_FOUND), error, (), rpc.id)
        return envelope

    async def _answer(
        self,
        request: Request,
        message: RPCRequest,
        envelope: Envelope,
        principal: object,
        cors: Headers,
        writer: ResponseWriter,
    ) -> None:
        runner = self.runner
        if runner.app.authorize is not None and await runner.denied([message], principal):
            await writer.respond(forbidden(message.id, cors))
            return
        writer.time_limit_s = self.config.request_timeout_s
        stream = PostStream(self.broadcaster, writer, None, envelope.version, cors)
        # closing the response stream cancels the request (SEP-2575)
        stream.on_broken = stream.cancel_scope.cancel
        observer = self.observer
        started = 0.0
        if observer is not None:  # (when the server saw it arrive, if it says)
            started = request.started or perf_counter()
        answer: dict[str, Any] | None = None
        status = 499  # (unless an answer goes out: its client went, or it ran too long)
        try:
            try:
                answer = await runner.run(message, stream, request.headers, principal, envelope)
            except trio.Cancelled:
                if writer.overdue:
                    late = answer_bytes(runner.overdue_answer(message))
                    await stream.answer_late(late, error_status(MODERN, INTERNAL_ERROR))
                raise
            result = dict.get(answer, "result")
            if isinstance(result, dict):
                self.decorate(message.method, result)
            try:  # (answer_bytes inline: a call per answer costs more than the try)
                body = dumps(answer)
            except UNENCODABLE:
                body = answer_bytes(answer)
            if writer.started:
                status = 200
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
            if observer is not None:
                observer.answered(
                    request.client,
                    message.method,
                    message.params,
                    answer,
                    status,
                    envelope.version,
                    principal,
                    None,
                    started,
                )

    def decorate(self, method: str, result: dict[str, Any]) -> None:
        """What every modern result carries: resultType, serverInfo, cache hints."""
        dict.setdefault(result, "resultType", "complete")
        meta = dict.setdefault(result, "_meta", {})
        meta[META_SERVER_INFO] = self.handshake.server_info()
        if method in _CACHEABLE and result["resultType"] == "complete":
            config = self.config
            ttl, scope = config.cache_hints.get(method, (config.cache_ttl_ms, config.cache_scope))
            dict.setdefault(result, "ttlMs", ttl)  # a resource's own hints were set by the read
            dict.setdefault(result, "cacheScope", scope)

    # ---- subscriptions/listen ------------------------------------------------

    def _listen(self, message: RPCRequest, cors: Headers) -> DeferredResponse:
        """subscriptions/listen: an open stream of the notifications the client asked for."""
        honored = self.honored(message)
        meta = b'"_meta":' + dumps({SUBSCRIPTION_ID: message.id})
        listener = Listener(message.id, honored, meta, self.config.stream_queue_bytes)
        return DeferredResponse(partial(self.stream_listen, listener, cors))

    def honored(self, message: RPCRequest) -> dict[str, Any]:
        """What of a subscriptions/listen request the server will send (its
        acknowledgement's ``notifications``); a Rejection for bad params."""
        wanted = message.params.get("notifications")
        if not isinstance(wanted, dict):
            error = MCPError(INVALID_PARAMS, "Invalid params: notifications must be an object")
            raise Rejection(400, error, (), message.id)
        caps = self.app.shared_capabilities()
        honored: dict[str, Any] = {}
        for flag, capability in _LISTEN_FLAGS.items():
            if wanted.get(flag) is True and caps.get(capability, {}).get("listChanged"):
                honored[flag] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list) and caps.get("resources", {}).get("subscribe"):
            most = self.config.max_listen_subscriptions
            if len(uris) > most:
                error = MCPError(
                    INVALID_PARAMS,
                    f"Invalid params: at most {most} resourceSubscriptions per listen stream",
                )
                raise Rejection(400, error, (), message.id)
            honored["resourceSubscriptions"] = list(
                dict.fromkeys(u for u in uris if isinstance(u, str))
            )
        return honored

    async def stream_listen(
        self, listener: Listener, cors: Headers, writer: ResponseWriter
    ) -> None:
        """Run one listen stream: its acknowledgement, what it subscribed to, and
        the final response when the server ends it."""
        bus = self.bus
        bus.listen(listener)
        tag = {SUBSCRIPTION_ID: listener.id}
        try:
            ack = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": tag, "notifications": listener.honored},
            }
            await writer.start(200, SSE_HEADERS + cors, format_event(dumps(ack), event=MESSAGE))
            await listener.outbox.pump(writer, self.config.keepalive_s, self.broadcaster.keepalives)
            if not writer.broken:
                # the server ended the subscription: the response says so
                result = {"resultType": "complete", "_meta": tag}
                final = {"jsonrpc": "2.0", "id": listener.id, "result": result}
                await writer.send(format_event(dumps(final), event=MESSAGE))
        finally:
            bus.unlisten(listener)
            listener.outbox.close()
