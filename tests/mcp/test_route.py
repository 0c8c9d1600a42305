"""`MCPEndpoint.route` answers without waiting: what it can answer at once is a
`Response`; whatever waits (authentication, a call, a stream) is a
`DeferredResponse`. With an authenticate hook that lets everyone in, every
answer is the same as without one, only deferred."""

from __future__ import annotations

import pytest
from _stores_copying import copying_stores
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


class Recorder:
    """A writer that keeps the one full response a deferred answer gives."""

    def __init__(self) -> None:
        self.response: Response | None = None
        self.broken = False
        self.started = False

    async def respond(self, response: Response) -> None:
        assert self.response is None
        self.response = response


async def answered(response: Response | DeferredResponse) -> Response:
    if type(response) is Response:
        return response
    assert type(response) is DeferredResponse
    recorder = Recorder()
    await response.respond(recorder)  # type: ignore[arg-type]
    assert recorder.response is not None
    return recorder.response


TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ANSWERED_AT_ONCE = {
    "initialize": mcp_post(initialize_body()),
    "initialize from an allowed origin": mcp_post(
        initialize_body(), extra=[(b"Origin", b"http://localhost:5173")]
    ),
    "unknown session": mcp_post(TOOLS_LIST, session="x" * 32, version="2025-11-25"),
    "origin refused": mcp_post(initialize_body(), extra=[(b"Origin", b"https://evil.example")]),
    "not acceptable": mcp_post(initialize_body(), accept=b"text/html"),
    "not JSON": mcp_post(initialize_body(), content_type=b"text/plain"),
    "broken JSON": mcp_post(b"{nope"),
    "no session": mcp_post(TOOLS_LIST, version="2025-11-25"),
    "notification": mcp_post({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    "OPTIONS": b"OPTIONS /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "another path": mcp_post(initialize_body(), path=b"/other"),
}


@pytest.mark.parametrize("raw", list(ANSWERED_AT_ONCE.values()), ids=list(ANSWERED_AT_ONCE))
async def test_route_answers_at_once_and_a_hook_only_defers(raw: bytes) -> None:
    async def anyone(request: Request) -> object:
        return "someone"

    plain = MCPEndpoint(everything, MCPConfig())
    hooked = MCPEndpoint(everything, MCPConfig(), authenticate=anyone)
    async with plain.running(), hooked.running():
        now = plain.route(parsed(raw))
        later = hooked.route(parsed(raw))
        assert type(now) is Response
        assert comparable(await answered(later)) == comparable(now)


@pytest.mark.parametrize("raw", list(ANSWERED_AT_ONCE.values()), ids=list(ANSWERED_AT_ONCE))
async def test_with_a_store_that_waits_the_same_answers_are_deferred(raw: bytes) -> None:
    config = MCPConfig()
    plain = MCPEndpoint(everything, config)
    waiting = MCPEndpoint(everything, config, stores=copying_stores(config))
    async with plain.running(), waiting.running():
        now = plain.route(parsed(raw))
        later = waiting.route(parsed(raw))
        assert type(now) is Response
        assert comparable(await answered(later)) == comparable(now)


async def test_a_call_is_deferred() -> None:
    endpoint = MCPEndpoint(everything, MCPConfig())
    async with endpoint.running():
        hello = await answered(endpoint.route(parsed(mcp_post(initialize_body()))))
        session = dict(hello.headers)[b"mcp-session-id"].decode()
        call = parsed(mcp_post(TOOLS_LIST, session=session, version="2025-11-25"))
        assert type(endpoint.route(call)) is DeferredResponse


DEFERRED = {
    "GET": b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n",
    "DELETE": b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "GET /sse": b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n",
}


@pytest.mark.parametrize("raw", list(DEFERRED.values()), ids=list(DEFERRED))
async def test_streams_and_ends_are_deferred_with_an_authenticate_hook(raw: bytes) -> None:
    async def nobody(request: Request) -> object:
        return None

    endpoint = MCPEndpoint(everything, MCPConfig(), authenticate=nobody)
    async with endpoint.running():
        response = endpoint.route(parsed(raw))
        assert type(response) is DeferredResponse
        refused = await answered(response)
    assert refused.status == 401
    assert (b"www-authenticate", b"Bearer") in refused.headers


def test_every_post_waits_for_an_authenticate_hook() -> None:
    async def anyone(request: Request) -> object:
        return "someone"

    endpoint = MCPEndpoint(everything, MCPConfig(), authenticate=anyone)
    assert type(endpoint.route(parsed(mcp_post(initialize_body())))) is DeferredResponse
