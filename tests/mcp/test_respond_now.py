"""`MCPEndpoint.respond_now`: the POSTs it answers get the answer awaiting the
endpoint gives, and every other request is left to the endpoint (None)."""

from __future__ import annotations

import pytest
from _support import initialize_body, mcp_post
from mcp_fixtures import everything

from trio_mcp import DeferredResponse, MCPConfig, Request, Response, ServerConfig
from trio_mcp._http._connection import HTTP11Connection
from trio_mcp._mcp._endpoint import MCPEndpoint


def parsed(raw: bytes) -> Request:
    http = HTTP11Connection(ServerConfig())
    http.receive_data(raw)
    request = http.next_event()
    assert isinstance(request, Request)
    return request


def comparable(response: Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and body; the session id differs between two initializes."""
    headers = [(name, value) for name, value in response.headers if name != b"mcp-session-id"]
    return response.status, headers, response.body


TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ANSWERED_NOW = {
    "initialize": mcp_post(initialize_body()),
    "initialize from an allowed origin": mcp_post(
        initialize_body(), extra=[(b"Origin", b"http://localhost:5173")]
    ),
    "origin refused": mcp_post(initialize_body(), extra=[(b"Origin", b"https://evil.example")]),
    "not acceptable": mcp_post(initialize_body(), accept=b"text/html"),
    "not JSON": mcp_post(initialize_body(), content_type=b"text/plain"),
    "broken JSON": mcp_post(b"{nope"),
    "no session": mcp_post(TOOLS_LIST, version="2025-11-25"),
    "unknown session": mcp_post(TOOLS_LIST, session="x" * 32, version="2025-11-25"),
    "notification": mcp_post({"jsonrpc": "2.0", "method": "notifications/initialized"}),
}


@pytest.mark.parametrize("raw", list(ANSWERED_NOW.values()), ids=list(ANSWERED_NOW))
async def test_respond_now_answers_as_awaiting_the_endpoint_does(raw: bytes) -> None:
    endpoint = MCPEndpoint(everything, MCPConfig())
    async with endpoint.running():
        now = endpoint.respond_now(parsed(raw))
        awaited = await endpoint(parsed(raw))
    assert type(now) is Response
    assert type(awaited) is Response
    assert comparable(now) == comparable(awaited)


async def test_respond_now_defers_a_call_as_the_endpoint_does() -> None:
    endpoint = MCPEndpoint(everything, MCPConfig())
    async with endpoint.running():
        hello = endpoint.respond_now(parsed(mcp_post(initialize_body())))
        assert type(hello) is Response
        session = dict(hello.headers)[b"mcp-session-id"].decode()
        call = parsed(mcp_post(TOOLS_LIST, session=session, version="2025-11-25"))
        assert type(endpoint.respond_now(call)) is DeferredResponse


NOT_NOW = {
    "GET": b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n",
    "DELETE": b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "OPTIONS": b"OPTIONS /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "another path": mcp_post(initialize_body(), path=b"/other"),
    "the 2024-11-05 messages path": mcp_post(TOOLS_LIST, path=b"/messages?session_id=x"),
}


@pytest.mark.parametrize("raw", list(NOT_NOW.values()), ids=list(NOT_NOW))
def test_respond_now_leaves_other_requests_to_the_endpoint(raw: bytes) -> None:
    assert MCPEndpoint(everything, MCPConfig()).respond_now(parsed(raw)) is None


def test_respond_now_leaves_every_request_to_an_authenticate_hook() -> None:
    async def anyone(request: Request) -> object:
        return "someone"

    endpoint = MCPEndpoint(everything, MCPConfig(), authenticate=anyone)
    assert endpoint.respond_now(parsed(mcp_post(initialize_body()))) is None
