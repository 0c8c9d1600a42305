"""The Streamable HTTP endpoint (2025 revisions) over real sockets, request by request."""

from __future__ import annotations

import h11
import orjson
import pytest
import trio
from _support import MCP, Client, Reply, connect, initialize_body, mcp_post, sse_messages

from trio_mcp import Context, MCPError, Server


@pytest.fixture
async def mcp(mcp_port: int):
    async with await connect(mcp_port) as client:
        yield MCP(client)


def error_of(reply: Reply) -> dict:
    assert reply.header(b"content-type") == b"application/json"
    return orjson.loads(reply.body)["error"]


# ---- initialize and sessions ------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),  # counter-offer, never an error
        ("not-a-version", "2025-11-25"),
    ],
)
async def test_initialize_negotiates_the_version(mcp: MCP, offered: str, answered: str) -> None:
    result = (await mcp.initialize(offered))["result"]
    assert result["protocolVersion"] == answered
    assert result["serverInfo"] == {"name": "trio-mcp-everything", "version": "0.1.0"}
    assert set(result["capabilities"]) == {
        "logging",
        "tools",
        "resources",
        "prompts",
        "completions",
    }
    assert "instructions" in result


async def test_session_ids_are_unguessable_visible_ascii(mcp: MCP) -> None:
    ids = set()
    for _ in range(5):
        await mcp.initialize()
        assert mcp.session is not None
        assert all(0x21 <= ord(c) <= 0x7E for c in mcp.session)
        assert len(mcp.session) >= 32
        ids.add(mcp.session)
    assert len(ids) == 5


async def test_request_without_session_is_400(mcp: MCP) -> None:
    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert reply.status == 400
    assert "Mcp-Session-Id" in error_of(reply)["message"]


async def test_unknown_session_is_404(mcp: MCP) -> None:
    reply = await mcp.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session="f" * 32, version="2025-11-25"
    )
    assert reply.status == 404


async def test_other_version_than_the_sessions_is_400(mcp: MCP) -> None:
    await mcp.initialize("2025-11-25")
    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, version="2025-06-18")
    assert reply.status == 400


async def test_unsupported_version_header_is_400(mcp: MCP) -> None:
    await mcp.initialize()
    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, version="1999-01-01")
    assert reply.status == 400


async def test_version_header_may_be_absent_once_the_session_knows(mcp: MCP) -> None:
    await mcp.initialize("2025-06-18")
    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, version=None)
    assert (reply.status, orjson.loads(reply.body)["result"]) == (200, {})


async def test_delete_ends_the_session(mcp: MCP) -> None:
    await mcp.initialize()
    session = mcp.session
    reply = await mcp.client.send(
        b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
        + session.encode()  # type: ignore[union-attr]
        + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    assert (await mcp.client.read_reply()).status == 200
    reply = await mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert reply.status == 404


async def test_sessions_belong_to_their_principal(start_mcp) -> None:
    async def authenticate(request):
        token = request.header(b"authorization")
        return {b"Bearer alice": "alice", b"Bearer bob": "bob"}.get(token)

    server = await start_mcp(authenticate=authenticate)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        # no credentials: 401 with a Bearer challenge
        reply = await mcp.post(initialize_body())
        assert reply.status == 401
        assert reply.header(b"www-authenticate") == b"Bearer"
        reply = await mcp.post(initialize_body(), extra=[(b"Authorization", b"Bearer alice")])
        assert reply.status == 200
        session = reply.header(b"mcp-session-id").decode()
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        as_bob = await mcp.post(
            ping, session=session, version="2025-11-25", extra=[(b"Authorization", b"Bearer bob")]
        )
        assert as_bob.status == 403
        as_alice = await mcp.post(
            ping, session=session, version="2025-11-25", extra=[(b"Authorization", b"Bearer alice")]
        )
        assert as_alice.status == 200


async def test_full_session_table_is_503_with_retry_after(start_mcp) -> None:
    server = await start_mcp(
        max_sessions=2, max_sessions_per_client=2, session_idle_timeout_s=600.0
    )
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        await mcp.initialize()
        reply = await mcp.post(initialize_body(), session=None, version=None)
        assert reply.status == 503
        # when the first session could expire: the idle timeout, and its grace
        assert 600 <= int(reply.header(b"retry-after")) <= 700


async def test_one_client_has_its_share_of_sessions(start_mcp) -> None:
    """One anonymous client once held every session of the table, and every
    other client got 503 with a retry hint that could not come true."""
    server = await start_mcp(max_sessions_per_client=2, session_idle_timeout_s=600.0)
    port = server.ports[0]
    async with await connect(port) as client:
        mcp = MCP(client)
        await mcp.initialize()
        first = mcp.session
        await mcp.initialize()
        reply = await mcp.post(initialize_body(), session=None, version=None)
        assert reply.status == 429
        assert 600 <= int(reply.header(b"retry-after")) <= 700
        error = orjson.loads(reply.body)["error"]
        assert error["code"] == -31429 and error["data"]["retryAfterSeconds"] >= 600
        sock = trio.socket.socket()
        await sock.bind(("127.0.0.2", 0))
        await sock.connect(("127.0.0.1", port))
        async with Client(trio.SocketStream(sock)) as elsewhere:
            await MCP(elsewhere).initialize()  # another address: its own share
        delete = b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
        await client.send(delete + first.encode() + b"\r\n\r\n")
        assert (await client.read_reply()).status == 200
        await mcp.initialize()  # room again


async def test_each_principal_has_its_share_of_sessions(start_mcp) -> None:
    async def authenticate(request):
        return request.header(b"authorization")

    server = await start_mcp(authenticate=authenticate, max_sessions_per_client=1)
    async with await connect(server.ports[0]) as client:
        statuses = []
        for who in (b"alice", b"bob", b"alice"):
            extra = [(b"authorization", who)]
            await client.send(mcp_post(initialize_body(), extra=extra))
            statuses.append((await client.read_reply()).status)
    assert statuses == [200, 200, 429]


async def test_stateless_mode_needs_no_session(start_mcp) -> None:
    server = await start_mcp(stateless=True)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        result = await mcp.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert result["result"]["content"] == [{"type": "text", "text": "hi"}]
        reply = await mcp.post(initialize_body())
        assert reply.header(b"mcp-session-id") is None


# ---- HTTP-level checks ------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        b"application/json",
        b"text/event-stream",
        b"text/html",
        None,
        b"application/json, text/event-stream;q=0",
    ],
)
async def test_accept_must_allow_json_and_sse(mcp: MCP, accept: bytes | None) -> None:
    reply = await mcp.post(initialize_body(), accept=accept)
    assert reply.status == 406


@pytest.mark.parametrize(
    "accept", [b"*/*", b"application/*, text/*", b"text/event-stream, application/json"]
)
async def test_accept_wildcards_count(mcp: MCP, accept: bytes) -> None:
    reply = await mcp.post(initialize_body(), accept=accept)
    assert reply.status == 200


@pytest.mark.parametrize("content_type", [b"text/plain", None, b"application/jsonx"])
async def test_content_type_must_be_json(mcp: MCP, content_type: bytes | None) -> None:
    reply = await mcp.post(initialize_body(), content_type=content_type)
    assert reply.status == 415


async def test_content_type_parameters_are_fine(mcp: MCP) -> None:
    reply = await mcp.post(initialize_body(), content_type=b"Application/JSON; charset=utf-8")
    assert reply.status == 200


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ((b"Origin", b"http://evil.example.com"), 403),
        ((b"Origin", b"null"), 403),
        ((b"Origin", b"http://localhost:5173"), 200),
        ((b"Origin", b"http://127.0.0.1"), 200),
        ((b"Origin", b"http://[::1]:8080"), 200),
    ],
)
async def test_origin_is_checked(mcp: MCP, header: tuple[bytes, bytes], status: int) -> None:
    reply = await mcp.post(initialize_body(), extra=[header])
    assert reply.status == status
    if status == 403:
        assert orjson.loads(reply.body)["id"] is None


async def test_host_is_checked_against_dns_rebinding(mcp_port: int) -> None:
    async with await connect(mcp_port) as client:
        await client.send(
            mcp_post(initialize_body()).replace(b"Host: 127.0.0.1", b"Host: evil.example.com")
        )
        assert (await client.read_reply()).status == 403


async def test_allowed_origins_are_configurable(start_mcp) -> None:
    server = await start_mcp(allowed_origins=("https://app.example",))
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        ok = await mcp.post(initialize_body(), extra=[(b"Origin", b"https://app.example")])
        assert ok.status == 200
        bad = await mcp.post(initialize_body(), extra=[(b"Origin", b"https://other.example")])
        assert bad.status == 403


async def test_other_paths_and_methods(mcp: MCP) -> None:
    assert (await mcp.post(initialize_body(), path=b"/other")).status == 404
    assert (await mcp.post(initialize_body(), path=b"/mcp/")).status == 200  # no redirect
    await mcp.client.send(b"PUT /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
    reply = await mcp.client.read_reply()
    assert reply.status == 405
    assert reply.header(b"allow") is not None


# ---- JSON-RPC bodies ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b'{"a":' * 3000 + b"1" + b"}" * 3000, -32700),
        (b"[]", -32600),
        (b"42", -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600),
    ],
)
async def test_bad_bodies_are_400_with_the_code(mcp: MCP, body: bytes, code: int) -> None:
    await mcp.initialize()
    reply = await mcp.post(body)
    assert reply.status == 400
    assert error_of(reply)["code"] == code


async def test_arrays_are_invalid_outside_2025_03_26(mcp: MCP) -> None:
    await mcp.initialize("2025-11-25")
    reply = await mcp.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert reply.status == 400
    assert error_of(reply)["code"] == -32600


async def test_batches_under_2025_03_26_are_answered_as_an_array(mcp: MCP) -> None:
    await mcp.initialize("2025-03-26")
    reply = await mcp.post(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "b"}},
            },
            {"jsonrpc": "2.0", "id": 3, "method": 5},
        ]
    )
    assert reply.status == 200
    answers = orjson.loads(reply.body)
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[1]["result"]["content"][0]["text"] == "b"
    assert answers[2]["error"]["code"] == -32600


async def test_initialize_is_never_batched(mcp: MCP) -> None:
    reply = await mcp.post([initialize_body("2025-03-26")], version="2025-03-26")
    answers = orjson.loads(reply.body)
    assert answers[0]["error"]["code"] == -32600


async def test_notifications_and_responses_get_202_without_body(mcp: MCP) -> None:
    await mcp.initialize()
    reply = await mcp.post({"jsonrpc": "2.0", "method": "notifications/whatever"})
    assert (reply.status, reply.body) == (202, b"")
    reply = await mcp.post({"jsonrpc": "2.0", "id": 99, "result": {}})
    assert (reply.status, reply.body) == (202, b"")


async def test_unknown_method_is_32601(mcp: MCP) -> None:
    await mcp.initialize()
    answer = await mcp.call("no/such/method")
    assert answer["error"]["code"] == -32601


async def test_second_initialize_in_a_session_is_refused(mcp: MCP) -> None:
    await mcp.initialize()
    answer = await mcp.call("initialize", initialize_body()["params"])
    assert answer["error"]["code"] == -32600


# ---- tools ---------------------------------------------------------------------


async def test_tool_call_answers_json(mcp: MCP) -> None:
    await mcp.initialize()
    reply = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hé"}},
        }
    )
    assert reply.header(b"content-type") == b"application/json"
    assert orjson.loads(reply.body) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"content": [{"type": "text", "text": "hé"}]},
    }


async def test_tool_that_emits_progress_answers_sse(mcp: MCP) -> None:
    await mcp.initialize()
    reply = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "_meta": {"progressToken": "p1"}},
        }
    )
    assert reply.header(b"content-type") == b"text/event-stream"
    assert reply.header(b"cache-control") == b"no-cache"
    assert reply.header(b"x-accel-buffering") == b"no"
    messages = sse_messages(reply.body)
    progress = [m["params"] for m in messages[:-1]]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("p1", 0, 100),
        ("p1", 50, 100),
        ("p1", 100, 100),
    ]
    assert messages[-1]["id"] == 6
    assert messages[-1]["result"]["content"][0]["text"] == "Progress test completed"


async def test_without_progress_token_no_progress_and_plain_json(mcp: MCP) -> None:
    await mcp.initialize()
    reply = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress"},
        }
    )
    assert reply.header(b"content-type") == b"application/json"


async def test_json_response_only_option(start_mcp) -> None:
    server = await start_mcp(json_response_only=True)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        reply = await mcp.post(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": {"name": "test_tool_with_progress", "_meta": {"progressToken": 1}},
            }
        )
        assert reply.header(b"content-type") == b"application/json"
        assert orjson.loads(reply.body)["result"]["content"][0]["text"] == "Progress test completed"


async def test_log_level_filters_client_logging(mcp: MCP) -> None:
    await mcp.initialize()
    assert (await mcp.call("logging/setLevel", {"level": "warning"}))["result"] == {}
    reply = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "test_tool_with_logging"},
        }
    )
    assert reply.header(b"content-type") == b"application/json"  # info messages filtered out
    assert (await mcp.call("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("version", "is_error_result"), [("2025-11-25", True), ("2025-06-18", False)]
)
async def test_invalid_arguments_per_revision(
    mcp: MCP, version: str, is_error_result: bool
) -> None:
    await mcp.initialize(version)
    answer = await mcp.call("tools/call", {"name": "echo", "arguments": {"text": 5}})
    if is_error_result:
        assert answer["result"]["isError"] is True
        assert "text" in answer["result"]["content"][0]["text"]
    else:
        assert answer["error"]["code"] == -32602


async def test_unknown_tool_is_32602(mcp: MCP) -> None:
    await mcp.initialize()
    assert (await mcp.call("tools/call", {"name": "nope"}))["error"]["code"] == -32602


async def test_tool_error_is_an_is_error_result(mcp: MCP) -> None:
    await mcp.initialize()
    result = (await mcp.call("tools/call", {"name": "test_error_handling"}))["result"]
    assert result["isError"] is True


async def test_sync_tool_and_structured_output(mcp: MCP) -> None:
    await mcp.initialize()
    result = (await mcp.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))[
        "result"
    ]
    assert result["structuredContent"] == {"result": 3}
    assert result["content"] == [{"type": "text", "text": "3"}]
    listing = {t["name"]: t for t in (await mcp.call("tools/list"))["result"]["tools"]}
    assert listing["add"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    assert listing["echo"]["inputSchema"] == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to send back"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert listing["echo"]["description"] == "Return the text it is given."
    assert "outputSchema" not in listing["echo"]


# ---- pagination, resources, prompts -------------------------------------------


async def test_pagination_with_opaque_cursors(start_mcp) -> None:
    app = Server("paged", page_size=3)
    for i in range(8):
        app.add_tool(lambda: "x", name=f"t{i}")
    server = await start_mcp(app)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        names, cursor = [], None
        while True:
            result = (await mcp.call("tools/list", {"cursor": cursor} if cursor else {}))["result"]
            names += [t["name"] for t in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
            assert not cursor.isdigit()
        assert names == [f"t{i}" for i in range(8)]
        assert (await mcp.call("tools/list", {"cursor": "garbage"}))["error"]["code"] == -32602


async def test_resources(mcp: MCP) -> None:
    await mcp.initialize()
    listed = (await mcp.call("resources/list"))["result"]["resources"]
    assert listed[0] == {
        "uri": "test://static-text",
        "name": "static_text",
        "description": "A static text resource.",
        "mimeType": "text/plain",
    }
    binary = (await mcp.call("resources/read", {"uri": "test://static-binary"}))["result"]
    assert binary["contents"][0]["mimeType"] == "image/png"
    assert binary["contents"][0]["blob"].startswith("iVBOR")
    read = (await mcp.call("resources/read", {"uri": "test://template/7/data"}))["result"]
    assert read["contents"][0]["uri"] == "test://template/7/data"
    assert orjson.loads(read["contents"][0]["text"])["id"] == "7"
    missing = await mcp.call("resources/read", {"uri": "test://nope"})
    assert missing["error"]["code"] == -32002
    assert missing["error"]["data"] == {"uri": "test://nope"}
    assert (await mcp.call("resources/subscribe", {"uri": "test://static-text"}))["result"] == {}
    assert (await mcp.call("resources/unsubscribe", {"uri": "test://static-text"}))["result"] == {}


async def test_prompts(mcp: MCP) -> None:
    await mcp.initialize()
    listed = {p["name"]: p for p in (await mcp.call("prompts/list"))["result"]["prompts"]}
    assert listed["test_prompt_with_arguments"]["arguments"] == [
        {"name": "arg1", "required": True, "description": "First test argument"},
        {"name": "arg2", "required": True, "description": "Second test argument"},
    ]
    got = (
        await mcp.call(
            "prompts/get",
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": "y"}},
        )
    )["result"]
    assert got["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='x', arg2='y'"},
        }
    ]
    missing = await mcp.call(
        "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}
    )
    assert missing["error"]["code"] == -32602


# ---- cancellation and ids ---------------------------------------------------------


def _slow_app(started: trio.Event, cancelled: trio.Event) -> Server:
    app = Server("slow")

    @app.tool()
    async def slow(ctx: Context) -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    @app.tool()
    async def boom() -> str:
        raise MCPError(-32042, "deliberate", {"why": "test"})

    return app


async def test_cancelled_notification_cancels_the_running_handler(start_mcp, nursery) -> None:
    started, cancelled = trio.Event(), trio.Event()
    server = await start_mcp(_slow_app(started, cancelled))
    port = server.ports[0]
    async with await connect(port) as c1, await connect(port) as c2:
        first, second = MCP(c1), MCP(c2)
        await first.initialize()
        second.session, second.version = first.session, first.version
        replies: list[object] = []

        async def call_slow() -> None:
            try:
                replies.append(
                    await first.post(
                        {
                            "jsonrpc": "2.0",
                            "id": "s",
                            "method": "tools/call",
                            "params": {"name": "slow"},
                        }
                    )
                )
            except (EOFError, h11.RemoteProtocolError):
                replies.append("closed")

        nursery.start_soon(call_slow)
        await started.wait()
        # the same id again while it runs: an immediate error, never a hang
        again = await second.call("tools/call", {"name": "slow"}, id="s")  # type: ignore[arg-type]
        assert again["error"]["code"] == -32600
        ack = await second.post(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}}
        )
        assert ack.status == 202
        with trio.fail_after(5):
            await cancelled.wait()
            while not replies:
                await trio.sleep(0.01)
        # no JSON-RPC response for a cancelled request: its exchange is abandoned
        # and its connection closed (the request was answered on that connection)
        assert replies == ["closed"]


async def test_mcp_error_from_a_tool_is_a_jsonrpc_error(start_mcp) -> None:
    server = await start_mcp(_slow_app(trio.Event(), trio.Event()))
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        answer = await mcp.call("tools/call", {"name": "boom"})
        assert answer["error"] == {"code": -32042, "message": "deliberate", "data": {"why": "test"}}


# ---- CORS ------------------------------------------------------------------------


async def test_cors_preflight_is_answered_before_authentication(start_mcp) -> None:
    async def deny(request):
        return None

    server = await start_mcp(authenticate=deny)
    async with await connect(server.ports[0]) as client:
        await client.send(
            b"OPTIONS /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:5173\r\n"
            b"Access-Control-Request-Method: POST\r\n"
            b"Access-Control-Request-Headers: content-type, mcp-session-id, Mcp-Param-Region\r\n\r\n"
        )
        reply = await client.read_reply()
    assert reply.status == 204
    assert reply.header(b"access-control-allow-origin") == b"http://localhost:5173"
    allowed = reply.header(b"access-control-allow-headers").split(b", ")
    for name in (
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"authorization",
        b"last-event-id",
        b"mcp-param-region",
    ):
        assert name in allowed
    assert b"POST" in reply.header(b"access-control-allow-methods")


async def test_cors_headers_on_answers_and_errors(mcp: MCP) -> None:
    origin = [(b"Origin", b"http://localhost:5173")]
    reply = await mcp.post(initialize_body(), extra=origin)
    assert reply.header(b"access-control-allow-origin") == b"http://localhost:5173"
    assert reply.header(b"access-control-expose-headers") == b"mcp-session-id"
    error = await mcp.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        session="x" * 32,
        version="2025-11-25",
        extra=origin,
    )
    assert error.status == 404
    assert error.header(b"access-control-allow-origin") == b"http://localhost:5173"
    await mcp.initialize()
    streamed = await mcp.post(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "_meta": {"progressToken": 1}},
        },
        extra=origin,
    )
    assert streamed.header(b"content-type") == b"text/event-stream"
    assert streamed.header(b"access-control-allow-origin") == b"http://localhost:5173"
    plain = await mcp.post({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert plain.header(b"access-control-allow-origin") is None  # not a browser request


# ---- lifespan, authorization, registration by lists -------------------------------


async def test_lifespan_wraps_serving_and_reaches_handlers(nursery) -> None:
    from contextlib import asynccontextmanager

    from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp

    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Server):
        events.append("start")
        yield {"db": "pool"}
        events.append("stop")

    app = Server("with-lifespan", lifespan=lifespan)

    @app.tool()
    async def which_db(ctx: Context) -> str:
        return ctx.lifespan["db"]

    cancel = trio.CancelScope()

    async def run(task_status=trio.TASK_STATUS_IGNORED) -> None:
        with cancel:
            await serve_mcp(app, MCPConfig(http=ServerConfig(port=0)), task_status=task_status)

    server: HTTPServer = await nursery.start(run)
    assert events == ["start"]
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        answer = await mcp.call("tools/call", {"name": "which_db"})
        assert answer["result"]["content"][0]["text"] == "pool"
    server.shutdown()
    with trio.fail_after(5):
        while events != ["start", "stop"]:
            await trio.sleep(0.01)


async def test_authorize_hook_refuses_per_method_and_tool(start_mcp) -> None:
    calls: list[tuple[object, str, str | None]] = []

    async def authorize(principal: object, method: str, name: str | None) -> bool:
        calls.append((principal, method, name))
        return not (method == "tools/call" and name == "add")

    async def add(a: int, b: int) -> int:
        return a + b

    async def echo(text: str) -> str:
        return text

    app = Server("guarded", authorize=authorize, tools=[add, echo])
    server = await start_mcp(app)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        refused = await mcp.post(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            }
        )
        assert refused.status == 403
        assert orjson.loads(refused.body)["id"] == 4
        allowed = await mcp.call("tools/call", {"name": "echo", "arguments": {"text": "ok"}})
        assert allowed["result"]["content"][0]["text"] == "ok"
    assert (None, "initialize", None) in calls
    assert (None, "tools/call", "add") in calls


async def test_authorize_hook_answers_keep_cors_and_batches_refuse_per_request(
    start_mcp,
) -> None:
    async def authorize(principal: object, method: str, name: str | None) -> bool:
        return not (method == "tools/call" and name == "add")

    async def add(a: int, b: int) -> int:
        return a + b

    async def echo(text: str) -> str:
        return text

    origin = [(b"Origin", b"http://localhost:5173")]
    server = await start_mcp(Server("guarded", authorize=authorize, tools=[add, echo]))
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        # initialize passes the hook, and its answer still carries CORS and the session
        hello = await mcp.post(initialize_body("2025-03-26"), extra=origin)
        assert hello.status == 200
        assert hello.header(b"access-control-allow-origin") == b"http://localhost:5173"
        assert hello.header(b"access-control-expose-headers") == b"mcp-session-id"
        assert hello.header(b"mcp-session-id") is not None
        await mcp.initialize("2025-03-26")
        add_call = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
        }
        refused = await mcp.post(add_call, extra=origin)
        assert refused.status == 403
        assert refused.header(b"access-control-allow-origin") == b"http://localhost:5173"
        assert refused.header(b"www-authenticate") == b'Bearer error="insufficient_scope"'
        echo_call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "ok"}},
        }
        batch = await mcp.post([add_call, echo_call])
        assert batch.status == 200
        answers = orjson.loads(batch.body)
        assert [a["id"] for a in answers] == [4, 5]
        assert answers[0]["error"]["code"] == -32600
        assert answers[1]["result"]["content"][0]["text"] == "ok"


async def test_registration_by_lists() -> None:
    async def first() -> str:
        return "1"

    def second() -> str:
        return "2"

    async def hello(name: str) -> str:
        return f"hello {name}"

    app = Server("lists", tools=[first, second], prompts=[hello])
    assert list(app.tools) == ["first", "second"]
    assert app.prompts["hello"].listing["arguments"] == [
        {"name": "hello" and "name", "required": True}
    ]


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("tools/call", {"name": 5}, -32602),
        ("tools/call", {}, -32602),
        ("resources/read", {"uri": 7}, -32602),
        ("resources/read", {}, -32602),
        ("resources/subscribe", {"uri": None}, -32602),
        ("prompts/get", {"name": "test_simple_prompt", "arguments": [1]}, -32602),
        ("prompts/get", {"name": ["x"]}, -32602),
        ("logging/setLevel", {"level": 3}, -32602),
        ("tools/list", {"cursor": 12}, -32602),
        ("completion/complete", {"ref": "x", "argument": {}}, -32602),
    ],
)
async def test_wrong_param_types_get_invalid_params(
    mcp: MCP, method: str, params: dict, code: int
) -> None:
    await mcp.initialize()
    answer = await mcp.call(method, params)
    assert answer["error"]["code"] == code


async def test_tool_arguments_of_the_wrong_type(mcp: MCP) -> None:
    await mcp.initialize()
    result = (await mcp.call("tools/call", {"name": "echo", "arguments": [1, 2]}))["result"]
    assert result["isError"] is True


async def test_initialize_without_capabilities_is_invalid_params(mcp: MCP) -> None:
    body = initialize_body()
    del body["params"]["capabilities"]
    reply = await mcp.post(body)
    assert orjson.loads(reply.body)["error"]["code"] == -32602
    assert reply.header(b"mcp-session-id") is None


# ---- requests to the client ---------------------------------------------------------


async def _initialize_with(mcp: MCP, capabilities: dict) -> None:
    body = initialize_body()
    body["params"]["capabilities"] = capabilities
    reply = await mcp.post(body, session=None, version=None)
    mcp.session = reply.header(b"mcp-session-id").decode()
    mcp.version = "2025-11-25"


async def _call_on_stream(client: Client, mcp: MCP, params: dict) -> h11.Response:
    """Send tools/call (id 1) in `mcp`'s session on `client`; the head of its answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    await client.send(mcp_post(body, session=mcp.session, version="2025-11-25"))
    return await _response_head(client)


async def _response_head(client: Client) -> h11.Response:
    """The head of a response whose body (a stream) is still coming."""
    while True:
        event = client.h11.next_event()
        if event is h11.NEED_DATA:
            client.h11.receive_data(await client.stream.receive_some(65536))
        else:
            assert isinstance(event, h11.Response)
            return event


async def _read_event(client: Client) -> dict:
    """Read SSE data from a streamed response until one whole event has arrived."""
    pending = getattr(client, "sse_pending", b"")
    while True:
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            messages = sse_messages(event + b"\n\n")
            if messages:  # skip priming events (an id and empty data)
                client.sse_pending = pending  # type: ignore[attr-defined]
                return messages[0]  # type: ignore[return-value]
        event = client.h11.next_event()
        if event is h11.NEED_DATA:
            client.h11.receive_data(await client.stream.receive_some(65536))
        elif isinstance(event, h11.Data):
            pending += bytes(event.data)


@pytest.mark.parametrize(
    ("tool", "arguments", "method", "answer", "expected"),
    [
        (
            "test_sampling",
            {"prompt": "hi"},
            "sampling/createMessage",
            {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
            "LLM response: 4",
        ),
        (
            "test_elicitation",
            {"message": "who?"},
            "elicitation/create",
            {"action": "accept", "content": {"username": "ann", "email": "a@b"}},
            "User response: action=accept, content={'username': 'ann', 'email': 'a@b'}",
        ),
    ],
)
async def test_tool_asks_the_client_on_its_stream_and_resumes_on_the_answer(
    mcp_port: int, tool: str, arguments: dict, method: str, answer: dict, expected: str
) -> None:
    async with await connect(mcp_port) as c1, await connect(mcp_port) as c2:
        first, second = MCP(c1), MCP(c2)
        await _initialize_with(first, {"sampling": {}, "elicitation": {}})
        second.session, second.version = first.session, first.version
        with trio.fail_after(10):
            # the response head arrives first: an event stream
            head = await _call_on_stream(c1, first, {"name": tool, "arguments": arguments})
            assert isinstance(head, h11.Response)
            assert dict(head.headers)[b"content-type"] == b"text/event-stream"
            asked = await _read_event(c1)
            assert asked["method"] == method
            assert isinstance(asked["id"], int)
            if method == "elicitation/create":
                assert asked["params"]["mode"] == "form"
                assert asked["params"]["message"] == "who?"
            ack = await second.post({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            assert ack.status == 202
            final = await _read_event(c1)
        assert final["id"] == 1
        assert final["result"]["content"][0]["text"] == expected


async def test_asking_without_the_client_capability_fails_fast(mcp: MCP) -> None:
    await _initialize_with(mcp, {})
    with trio.fail_after(5):
        answer = await mcp.call(
            "tools/call", {"name": "test_sampling", "arguments": {"prompt": "x"}}
        )
    assert answer["error"]["code"] == -32600
    assert "sampling" in answer["error"]["message"]


async def test_a_client_that_never_answers_times_out(start_mcp) -> None:
    server = await start_mcp(client_request_timeout_s=0.2)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await _initialize_with(mcp, {"elicitation": {}})
        with trio.fail_after(10):
            answer = await mcp.call(
                "tools/call", {"name": "test_elicitation", "arguments": {"message": "?"}}
            )
        assert answer["error"]["code"] == -32603
        assert "did not answer" in answer["error"]["message"]


async def test_a_client_error_answer_becomes_the_tools_error(mcp_port: int) -> None:
    async with await connect(mcp_port) as c1, await connect(mcp_port) as c2:
        first, second = MCP(c1), MCP(c2)
        await _initialize_with(first, {"elicitation": {}})
        second.session, second.version = first.session, first.version
        with trio.fail_after(10):
            await _call_on_stream(
                c1, first, {"name": "test_elicitation", "arguments": {"message": "?"}}
            )
            asked = await _read_event(c1)
            await second.post(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "error": {"code": -1, "message": "user said no"},
                }
            )
            final = await _read_event(c1)
        assert final["error"] == {"code": -1, "message": "user said no"}


async def test_answers_from_another_session_are_ignored(mcp_port: int) -> None:
    async with await connect(mcp_port) as c1, await connect(mcp_port) as c2:
        first, other = MCP(c1), MCP(c2)
        await _initialize_with(first, {"elicitation": {}})
        await _initialize_with(other, {"elicitation": {}})
        with trio.fail_after(10):
            await _call_on_stream(
                c1, first, {"name": "test_elicitation", "arguments": {"message": "?"}}
            )
            asked = await _read_event(c1)
            # the same id from another session must not resolve this one
            await other.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}})
            second = MCP(c2)
            second.session, second.version = first.session, first.version
            await second.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "cancel"}})
            final = await _read_event(c1)
        assert "action=cancel" in final["result"]["content"][0]["text"]


async def test_url_mode_elicitation_and_its_completion(start_mcp, nursery) -> None:
    app = Server("url-mode")

    @app.tool()
    async def connect_account(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in, please", "https://example.test/auth", "el-1")
        await ctx.elicitation_complete("el-1")
        return answer["action"]

    server = await start_mcp(app)
    port = server.ports[0]
    async with await connect(port) as c1, await connect(port) as c2:
        first, second = MCP(c1), MCP(c2)
        await _initialize_with(first, {"elicitation": {"url": {}}})
        second.session, second.version = first.session, first.version
        with trio.fail_after(10):
            await _call_on_stream(c1, first, {"name": "connect_account"})
            asked = await _read_event(c1)
            assert asked["params"] == {
                "mode": "url",
                "message": "Sign in, please",
                "url": "https://example.test/auth",
                "elicitationId": "el-1",
            }
            await second.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}})
            done = await _read_event(c1)
            assert done == {
                "jsonrpc": "2.0",
                "method": "notifications/elicitation/complete",
                "params": {"elicitationId": "el-1"},
            }
            final = await _read_event(c1)
        assert final["result"]["content"][0]["text"] == "accept"


async def test_behind_a_trusted_proxy_each_client_has_its_share(start_mcp) -> None:
    server = await start_mcp(
        max_sessions_per_client=1, http={"forwarded_allow_ips": ("127.0.0.1",)}
    )
    async with await connect(server.ports[0]) as proxy:
        statuses = []
        for client in (b"203.0.113.1", b"203.0.113.2", b"203.0.113.1"):
            extra = [(b"x-forwarded-for", client)]
            await proxy.send(mcp_post(initialize_body(), extra=extra))
            statuses.append((await proxy.read_reply()).status)
    assert statuses == [200, 200, 429]
