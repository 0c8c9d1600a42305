"""How `trio_mcp.testing.Client` talks to an in-process endpoint.

`Wire.exchange` is where a request enters: it opens a connection of its own
(a `trio.testing.memory_stream_pair` whose far end the server serves with
`HTTPServer.handle_stream`, as its accept loop serves a socket), sends the
request's bytes and gives back the `Reply` once its head has arrived. A reply
is framed by the bench's `ResponseReader`, so a chunked event stream is read
as it arrives and its events are handed over one by one: the client acts on a
progress notification, or answers a request from the server, while the
response is still open. One connection per exchange keeps the server's idle
and per-connection limits out of a test's way; closing it when the exchange
ends is how a 2026-07-28 client cancels, and an ordinary end for the rest.

`Conversation` speaks MCP over those exchanges in one protocol revision: the
2025 session's POSTs and GET stream, the 2026-07-28 envelope, headers and
input rounds, and whatever the server sends besides its answers.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import trio
import trio.testing

from ._app._schema import HeaderParam
from ._bench._response import HEAD, ResponseReader, header, sse_events
from ._errors import LocalProtocolError, MCPError, PeerProtocolError
from ._json import dumps, loads
from ._protocol._envelope import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN_VERSIONS,
)
from ._protocol._jsonrpc import METHOD_NOT_FOUND, error_object
from ._sentinel_py import encode_header_value
from ._trio._server import HTTPServer
from ._trio._tasks import spawn

#: ``handler(params)`` answers a request from the server (elicitation/create,
#: sampling/createMessage, roots/list) with its result object.
InputHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
#: ``handler(progress, total, message)``, a function or an async function.
ProgressHandler = Callable[[float, float | None, str | None], object]
#: ``on_event(event_id, data)`` for each event of a stream with an id or data.
EventHandler = Callable[[bytes | None, bytes], Awaitable[None]]

#: What one read takes from the connection.
_RECEIVE_BYTES: Final = 65536
_ACCEPT_BOTH: Final = b"application/json, text/event-stream"
#: The parameter the 2026-07-28 ``Mcp-Name`` header mirrors, per method.
_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
#: Rounds one 2026-07-28 request may take; a server still asking after these
#: is looping, which a test should see rather than wait out.
MAX_INPUT_ROUNDS: Final = 16
#: Times a 2025 POST stream that ended before its answer is resumed with GET
#: (each resume follows a stream the server chose to end: SEP-1699 polling).
MAX_RESUMES: Final = 16


class Reply:
    """One response being read: its head when `Wire.exchange` hands it over,
    then its whole body (`body`) or its events as they come (`read_events`)."""

    __slots__ = ("_stream", "_reader", "_done", "status", "head", "is_sse")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._reader = ResponseReader()
        self._done = False
        self.status = 0
        self.head = b""
        self.is_sse = False

    async def _receive(self) -> None:
        data = await self._stream.receive_some(_RECEIVE_BYTES)
        reader = self._reader
        self._done = reader.feed(bytes(data)) if data else reader.feed_eof()

    async def _read_head(self) -> None:
        reader = self._reader
        # (ends: every read adds bytes or ends the connection, which ends this)
        while reader.state == HEAD and not self._done:
            await self._receive()
        self.status, self.head, self.is_sse = reader.status, reader.head, reader.is_sse

    def header(self, name: bytes) -> bytes | None:
        """The value of the response header `name` (lowercase), or None."""
        return header(self.head, self.head.lower(), name)

    async def body(self) -> bytes:
        """The whole body (an event stream's too, once it ends)."""
        while not self._done:
            await self._receive()
        return self._reader.body

    async def read_events(self, on_event: EventHandler) -> None:
        """Await `on_event` for each event of the stream, as it arrives, until
        the stream ends; a stream cut in the middle ends it too, since a
        client resumes it or gives up on it alike."""
        reader = self._reader
        pending = b""
        while True:  # (ends with the stream, as `_read_head`)
            pending += reader.take_body()
            if self._done:
                pending += reader.body
            end = pending.rfind(b"\n\n")
            if end >= 0:
                for event_id, data in sse_events(pending[:end]):
                    await on_event(event_id, data)
                pending = pending[end + 2 :]
            if self._done:
                return
            try:
                await self._receive()
            except PeerProtocolError:
                return


class Wire:
    """Makes HTTP requests to `server` over in-memory connections (see the
    module docstring); their tasks run in `nursery`."""

    __slots__ = ("server", "nursery", "path", "host", "headers")

    def __init__(
        self,
        server: HTTPServer,
        nursery: trio.Nursery,
        path: str,
        host: str,
        headers: Mapping[str, str],
    ) -> None:
        self.server = server
        self.nursery = nursery
        self.path = path.encode()
        self.host = host.encode()
        #: The client's own headers, sent with every request.
        self.headers = [(name.encode(), value.encode()) for name, value in headers.items()]

    def request_bytes(
        self, method: bytes, headers: list[tuple[bytes, bytes]], body: bytes | None
    ) -> bytes:
        ours = {name.lower() for name, _ in self.headers}
        lines = [method + b" " + self.path + b" HTTP/1.1"]
        if b"host" not in ours:
            lines.append(b"Host: " + self.host)
        lines += [name + b": " + value for name, value in headers if name.lower() not in ours]
        lines += [name + b": " + value for name, value in self.headers]
        if body is not None:
            lines.append(b"Content-Length: %d" % len(body))
        return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")

    @contextlib.asynccontextmanager
    async def exchange(
        self, method: bytes, headers: list[tuple[bytes, bytes]], body: bytes | None = None
    ) -> AsyncIterator[Reply]:
        """Send one request on a new connection; the `Reply` once its head is in.
        The connection closes when the block ends."""
        ours, theirs = trio.testing.memory_stream_pair()
        spawn(self.nursery, "a test client's connection", self.server.handle_stream, theirs)
        try:
            await ours.send_all(self.request_bytes(method, headers, body))
            reply = Reply(ours)
            await reply._read_head()
            yield reply
        finally:
            await ours.aclose()


def post_headers(version: str | None, session: bytes | None = None) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON POST to the endpoint."""
    headers = [(b"Accept", _ACCEPT_BOTH), (b"Content-Type", b"application/json")]
    if version is not None:
        headers.append((b"MCP-Protocol-Version", version.encode()))
    if session is not None:
        headers.append((b"Mcp-Session-Id", session))
    return headers


def stream_headers(
    version: str, session: bytes | None, last_event_id: bytes | None = None
) -> list[tuple[bytes, bytes]]:
    """The headers of a GET that opens (or resumes) a session's event stream."""
    headers = [(b"Accept", b"text/event-stream"), (b"MCP-Protocol-Version", version.encode())]
    if session is not None:
        headers.append((b"Mcp-Session-Id", session))
    if last_event_id is not None:
        headers.append((b"Last-Event-ID", last_event_id))
    return headers


def param_headers(
    header_params: tuple[HeaderParam, ...], arguments: Mapping[str, Any]
) -> list[tuple[bytes, bytes]]:
    """The ``Mcp-Param-*`` headers a 2026-07-28 tools/call carries: the value
    at each annotated argument's path, when present and not null (digest 3.5)."""
    headers = []
    for param in header_params:
        value: Any = arguments
        for key in param.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is None:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        headers.append((param.display.encode(), encode_header_value(text)))
    return headers


def json_answer(status: int, body: bytes) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body (of any status: a refusal's body
    carries its error too)."""
    try:
        answer = loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not ("result" in answer or "error" in answer):
        raise PeerProtocolError(f"HTTP {status}, not a JSON-RPC answer: {body[:200]!r}")
    return answer


def result_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The result of a JSON-RPC response; `MCPError` for an error response."""
    error = answer.get("error")
    if error is not None:
        raise MCPError(error.get("code", 0), error.get("message", ""), error.get("data"))
    result: dict[str, Any] = answer["result"]
    return result


class Conversation:
    """What a test client says and hears, in its protocol revision: requests
    (with the 2026 envelope and headers and input rounds, or in the 2025
    session), the answers on their streams (resumed when cut), and whatever
    else arrives (notifications, requests from the server to answer)."""

    __slots__ = (
        "wire",
        "version",
        "modern",
        "capabilities",
        "client_info",
        "log_level",
        "answerers",
        "session_id",
        "notifications",
        "arrived",
        "progress",
        "tool_headers",
        "listening",
        "_ids",
    )

    def __init__(
        self,
        version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any],
        answerers: dict[str, InputHandler],
        log_level: str | None,
    ) -> None:
        self.wire: Wire | None = None  # (set while the client is open)
        self.version = version
        self.modern = version in MODERN_VERSIONS
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level = log_level
        #: The handler of each kind of request the server may send (or ask for, 2026).
        self.answerers = answerers
        self.session_id: bytes | None = None
        self.notifications: list[dict[str, Any]] = []
        #: Set, and replaced, when a notification arrives.
        self.arrived = trio.Event()
        #: The progress handler of each progress token in use.
        self.progress: dict[str, ProgressHandler] = {}
        #: The x-mcp-header annotations of each tool, from tools/list (2026).
        self.tool_headers: dict[str, tuple[HeaderParam, ...]] = {}
        self.listening: trio.CancelScope | None = None
        self._ids = itertools.count(1)

    def message(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def exchange(
        self, method: bytes, headers: list[tuple[bytes, bytes]], message: object = None
    ) -> contextlib.AbstractAsyncContextManager[Reply]:
        if self.wire is None:
            raise LocalProtocolError("the Client is not open: use it in 'async with'")
        return self.wire.exchange(method, headers, None if message is None else dumps(message))

    async def request(
        self, method: str, params: dict[str, Any], progress: ProgressHandler | None
    ) -> dict[str, Any]:
        """The result of `method` (see `Client.request`)."""
        token = None
        if progress is not None:
            token = f"progress-{next(self._ids)}"
            params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
            self.progress[token] = progress
        try:
            if self.modern:
                return await self._modern_request(method, params)
            message = self.message(method, params)
            headers = post_headers(self.version, self.session_id)
            async with self.exchange(b"POST", headers, message) as reply:
                return result_of(await self.answer(reply, message))
        finally:
            if token is not None:
                del self.progress[token]

    async def post_only(self, message: dict[str, Any]) -> None:
        """POST a notification or a response (2025): the server must accept it."""
        headers = post_headers(self.version, self.session_id)
        async with self.exchange(b"POST", headers, message) as reply:
            body = await reply.body()
        if reply.status != 202:
            raise PeerProtocolError(f"{reply.status} for a posted message: {body[:200]!r}")

    # ---- 2026-07-28 ------------------------------------------------------------

    async def _modern_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        asked = params
        for _ in range(MAX_INPUT_ROUNDS):
            message = self.message(method, self.envelope(asked))
            async with self.exchange(b"POST", self.modern_headers(message), message) as reply:
                result = result_of(await self.answer(reply, message))
            if result.get("resultType") != "input_required":
                return result
            asked = {**params, "inputResponses": await self._inputs(result)}
            if "requestState" in result:
                asked["requestState"] = result["requestState"]
        raise PeerProtocolError(f"{method} still asked for input after {MAX_INPUT_ROUNDS} rounds")

    def envelope(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` with the 2026-07-28 ``_meta`` a request carries."""
        meta = {
            **params.get("_meta", {}),
            META_VERSION: self.version,
            META_CAPABILITIES: self.capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return {**params, "_meta": meta}

    def modern_headers(self, message: dict[str, Any]) -> list[tuple[bytes, bytes]]:
        """The headers of a 2026-07-28 POST: the version, and what mirrors the body."""
        method, params = message["method"], message["params"]
        headers = post_headers(self.version)
        headers.append((b"Mcp-Method", method.encode()))
        name = params.get(_NAMED.get(method, ""))
        if isinstance(name, str):
            headers.append((b"Mcp-Name", encode_header_value(name)))
            arguments = params.get("arguments")
            if method == "tools/call" and isinstance(arguments, dict):
                headers += param_headers(self.tool_headers.get(name, ()), arguments)
        return headers

    async def _inputs(self, result: dict[str, Any]) -> dict[str, Any]:
        answers = {}
        for key, asked in result.get("inputRequests", {}).items():
            answer = self.answerers.get(asked.get("method"))
            if answer is None:
                raise PeerProtocolError(f"the server asked for {asked.get('method')!r} undeclared")
            answers[key] = await answer(asked.get("params", {}))
        return answers

    async def listen(self, flags: dict[str, Any], task_status: trio.TaskStatus[None]) -> None:
        """Hold a subscriptions/listen stream for `flags`; started once acknowledged."""
        message = self.message("subscriptions/listen", self.envelope({"notifications": flags}))
        started = False

        async def on_event(event_id: bytes | None, data: bytes) -> None:
            nonlocal started
            if data:
                notification = loads(data)
                await self.incoming(notification)
                if not started and notification.get("method") == _ACKNOWLEDGED:
                    started = True
                    task_status.started()

        with trio.CancelScope() as self.listening:
            async with self.exchange(b"POST", self.modern_headers(message), message) as reply:
                if not reply.is_sse:
                    result_of(await self.answer(reply, message))
                    raise PeerProtocolError(f"subscriptions/listen answered {reply.status}")
                await reply.read_events(on_event)
        if not started:
            raise PeerProtocolError("the listen stream ended before its acknowledgement")

    # ---- what arrives ------------------------------------------------------------

    async def answer(self, reply: Reply, message: dict[str, Any]) -> dict[str, Any]:
        """The response to `message`: the body of `reply`, or the last event of
        its stream, resumed with GET (2025) if the server ended it early."""
        if not reply.is_sse:
            return json_answer(reply.status, await reply.body())
        request_id = message["id"]
        answers: list[dict[str, Any]] = []
        last_event_id: bytes | None = None

        async def on_event(event_id: bytes | None, data: bytes) -> None:
            nonlocal last_event_id
            last_event_id = event_id or last_event_id
            if data:
                received = loads(data)
                if received.get("id") == request_id and "method" not in received:
                    answers.append(received)
                else:
                    await self.incoming(received)

        await reply.read_events(on_event)
        for _ in range(MAX_RESUMES):
            if answers or last_event_id is None or self.session_id is None:
                break
            headers = stream_headers(self.version, self.session_id, last_event_id)
            async with self.exchange(b"GET", headers) as resumed:
                if not resumed.is_sse:
                    raise PeerProtocolError(f"resuming a stream answered {resumed.status}")
                await resumed.read_events(on_event)
        if not answers:
            raise PeerProtocolError(f"the stream of {message['method']} ended without its answer")
        return answers[0]

    async def incoming(self, message: dict[str, Any]) -> None:
        """A message from the server that answers none of ours."""
        method = message.get("method")
        if not isinstance(method, str):
            return  # (a response to no request of ours: nothing to do)
        if "id" in message:
            await self._answer_server(message)
            return
        self.notifications.append(message)
        self.arrived.set()
        self.arrived = trio.Event()
        params = message.get("params", {})
        handler = self.progress.get(params.get("progressToken"))
        if method == "notifications/progress" and handler is not None:
            done = handler(params.get("progress"), params.get("total"), params.get("message"))
            if inspect.isawaitable(done):
                await done

    async def _answer_server(self, request: dict[str, Any]) -> None:
        """Answer a request from the server (2025) with the handler for its method."""
        answer = self.answerers.get(request["method"])
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            if answer is None:
                raise MCPError(METHOD_NOT_FOUND, f"Method not found: {request['method']}")
            response["result"] = await answer(request.get("params", {}))
        except MCPError as exc:
            response["error"] = error_object(exc)
        await self.post_only(response)

    async def session_stream(self, task_status: trio.TaskStatus[None]) -> None:
        """The session's GET stream: its notifications and requests, until it ends."""

        async def on_event(event_id: bytes | None, data: bytes) -> None:
            if data:
                await self.incoming(loads(data))

        async with self.exchange(b"GET", stream_headers(self.version, self.session_id)) as reply:
            task_status.started()
            if reply.is_sse:  # (else the server serves no GET streams: 405)
                await reply.read_events(on_event)
