"""Helpers for tests that talk HTTP to the server over trio streams.

Responses are read with h11 as the client, so our framing is checked by an
independent implementation.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import h11
import orjson
import trio

from trio_mcp import HTTPServer, Request, Response, ServerConfig, serve

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@contextlib.contextmanager
def cycle_garbage() -> Iterator[set[str]]:
    """The type names of what only the cycle collector would free of what
    the block left behind (the collector is off meanwhile): filled at exit."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # (what a collection finds is kept, to be looked at)
    left: set[str] = set()
    try:
        yield left
        gc.collect()
        left.update(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Reply:
    status: int
    headers: dict[bytes, bytes]
    body: bytes
    chunks: list[bytes] = field(default_factory=list)

    def header(self, name: bytes) -> bytes | None:
        return self.headers.get(name)


class Client:
    """Reads HTTP/1.1 responses from a trio stream; requests are sent as raw bytes."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.eof = False

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stream.aclose()

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_reply(self, head: bool = False) -> Reply:
        """One response; ``head=True`` when it answers a HEAD request."""
        # h11 as a client needs to know the request; a fake one of the right method.
        if self.h11.our_state is h11.IDLE:
            self.h11.send(
                h11.Request(
                    method="HEAD" if head else "POST",
                    target="/",
                    headers=[("Host", "x"), ("Content-Length", "0")],
                )
            )
            self.h11.send(h11.EndOfMessage())
        status = 0
        headers: dict[bytes, bytes] = {}
        chunks: list[bytes] = []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.stream.receive_some(65536)
                if not data:
                    self.eof = True
                self.h11.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {}
                for name, value in event.headers:
                    assert name not in headers, f"duplicate response header {name!r}"
                    headers[name] = value
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise EOFError("connection closed before a complete response")
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        return Reply(status, headers, b"".join(chunks), chunks)

    async def read_until_eof(self) -> bytes:
        data = bytearray()
        while True:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                self.eof = True
                return bytes(data)
            data += chunk


def post(
    body: bytes = b"{}", path: bytes = b"/mcp", extra: bytes = b"", version: bytes = b"1.1"
) -> bytes:
    return (
        b"POST " + path + b" HTTP/" + version + b"\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n"
        % len(body)
        + extra
        + b"\r\n"
        + body
    )


async def connect(port: int) -> Client:
    """A client on a fresh loopback connection."""
    return Client(await trio.open_tcp_stream("127.0.0.1", port))


async def settled() -> None:
    """Until every task is blocked and no server's hostile work waits for its
    turn. The turn keeper (``_trio/_turns.py``) takes each idle moment while
    work waits (it waits for idle with no cushion); this waits for idle with
    a cushion, so it wakes only once the keeper has nothing left to give."""
    await trio.testing.wait_all_tasks_blocked(0.001)


async def exchange_and_close(port: int, data: bytes) -> Reply:
    """Send raw bytes on a new connection; the reply, checked to be followed by a close."""
    client = await connect(port)
    try:
        await client.send(data)
        reply = await client.read_reply()
        assert reply.header(b"connection") == b"close", reply
        assert client.eof or await client.read_until_eof() == b"", "server did not close"
        return reply
    finally:
        await client.stream.aclose()


async def still_serving(port: int) -> None:
    """A new connection gets a normal answer."""
    client = await connect(port)
    try:
        await client.send(post(b'{"still":"serving"}'))
        reply = await client.read_reply()
        assert (reply.status, reply.body) == (200, b'{"still":"serving"}')
    finally:
        await client.stream.aclose()


async def ok_handler(request: Request) -> Response:
    """Answers every request 200 with the text ``ok``."""
    return Response(200, [(b"content-type", b"text/plain")], b"ok")


async def start_ok_server(nursery: trio.Nursery, **config: object) -> HTTPServer:
    """`ok_handler` served on 127.0.0.1 at a free port, with `config`."""
    settings = ServerConfig(port=0, **config)  # type: ignore[arg-type]
    server: HTTPServer = await nursery.start(serve, ok_handler, settings)
    return server


# ---- MCP over raw HTTP ------------------------------------------------------

MCP_ACCEPT = b"application/json, text/event-stream"


def mcp_post(
    body: bytes | dict | list,
    *,
    session: str | None = None,
    version: str | None = None,
    accept: bytes | None = MCP_ACCEPT,
    content_type: bytes | None = b"application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
    path: bytes = b"/mcp",
) -> bytes:
    """The bytes of a POST to the MCP endpoint."""
    import orjson

    data = body if isinstance(body, bytes) else orjson.dumps(body)
    lines = [b"POST " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    if accept is not None:
        lines.append(b"Accept: " + accept)
    if content_type is not None:
        lines.append(b"Content-Type: " + content_type)
    if session is not None:
        lines.append(b"Mcp-Session-Id: " + session.encode())
    if version is not None:
        lines.append(b"MCP-Protocol-Version: " + version.encode())
    for name, value in extra or []:
        lines.append(name + b": " + value)
    lines.append(b"Content-Length: %d" % len(data))
    return b"\r\n".join(lines) + b"\r\n\r\n" + data


def sse_messages(body: bytes) -> list[object]:
    """The JSON data of each event in an SSE body."""
    import orjson

    messages = []
    for event in body.split(b"\n\n"):
        data = [line[6:] for line in event.split(b"\n") if line.startswith(b"data: ")]
        if data and any(data):  # events with empty data only prime the stream (SEP-1699)
            messages.append(orjson.loads(b"\n".join(data)))
    return messages


def initialize_body(version: str = "2025-11-25", id: int = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


class EventReader:
    """Reads SSE events (id, data) from a streamed response on one connection."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.pending = b""
        self.ended = False

    async def head(self, request: bytes) -> h11.Response:
        await self.client.send(request)
        while True:
            event = self.client.h11.next_event()
            if event is h11.NEED_DATA:
                self.client.h11.receive_data(await self.client.stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                return event

    async def event(self) -> tuple[str | None, bytes, bytes]:
        """The next event or comment: (id, data, raw)."""
        while b"\n\n" not in self.pending:
            event = self.client.h11.next_event()
            if event is h11.NEED_DATA:
                self.client.h11.receive_data(await self.client.stream.receive_some(65536))
            elif isinstance(event, h11.Data):
                self.pending += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.ended = True
                raise EOFError("the stream ended")
        raw, self.pending = self.pending.split(b"\n\n", 1)
        event_id, data = None, []
        for line in raw.split(b"\n"):
            if line.startswith(b"id: "):
                event_id = line[4:].decode()
            elif line.startswith(b"data: "):
                data.append(line[6:])
        return event_id, b"\n".join(data), raw

    async def message(self) -> tuple[str | None, dict]:
        """The next event carrying a JSON-RPC message (skips comments and priming)."""
        while True:
            event_id, data, _ = await self.event()
            if data:
                return event_id, orjson.loads(data)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def connect_when_up(port: int) -> Client:
    """Connect to a server that is still starting (callers bound the wait)."""
    while True:
        try:
            return await connect(port)
        except OSError:
            await trio.sleep(0.05)


@contextlib.contextmanager
def server_process(
    *args: str, env: Mapping[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``python ARGS --port P`` on a free port P (in `env`, if given), its
    output piped; killed on exit if it is still running."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *args, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


class MCP:
    """One keep-alive connection to the endpoint, speaking raw HTTP."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.session: str | None = None
        self.version: str | None = None

    async def post(self, body: bytes | dict | list, **kwargs: object) -> Reply:
        kwargs.setdefault("session", self.session)
        kwargs.setdefault("version", self.version)
        await self.client.send(mcp_post(body, **kwargs))  # type: ignore[arg-type]
        with trio.fail_after(10):
            return await self.client.read_reply()

    async def initialize(self, version: str = "2025-11-25") -> dict:
        reply = await self.post(initialize_body(version), session=None, version=None)
        assert reply.status == 200, reply.body
        self.session = reply.header(b"mcp-session-id").decode()
        self.version = orjson.loads(reply.body)["result"]["protocolVersion"]
        ack = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert ack.status == 202
        return orjson.loads(reply.body)

    async def call(self, method: str, params: dict | None = None, id: int = 7) -> dict:
        body: dict = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            body["params"] = params
        reply = await self.post(body)
        assert reply.status == 200, reply.body
        if reply.header(b"content-type") == b"text/event-stream":
            return sse_messages(reply.body)[-1]  # type: ignore[return-value]
        return orjson.loads(reply.body)


# ---- 2026-07-28 --------------------------------------------------------------

MODERN_VERSION = "2026-07-28"
V = MODERN_VERSION
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def tool_call(name: str, id: int = 1, progress: bool = False) -> dict:
    """A tools/call request of `name` with no arguments (with a progress
    token: its answer comes as an event stream)."""
    params: dict = {"name": name, "arguments": {}}
    if progress:
        params["_meta"] = {"progressToken": "p"}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def modern_body(
    method: str, params: dict | None = None, *, id: int = 1, meta: dict | None = None
) -> dict:
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        **(meta or {}),
    }
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def modern_headers(body: dict, **override: bytes | None) -> list[tuple[bytes, bytes]]:
    headers = {b"Mcp-Method": body["method"].encode()}
    name_param = NAMED.get(body["method"])
    if name_param and name_param in body["params"]:
        headers[b"Mcp-Name"] = body["params"][name_param].encode()
    for name, value in override.items():
        headers[name.replace("_", "-").encode()] = value  # type: ignore[assignment]
    return [(k, v) for k, v in headers.items() if v is not None]


async def modern_call(
    port: int, body: dict | bytes, version: str | None = V, extra=None, session: str | None = None
):
    if extra is None and isinstance(body, dict):
        extra = modern_headers(body)
    async with await connect(port) as client:
        await client.send(mcp_post(body, version=version, extra=extra, session=session))
        with trio.fail_after(10):
            reply = await client.read_reply()
    if reply.header(b"content-type") == b"text/event-stream":
        return reply, sse_messages(reply.body)
    return reply, orjson.loads(reply.body) if reply.body else None


# ---- 2024-11-05 HTTP+SSE -------------------------------------------------------

SSE_GET = b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"


async def open_http_sse(port: int, capabilities: dict | None = None):
    """An HTTP+SSE session, initialized: (stream, its reader, the POST path)."""
    client = await connect(port)
    reader = EventReader(client)
    assert (await reader.head(SSE_GET)).status_code == 200
    _, endpoint, _ = await reader.event()
    body = initialize_body("2024-11-05")
    body["params"]["capabilities"] = capabilities or {}
    await post_message(port, endpoint, body)
    _, answer = await reader.message()
    assert answer["result"]["protocolVersion"] == "2024-11-05"
    await post_message(port, endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return client, reader, endpoint


async def post_message(
    port: int, endpoint: bytes, body: dict | bytes, status: int = 202
) -> dict | None:
    async with await connect(port) as poster:
        await poster.send(mcp_post(body, path=endpoint, accept=None))
        with trio.fail_after(10):
            reply = await poster.read_reply()
    assert reply.status == status, reply.body
    return orjson.loads(reply.body) if status != 202 else None
