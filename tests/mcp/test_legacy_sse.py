"""The 2024-11-05 HTTP+SSE transport beside the Streamable HTTP endpoint."""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import EventReader, connect, initialize_body, mcp_post

SSE_GET = b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"


def post_message(path: bytes, body: dict, extra: bytes = b"") -> bytes:
    return (
        mcp_post(body, path=path, accept=None)
        if not extra
        else mcp_post(
            body,
            path=path,
            accept=None,
            extra=[tuple(extra.split(b": ", 1))],  # type: ignore[list-item]
        )
    )


async def open_legacy(port: int, extra: bytes = b""):
    client = await connect(port)
    reader = EventReader(client)
    head = await reader.head(SSE_GET + extra + b"\r\n")
    assert head.status_code == 200
    _, data, raw = await reader.event()
    assert raw.startswith(b"event: endpoint\n")
    assert data.startswith(b"/messages?session_id=")
    return client, reader, data


async def test_endpoint_event_then_answers_on_the_stream(mcp_port: int) -> None:
    client, reader, endpoint = await open_legacy(mcp_port)
    async with client, await connect(mcp_port) as poster:
        with trio.fail_after(10):
            await poster.send(post_message(endpoint, initialize_body("2024-11-05")))
            reply = await poster.read_reply()
            assert (reply.status, reply.body) == (202, b"Accepted")
            _, init = await reader.message()
            assert init["result"]["protocolVersion"] == "2024-11-05"
            await poster.send(
                post_message(endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            )
            assert (await poster.read_reply()).status == 202
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "old"}},
            }
            await poster.send(post_message(endpoint, call))
            assert (await poster.read_reply()).status == 202
            _, answer = await reader.message()
            assert answer == {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"content": [{"type": "text", "text": "old"}]},
            }


@pytest.mark.parametrize(
    ("path", "status"),
    [(b"/messages", 400), (b"/messages?session_id=" + b"0" * 32, 404), (b"/messages?other=1", 400)],
)
async def test_posts_need_a_live_session(mcp_port: int, path: bytes, status: int) -> None:
    async with await connect(mcp_port) as client:
        await client.send(post_message(path, {"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        assert (await client.read_reply()).status == status


async def test_closing_the_stream_ends_the_session(mcp_port: int) -> None:
    client, _, endpoint = await open_legacy(mcp_port)
    await client.stream.aclose()
    with trio.fail_after(10):
        while True:  # the server notices when it next writes (the keepalive) or reads EOF
            async with await connect(mcp_port) as poster:
                await poster.send(
                    post_message(endpoint, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
                )
                status = (await poster.read_reply()).status
            if status == 404:
                break
            await trio.sleep(0.05)


async def test_sessions_are_bound_to_their_principal(start_mcp) -> None:
    async def authenticate(request):
        return {b"Bearer a": "a", b"Bearer b": "b"}.get(request.header(b"authorization"))

    server = await start_mcp(authenticate=authenticate, keepalive_s=0.2)
    port = server.ports[0]
    async with await connect(port) as anonymous:
        await anonymous.send(SSE_GET + b"\r\n")
        assert (await anonymous.read_reply()).status == 401
    client, _, endpoint = await open_legacy(port, b"Authorization: Bearer a\r\n")
    async with client, await connect(port) as poster:
        await poster.send(
            post_message(
                endpoint, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, b"Authorization: Bearer b"
            )
        )
        assert (await poster.read_reply()).status == 403
        await poster.send(
            post_message(
                endpoint, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, b"Authorization: Bearer a"
            )
        )
        assert (await poster.read_reply()).status == 202


async def test_wrong_methods_and_bodies(mcp_port: int) -> None:
    client, _, endpoint = await open_legacy(mcp_port)
    async with client, await connect(mcp_port) as other:
        await other.send(b"POST /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        reply = await other.read_reply()
        assert (reply.status, reply.header(b"allow")) == (405, b"GET")
        await other.send(post_message(endpoint, b"{nope"))  # type: ignore[arg-type]
        reply = await other.read_reply()
        assert reply.status == 400
        assert orjson.loads(reply.body)["error"]["code"] == -32700


async def test_legacy_transport_can_be_turned_off(start_mcp) -> None:
    server = await start_mcp(legacy_sse=False)
    async with await connect(server.ports[0]) as client:
        await client.send(SSE_GET + b"\r\n")
        assert (await client.read_reply()).status == 404


async def test_the_end_of_its_stream_releases_the_session_and_its_event_buffers(
    start_mcp,
) -> None:
    server = await start_mcp()
    port = server.ports[0]
    endpoint = server.handler
    client, _, path = await open_legacy(port)
    session_id = path.split(b"=", 1)[1].decode()
    with trio.fail_after(10):
        endpoint.app.log("info", "to every session")  # kept for resumption
        while session_id not in endpoint.stores.events._sessions:
            await trio.sleep(0.01)
        await client.stream.aclose()
        while session_id in endpoint.stores.events._sessions:
            await trio.sleep(0.01)
    assert endpoint.stores.sessions.count() == 0
    async with await connect(port) as poster:
        await poster.send(post_message(path, {"jsonrpc": "2.0", "method": "ping", "id": 1}))
        assert (await poster.read_reply()).status == 404
