"""What one client sends cannot end the server or cost another client its
answers: each case here once ended the process, or answered 500."""

from __future__ import annotations

import logging

import orjson
import pytest
import trio
from _support import (
    MCP,
    SSE_GET,
    EventReader,
    connect,
    initialize_body,
    mcp_post,
    modern_body,
    modern_call,
    open_http_sse,
    post_message,
)

from trio_mcp import MCPError, Server

#: Deeper than orjson writes (it reads 1,024 levels, writes about 255).
TOO_DEEP = 300
UNENCODABLE = "Internal error: the answer cannot be encoded as JSON"


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def nested_json(depth: int) -> bytes:
    """`nested(depth)` as JSON, written by hand (orjson will not write it)."""
    return b"[" * depth + b'"bottom"' + b"]" * depth


def with_value(body: dict, value: bytes) -> bytes:
    """`body` as JSON with raw JSON `value` where it says "VALUE"."""
    return orjson.dumps(body).replace(b'"VALUE"', value)


def deep_app() -> Server:
    """A tool whose error carries what JSON cannot write, beside one that works."""
    app = Server("deep")

    @app.tool()
    def deep() -> str:
        raise MCPError(-32000, "deep", nested(TOO_DEEP))

    @app.tool()
    def echo(text: str) -> str:
        return text

    return app


async def session(port: int) -> MCP:
    """A new 2025-11-25 session on a connection of its own."""
    mcp = MCP(await connect(port))
    await mcp.initialize()
    return mcp


def call_body(name: str, arguments: dict | None = None, id: int = 2) -> dict:
    params = {"name": name, "arguments": arguments or {}}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


# ---- an answer JSON cannot carry ---------------------------------------------------


async def test_http_sse_an_unencodable_answer_is_an_error_for_that_request(start_mcp) -> None:
    server = await start_mcp(deep_app())
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port)
    async with client:
        with trio.fail_after(10):
            await post_message(port, endpoint, call_body("deep", id=2))
            _, answer = await reader.message()
            assert answer == {
                "jsonrpc": "2.0",
                "id": 2,
                "error": {"code": -32603, "message": UNENCODABLE},
            }
            await post_message(port, endpoint, call_body("echo", {"text": "still"}, id=3))
            _, answer = await reader.message()
            assert answer["result"]["content"][0]["text"] == "still"


async def test_sessions_an_unencodable_answer_is_an_error_for_that_request(start_mcp) -> None:
    server = await start_mcp(deep_app())
    mcp = await session(server.ports[0])
    async with mcp.client:
        assert (await mcp.call("tools/call", call_body("deep")["params"]))["error"] == {
            "code": -32603,
            "message": UNENCODABLE,
        }
    batch_session = MCP(await connect(server.ports[0]))  # (batches: 2025-03-26)
    await batch_session.initialize("2025-03-26")
    async with batch_session.client:
        batch = [call_body("deep", id=4), call_body("echo", {"text": "b"}, id=5)]
        reply = await batch_session.post(batch)
        assert reply.status == 200
        first, second = orjson.loads(reply.body)
        assert (first["id"], first["error"]["message"]) == (4, UNENCODABLE)
        assert second["result"]["content"][0]["text"] == "b"


async def test_modern_an_unencodable_answer_is_an_error_for_that_request(start_mcp) -> None:
    server = await start_mcp(deep_app())
    port = server.ports[0]
    reply, answer = await modern_call(port, modern_body("tools/call", {"name": "deep"}))
    assert (reply.status, answer["error"]["message"]) == (200, UNENCODABLE)
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    _, answer = await modern_call(port, body)
    assert answer["result"]["content"][0]["text"] == "x"


# ---- what the server could not pass on is refused where it comes in ---------------


async def test_a_client_answer_too_deep_to_pass_on_is_refused(start_mcp) -> None:
    """The answer to elicitation/create once reached the tool's error, which the
    endpoint could not encode; the task that sent it ended the process."""
    server = await start_mcp(client_request_timeout_s=30)
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port, {"elicitation": {}})
    async with client:
        with trio.fail_after(10):
            await post_message(port, endpoint, call_body("test_elicitation", {"message": "?"}))
            _, asked = await reader.message()
            assert asked["method"] == "elicitation/create"
            deep = {"code": -1, "message": "no", "data": "VALUE"}
            answer_body = {"jsonrpc": "2.0", "id": asked["id"], "error": deep}
            refused = await post_message(
                port, endpoint, with_value(answer_body, nested_json(TOO_DEEP)), status=400
            )
            assert refused is not None and refused["error"]["code"] == -32600
            # the server goes on, and the request still gets its real answer
            result = {"action": "accept", "content": {"username": "u", "email": "e"}}
            await post_message(
                port, endpoint, {"jsonrpc": "2.0", "id": asked["id"], "result": result}
            )
            _, answer = await reader.message()
            assert "action=accept" in answer["result"]["content"][0]["text"]


# ---- one bad step is not the end of a loop that serves everyone --------------------


async def test_a_broadcast_that_fails_is_logged_and_the_next_one_goes(
    start_mcp, caplog: pytest.LogCaptureFixture
) -> None:
    app = Server("noisy")
    server = await start_mcp(app)
    port = server.ports[0]
    client, reader, _ = await open_http_sse(port, {})
    async with client:
        with trio.fail_after(10):
            with caplog.at_level(logging.ERROR, logger="trio_mcp.tasks"):
                app.log("info", {1, 2})  # a set: no JSON form
                app.log("info", "after")
                _, message = await reader.message()
            assert message["params"]["data"] == "after"
            assert "the broadcast of notifications/message failed" in caplog.text


# ---- malformed values get a 4xx, never a 500 --------------------------------------


@pytest.mark.parametrize("sequence", ["²", "1" * 5000, "", "-1", "१"])
async def test_a_last_event_id_that_is_not_ours_is_a_400(mcp_port: int, sequence: str) -> None:
    mcp = await session(mcp_port)
    assert mcp.session is not None
    async with mcp.client, await connect(mcp_port) as client:
        last = f"{mcp.session}-0-{sequence}".encode()
        await client.send(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: " + mcp.session.encode() + b"\r\n"
            b"MCP-Protocol-Version: 2025-11-25\r\nLast-Event-ID: " + last + b"\r\n\r\n"
        )
        with trio.fail_after(10):
            assert (await client.read_reply()).status == 400


@pytest.mark.parametrize("request_id", [[1], {"a": 1}, None, True, 1.5])
async def test_a_cancellation_naming_no_request_id_is_accepted_and_ignored(
    mcp_port: int, request_id: object
) -> None:
    mcp = await session(mcp_port)
    cancelled = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }
    async with mcp.client:
        assert (await mcp.post(cancelled)).status == 202
        assert (await mcp.call("ping"))["result"] == {}


async def test_deeply_nested_arguments_are_invalid_arguments(mcp_port: int) -> None:
    mcp = await session(mcp_port)  # (2025-11-25: a tool error the model can read)
    async with mcp.client:
        body = call_body("echo", {"text": "VALUE"}, id=7)
        reply = await mcp.post(with_value(body, nested_json(900)))
        answer = orjson.loads(reply.body)
    assert answer["result"]["isError"] is True
    assert "Invalid arguments for tool echo" in answer["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("host", "status"),
    [
        (b"local host", 400),  # RFC 9112 3.2: an invalid Host is a 400 (once a 403)
        (b"localhost:abc", 400),  # (once taken for localhost)
        (b"[::1]junk", 400),  # (once taken for [::1])
        (b"evil.example", 403),  # valid, and not ours
        (b"localhost:8000", 200),
    ],
)
async def test_host_values(mcp_port: int, host: bytes, status: int) -> None:
    request = mcp_post(initialize_body())
    request = request.replace(b"Host: 127.0.0.1", b"Host: " + host)
    async with await connect(mcp_port) as client:
        await client.send(request)
        with trio.fail_after(10):
            reply = await client.read_reply()
    assert reply.status == status, reply.body


async def test_bytes_that_cannot_begin_a_request_get_a_400_at_once(mcp_port: int) -> None:
    async with await connect(mcp_port) as client:
        await client.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a TLS hello
        with trio.fail_after(2):  # (the head timeout is 10 s)
            reply = await client.read_reply()
    assert reply.status == 400


# ---- HEAD on the stream endpoints ---------------------------------------------------


async def test_head_on_the_endpoint_answers_gets_head_and_opens_no_stream(mcp_port: int) -> None:
    mcp = await session(mcp_port)
    assert mcp.session is not None
    head = (
        b"HEAD /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"Mcp-Session-Id: " + mcp.session.encode() + b"\r\n"
        b"MCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    async with mcp.client:
        with trio.fail_after(10):
            await mcp.client.send(head)
            reply = await mcp.client.read_reply(head=True)
            assert (reply.status, reply.header(b"content-type")) == (200, b"text/event-stream")
            assert reply.body == b""
            # the connection goes on, and the session's one GET stream is still free
            assert (await mcp.call("ping"))["result"] == {}
        async with await connect(mcp_port) as other:
            stream = EventReader(other)
            get = head.replace(b"HEAD", b"GET", 1)
            with trio.fail_after(10):
                assert (await stream.head(get)).status_code == 200


async def test_head_on_the_sse_endpoint_creates_no_session(start_mcp) -> None:
    server = await start_mcp()
    async with await connect(server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(SSE_GET.replace(b"GET", b"HEAD", 1))
            reply = await client.read_reply(head=True)
    assert (reply.status, reply.header(b"content-type")) == (200, b"text/event-stream")
    assert server.handler.stores.sessions.count() == 0


# ---- quotas --------------------------------------------------------------------------


async def test_http_sse_posts_beyond_the_sessions_cap_get_429(start_mcp) -> None:
    """A client that posted and never read once made the server hold a task per
    post (+841 MB after 400 posts of 1 MiB)."""
    app = Server("slow")
    release = trio.Event()

    @app.tool()
    async def wait() -> str:
        await release.wait()
        return "done"

    server = await start_mcp(app, max_answering_per_session=3)
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port)
    async with client:
        with trio.fail_after(10):
            for n in range(3):
                await post_message(port, endpoint, call_body("wait", id=10 + n))
            async with await connect(port) as poster:
                await poster.send(mcp_post(call_body("wait", id=20), path=endpoint, accept=None))
                refused = await poster.read_reply()
            assert (refused.status, refused.header(b"retry-after")) == (429, b"1")
            release.set()
            answered = {(await reader.message())[1]["id"] for _ in range(3)}
            assert answered == {10, 11, 12}
            await post_message(port, endpoint, call_body("wait", id=30))  # room again
            assert (await reader.message())[1]["id"] == 30


@pytest.mark.parametrize(
    ("target", "host", "status"),
    [
        (b"http://evil.example/mcp", b"127.0.0.1", 403),  # the target's authority counts
        (b"http://127.0.0.1/mcp", b"evil.example", 200),  # ... and the Host header not
        (b"http://user@127.0.0.1/mcp", b"127.0.0.1", 400),  # userinfo: no valid Host
        (b"http://local host/mcp", b"127.0.0.1", 400),
    ],
)
async def test_an_absolute_form_target_is_checked_as_host_is(
    mcp_port: int, target: bytes, host: bytes, status: int
) -> None:
    request = mcp_post(initialize_body())
    request = request.replace(b"POST /mcp ", b"POST " + target + b" ", 1)
    request = request.replace(b"Host: 127.0.0.1", b"Host: " + host, 1)
    async with await connect(mcp_port) as client:
        await client.send(request)
        with trio.fail_after(10):
            reply = await client.read_reply()
    assert reply.status == status, reply.body


# ---- a session is valid on its own transport only ------------------------------------


async def test_an_http_sse_session_is_not_one_on_the_endpoint(start_mcp) -> None:
    """A 2024-11-05 session id once worked on /mcp, where its event buffers
    outlived the session (303 MB held with max_sessions 50)."""
    server = await start_mcp()
    port = server.ports[0]
    client, _, endpoint = await open_http_sse(port)
    async with client:
        session_id = endpoint.split(b"session_id=")[1].decode()
        async with await connect(port) as other:
            mcp = MCP(other)
            mcp.session, mcp.version = session_id, "2024-11-05"
            reply = await mcp.post({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert reply.status == 404
            for method in (b"GET", b"DELETE"):
                await other.send(
                    method + b" /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream"
                    b"\r\nMcp-Session-Id: " + session_id.encode() + b"\r\n\r\n"
                )
                with trio.fail_after(10):
                    assert (await other.read_reply()).status == 404
        # the session itself still works where it belongs
        assert (
            await post_message(port, endpoint, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
            is None
        )


async def test_an_endpoint_session_is_not_one_on_the_messages_url(start_mcp) -> None:
    server = await start_mcp()
    port = server.ports[0]
    mcp = await session(port)
    async with mcp.client:
        await mcp.client.send(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: " + mcp.session.encode() + b"\r\n\r\n"
        )  # (a GET stream: what the messages URL once answered on)
        endpoint = b"/messages?session_id=" + mcp.session.encode()
        await post_message(port, endpoint, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, 404)
