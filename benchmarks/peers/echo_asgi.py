"""The echo app of ``examples/echo.py`` as a bare ASGI 3 app (no framework), for load comparisons.

    python -m uvicorn --app-dir benchmarks/peers echo_asgi:app --http httptools --loop uvloop
    PYTHONPATH=benchmarks/peers python -m hypercorn --worker-class trio echo_asgi:app

Same behaviour as the trio-mcp echo server:
- POST /mcp (or /mcp/) answers with the request body, as application/json;
- GET and HEAD answer a small JSON status; OPTIONS answers 204 with Allow;
- other methods get 405 with Allow; other paths 404.

``jsonrpc_app`` (``echo_asgi:jsonrpc_app``, needs orjson) is the floor for an MCP
``tools/call``: it parses the POSTed JSON-RPC request with orjson and answers
the bytes trio-mcp's ``echo`` tool gives in session JSON mode,
``{"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":<text>}]}}``
with ``<text>`` taken from ``params.arguments.text``; no MCP (no sessions, no
header checks, no schema validation). A body it cannot read gets a JSON-RPC
parse error (400).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ALLOWED = b"GET, HEAD, POST, OPTIONS"
_JSON = [(b"content-type", b"application/json")]
_STATUS_BODY = b'{"server":"asgi echo"}'


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    if status != 204:  # a 204 carries no Content-Length
        headers = headers + [(b"content-length", str(len(body)).encode("ascii"))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client went away first."""
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body  # the common case: one message
    parts = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    kind = scope["type"]
    if kind == "lifespan":
        await _lifespan(receive, send)
        return
    if kind != "http":
        return
    path = scope["path"]
    method = scope["method"]
    if path == "*" or scope.get("raw_path") == b"*":
        await _respond(send, 204, [(b"allow", ALLOWED)], b"")
        return
    if path != "/mcp" and path != "/mcp/":
        await _respond(send, 404, [(b"content-type", b"text/plain")], b"not found\n")
        return
    if method == "POST":
        body = await _read_body(receive)
        if body is None:
            return
        await _respond(send, 200, _JSON, body)
    elif method == "GET" or method == "HEAD":
        # For HEAD the servers drop the body and keep the content-length.
        await _respond(send, 200, _JSON, _STATUS_BODY)
    elif method == "OPTIONS":
        await _respond(send, 204, [(b"allow", ALLOWED)], b"")
    else:
        await _respond(
            send,
            405,
            [(b"allow", ALLOWED), (b"content-type", b"text/plain")],
            b"method not allowed\n",
        )


_PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'


def _echo_result(body: bytes) -> tuple[int, bytes]:
    try:
        request = orjson.loads(body)
        text = request["params"]["arguments"]["text"]
        request_id = request["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return 400, _PARSE_ERROR
    content = [{"type": "text", "text": text}]
    return 200, orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": content}})


async def jsonrpc_app(scope: Scope, receive: Receive, send: Send) -> None:
    """POST /mcp: a tools/call echo answered as trio-mcp's echo tool answers it."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
        await app(scope, receive, send)
        return
    body = await _read_body(receive)
    if body is None:
        return
    status, answer = _echo_result(body)
    await _respond(send, status, _JSON, answer)
