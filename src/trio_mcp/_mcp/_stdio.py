"""The stdio transport: one client, newline-delimited JSON-RPC on two byte streams.

Where a message enters: `StdioTransport._take`, for each line of the input
(`_trio/_lines.py` frames lines and writes them). An ``initialize`` is
answered at once, in order; any other request runs in a guarded task through
the `RequestRunner` the HTTP transports use, under a cancel scope that
``notifications/cancelled`` and the request time limit reach; a response from
the client goes to the runner, which wakes the handler that asked. Every
outgoing message goes through one queue to one writer task, so lines never
interleave and a cancelled request never tears one.

The connection is one 2025 session, made before the first line, so requests
to the client, the log level and subscriptions live in the stores as on HTTP.
A request whose ``_meta`` names a protocol version is served as 2026-07-28
under its own envelope; ``subscriptions/listen`` shares the output and ends
with the client's ``notifications/cancelled`` or the end of the input.

Our rules where the spec leaves the choice: a line that is not JSON is
answered -32700, one that is no message or longer than ``max_line_bytes``
-32600 (null id), and reading goes on; a 2025 request other than ``ping``
before ``initialize`` is -32600; at the end of the input, listens end with
their final response, requests get `DRAIN_S` to finish and the rest are
cancelled, unanswered.
"""

from __future__ import annotations

import contextlib
import logging
from functools import partial
from typing import Any, Final

import trio

from .._app._server import Server
from .._config import MCPConfig, MiB
from .._errors import MCPError, Rejection
from .._json import dumps
from .._protocol._answers import FORBIDDEN, too_many
from .._protocol._envelope import MODERN_VERSIONS, Envelope, check_envelope, is_modern
from .._protocol._jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    Invalid,
    Notification,
    RequestId,
    RPCRequest,
    RPCResponse,
    answer_bytes,
    decode_body,
    error_bytes,
    error_message,
    notification_bytes,
)
from .._protocol._logging import LOG_LEVELS
from .._protocol._request_state import StateSealer
from .._protocol._revisions import BATCH_VERSION
from .._protocol._sessions import Session
from .._stores._stores import memory_stores
from .._trio._lines import read_lines, run_on_standard_streams, write_lines
from .._trio._tasks import spawn
from ._fanout import LISTEN_METHODS, Broadcaster
from ._handshake import Handshake
from ._modern_era import SUBSCRIPTION_ID, ModernTransport
from ._runner import RequestRunner

logger = logging.getLogger("trio_mcp.stdio")

#: The longest line read: far above any real message, and a runaway line can't
#: take the memory.
MAX_LINE_BYTES: Final = 16 * MiB
#: How long requests still running at the end of the input may take: the
#: official clients wait 2 s after closing our stdin before they terminate us.
DRAIN_S: Final = 1.0
#: Lines waiting for the writer; beyond, a request's messages wait for room and
#: a server notification is dropped (and logged).
OUTGOING_LINES: Final = 256
#: The version a session has until its initialize names one (falsy).
_NOT_NEGOTIATED: Final = ""


class _StdioStream:
    """Where one request's messages go (the runner's `RequestStream`): the writer's queue."""

    __slots__ = ("session", "version", "cancel_scope", "_send")

    def __init__(
        self,
        session: Session,
        version: str,
        cancel_scope: trio.CancelScope,
        send: trio.MemorySendChannel[bytes],
    ) -> None:
        self.session: Session | None = session
        self.version = version
        self.cancel_scope = cancel_scope
        self._send = send

    async def emit(self, data: bytes) -> None:
        await self._send.send(data)

    async def close_connection(self) -> None:
        """Nothing to end: every message of the connection shares the output."""


class _Listen:
    """One subscriptions/listen subscription: what it honours, what ends it."""

    __slots__ = ("honored", "uris", "tag", "scope", "by_client")

    def __init__(self, id: RequestId, honored: dict[str, Any]) -> None:
        self.honored = honored
        self.uris = frozenset(honored.get("resourceSubscriptions", ()))
        #: The ``_meta`` every message of the subscription carries.
        self.tag = {SUBSCRIPTION_ID: id}
        self.scope = trio.CancelScope()
        #: Ended by the client's notifications/cancelled: no final response then.
        self.by_client = False

    def wants(self, flag: str, uri: str | None) -> bool:
        return uri in self.uris if uri is not None else bool(self.honored.get(flag))


class StdioTransport:
    """Serves one `Server` to one client over stdio (see the module docstring);
    one `serve` per transport."""

    __slots__ = (
        "app",
        "config",
        "max_line_bytes",
        "sessions",
        "runner",
        "handshake",
        "modern",
        "session",
        "_listens",
        "_send",
        "_receive",
        "_requests",
    )

    def __init__(
        self, app: Server, config: MCPConfig | None = None, max_line_bytes: int = MAX_LINE_BYTES
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.app = app
        self.config = config = config or MCPConfig()
        self.max_line_bytes = max_line_bytes
        stores = memory_stores(config, grace_s=0.0)  # (no sweeper: the session lasts the run)
        self.sessions = stores.sessions
        sealer = StateSealer(
            [key.encode() for key in config.request_state_keys], config.request_state_ttl_s
        )
        self.runner = RequestRunner(app, config, stores, sealer, transport="pipe")
        self.handshake = Handshake(app, config, stores.sessions)
        # (for its envelope rules, listen params and result decoration; its
        # broadcaster never runs: stdio delivers notifications in `_on_app_event`)
        self.modern = ModernTransport(
            app, config, stores, self.runner, Broadcaster(config, stores), self.handshake
        )
        self.session: Session | None = None
        self._listens: dict[RequestId, _Listen] = {}
        self._send, self._receive = trio.open_memory_channel[bytes](OUTGOING_LINES)
        self._requests: trio.Nursery | None = None

    async def serve(self, stdin: trio.abc.ReceiveStream, stdout: trio.abc.SendStream) -> None:
        """Serve until `stdin` ends (then drain) or `stdout` breaks; closes `stdout`."""
        app = self.app
        session = await self.sessions.create(None, _NOT_NEGOTIATED, {}, {}, owner="stdio")
        self.session = session
        try:
            async with contextlib.AsyncExitStack() as stack:
                if app.lifespan is not None:
                    state = await stack.enter_async_context(app.lifespan(app))
                    self.runner.lifespan_state = state
                async with trio.open_nursery() as nursery:
                    timeout, gone = self.config.http.write_timeout_s, nursery.cancel_scope.cancel
                    spawn(nursery, "the writer", write_lines, self._receive, stdout, timeout, gone)
                    app.listeners.append(self._on_app_event)
                    try:
                        async with trio.open_nursery() as requests:
                            self._requests = requests
                            await read_lines(stdin, self.max_line_bytes, self._take)
                            for listen in list(self._listens.values()):
                                listen.scope.cancel()
                            requests.cancel_scope.deadline = trio.current_time() + DRAIN_S
                    finally:
                        self._requests = None
                        app.listeners.remove(self._on_app_event)
                        self._send.close()  # the writer ends once what is queued is out
                        nursery.cancel_scope.deadline = trio.current_time() + DRAIN_S
        finally:
            self.runner.lifespan_state = None
            self.runner.requests.release(session.id)
            with trio.CancelScope(shield=True):
                await self.sessions.delete(session.id)

    # ---- input ---------------------------------------------------------------

    async def _take(self, line: bytes | None) -> None:
        """One line (None: one too long, skipped): its messages handled, or its error answered."""
        try:
            if line is None:
                limit = self.max_line_bytes
                raise MCPError(
                    INVALID_REQUEST, f"Invalid request: a line longer than {limit} bytes"
                )
            messages, batch = decode_body(line, allow_batch=True)
            if batch and self._session().protocol_version != BATCH_VERSION:
                raise MCPError(INVALID_REQUEST, "Invalid request: batches are not supported")
        except MCPError as exc:
            await self._send.send(error_bytes(None, exc))
            return
        requests: list[RPCRequest | Invalid] = []
        for message in messages:
            if type(message) is RPCResponse:
                self.runner.resolve(message, self._session())
            elif type(message) is Notification:
                self._notice(message)
            elif type(message) is RPCRequest or type(message) is Invalid:
                requests.append(message)
        if batch:
            if requests:
                assert self._requests is not None
                spawn(self._requests, "a stdio batch", self._answer_batch, requests)
            return
        if requests:
            request = requests[0]
            assert type(request) is RPCRequest
            await self._request(request)

    def _notice(self, message: Notification) -> None:
        """A notification from the client: a cancellation ends a listen or a request."""
        if message.method == "notifications/cancelled":
            named = message.params.get("requestId")
            listen = self._listens.get(named) if isinstance(named, str | int) else None
            if listen is not None:
                listen.by_client = True
                listen.scope.cancel()
        self.runner.notify(message, self._session())

    async def _request(self, message: RPCRequest) -> None:
        """Answer an initialize now; start any other request in a task of its own."""
        try:
            if message.method == "initialize" and self.config.eras != "modern":
                session = self._session()
                if session.protocol_version != _NOT_NEGOTIATED:
                    raise MCPError(INVALID_REQUEST, "Invalid request: already initialized")
                answer = await self.handshake.initialize_session(session.id, message)
                await self._send.send(answer_bytes(answer))
                return
            envelope = self._admit(message)
        except MCPError as exc:
            await self._send.send(error_bytes(message.id, exc))
            return
        assert self._requests is not None
        if envelope is not None and message.method == "subscriptions/listen":
            spawn(self._requests, "a stdio subscription", self._listen, message)
        else:
            what = f"the stdio request {message.method}"
            spawn(self._requests, what, self._answer, message, envelope)

    def _admit(self, message: RPCRequest) -> Envelope | None:
        """A request's 2026-07-28 envelope (None for the 2025 revisions), or
        the MCPError that refuses it before it runs."""
        method, params = message.method, message.params
        eras = self.config.eras
        if not is_modern(None, params):
            if eras == "modern":
                asked = params.get("protocolVersion")
                data = {"supported": list(MODERN_VERSIONS), "requested": asked}
                raise MCPError(UNSUPPORTED_PROTOCOL_VERSION, "2026-07-28 only here", data)
            if method == "initialize":  # (a lone one is answered in `_request`)
                raise MCPError(INVALID_REQUEST, "Invalid request: initialize can't be batched")
            if self._session().protocol_version == _NOT_NEGOTIATED and method != "ping":
                raise MCPError(INVALID_REQUEST, "Invalid request: send initialize first")
            return None
        if eras == "legacy":  # (not a modern error: a dual-era client falls back)
            raise MCPError(
                INVALID_REQUEST, "Invalid request: this server speaks the 2025 revisions"
            )
        try:
            envelope = check_envelope(method, params, None)
        except Rejection as rejection:
            raise rejection.error from None
        if method != "subscriptions/listen" and method not in self.runner.dispatch.modern_methods():
            raise MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return envelope

    # ---- running requests -------------------------------------------------------

    async def _answer(self, message: RPCRequest, envelope: Envelope | None) -> None:
        answer = await self._run(message, envelope)
        if answer is not None:
            await self._send.send(answer_bytes(answer))

    async def _answer_batch(self, messages: list[RPCRequest | Invalid]) -> None:
        """A 2025-03-26 batch: its requests one after another, one answer for all."""
        answers = []
        for message in messages:
            if type(message) is Invalid:
                answers.append(error_message(message.id, message.error))
                continue
            assert type(message) is RPCRequest
            try:
                answer = await self._run(message, self._admit(message))
            except MCPError as exc:
                answer = error_message(message.id, exc)
            if answer is not None:
                answers.append(answer)
        if answers:
            await self._send.send(answer_bytes(answers))

    async def _run(self, message: RPCRequest, envelope: Envelope | None) -> dict[str, Any] | None:
        """The answer to one request; None when the client cancelled it (it
        wants none). Past the request time limit it is ended and answered -32603."""
        runner = self.runner
        if runner.app.authorize is not None and await runner.denied([message], None):
            return error_message(message.id, MCPError(INVALID_REQUEST, FORBIDDEN))
        session = self._session()
        version = envelope.version if envelope is not None else session.protocol_version
        deadline = trio.current_time() + self.config.request_timeout_s
        with trio.CancelScope(deadline=deadline) as scope:
            stream = _StdioStream(session, version, scope, self._send)
            answer = await runner.run(message, stream, [], None, envelope)
            result = answer.get("result")
            if envelope is not None and isinstance(result, dict):
                self.modern.decorate(message.method, result)
            return answer
        if trio.current_time() >= deadline:
            return runner.overdue_answer(message)
        return None

    async def _listen(self, message: RPCRequest) -> None:
        """One subscriptions/listen: its acknowledgement, the notifications it
        wants (sent by `_on_app_event`), and its end."""
        request_id, listens = message.id, self._listens
        try:
            if request_id in listens or len(listens) >= self.config.max_requests_per_session:
                raise too_many(request_id, "Too many requests: this connection listens enough")
            listen = _Listen(request_id, self.modern.honored(message))
        except Rejection as rejection:
            await self._send.send(error_bytes(request_id, rejection.error))
            return
        params = {"_meta": listen.tag, "notifications": listen.honored}
        await self._send.send(
            notification_bytes("notifications/subscriptions/acknowledged", params)
        )
        listens[request_id] = listen  # (after the acknowledgement: nothing precedes it)
        try:
            with listen.scope:
                await trio.sleep_forever()
        finally:
            del listens[request_id]
        if not listen.by_client:  # the server ended it: the response says so
            result = {"resultType": "complete", "_meta": listen.tag}
            await self._send.send(dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))

    # ---- output --------------------------------------------------------------

    def _on_app_event(self, method: str, params: dict[str, Any], uri: str | None) -> None:
        """A server notification (``Server.listeners``): to the session if it
        initialized and wants it, and to each listen subscription that asked."""
        session = self._session()
        if session.protocol_version and _session_wants(session, method, params, uri):
            self._post(method, notification_bytes(method, params))
        flag = LISTEN_METHODS.get(method)
        if flag is not None:
            for listen in self._listens.values():
                if listen.wants(flag, uri):
                    self._post(method, notification_bytes(method, {**params, "_meta": listen.tag}))

    def _post(self, method: str, data: bytes) -> None:
        try:
            self._send.send_nowait(data)
        except trio.WouldBlock:
            logger.warning("the output is full: dropped %s", method)
        except trio.ClosedResourceError:
            pass  # (serving has ended)

    def _session(self) -> Session:
        """The session's current record (the memory store answers at once)."""
        assert self.session is not None
        return self.sessions.get_nowait(self.session.id) or self.session


def _session_wants(session: Session, method: str, params: dict[str, Any], uri: str | None) -> bool:
    """Whether a 2025 session gets a server notification: a log message at or
    above its level, an update of a resource it subscribed to, a list change."""
    if method == "notifications/message":
        level = session.log_level
        return level is None or LOG_LEVELS[params["level"]] >= LOG_LEVELS[level]
    return uri is None or uri in session.subscriptions


async def serve_stdio(
    app: Server,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    config: MCPConfig | None = None,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serve `app` to one client that writes to `stdin` and reads `stdout`
    (newline-delimited JSON-RPC), until `stdin` ends; `stdout` is closed after."""
    await StdioTransport(app, config, max_line_bytes).serve(stdin, stdout)


def run_stdio(
    app: Server, config: MCPConfig | None = None, *, max_line_bytes: int = MAX_LINE_BYTES
) -> None:
    """Serve `app` on this process's stdin and stdout until stdin ends (POSIX).
    While it serves, descriptor 1 is stderr, so a stray ``print`` cannot
    corrupt the protocol; logging is the caller's to send to stderr."""
    logger.info("serving %s on stdin and stdout", app.name)
    run_on_standard_streams(partial(serve_stdio, app, config=config, max_line_bytes=max_line_bytes))
    logger.info("the input ended: done")
