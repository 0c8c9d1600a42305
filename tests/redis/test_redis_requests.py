"""Requests across replicas: the client answers a request the server sent it
(elicitation) on another replica than the one waiting, and cancels a request
through another replica than the one running it."""

from __future__ import annotations

import pytest
import trio
from _support import MCP, EventReader, connect, mcp_post
from redis_fixtures import COREDIS_LEFTOVERS, EVENT_WAIT_S, StartRedis, StartReplica

from trio_mcp import Context, Server

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)


def asking_app(name: str, started: trio.Event, cancelled: trio.Event) -> Server:
    app = Server(name)

    @app.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
        return f"{name} heard {answer['action']}"

    @app.tool()
    async def wait() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise
        return "never"

    return app


async def initialized(port: int) -> MCP:
    mcp = MCP(await connect(port))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    reply = await mcp.post(body, session=None, version=None)
    mcp.session = reply.header(b"mcp-session-id").decode()  # type: ignore[union-attr]
    mcp.version = "2025-11-25"
    assert (await mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    return mcp


async def post_elsewhere(port: int, mcp: MCP, body: dict) -> int:
    async with await connect(port) as client:
        await client.send(mcp_post(body, session=mcp.session, version=mcp.version))
        return (await client.read_reply()).status


async def answered_elsewhere(one: int, two: int) -> str:
    """A tool on replica 1 elicits; the client answers on replica 2: the tool's text."""
    mcp = await initialized(one)
    reader = EventReader(await connect(one))
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ask"}}
    with trio.fail_after(EVENT_WAIT_S):
        head = await reader.head(mcp_post(call, session=mcp.session, version=mcp.version))
        assert head.status_code == 200
        _, asked = await reader.message()
        assert asked["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
        assert await post_elsewhere(two, mcp, answer) == 202  # (replica 2 forwards it)
        _, result = await reader.message()
    assert result["id"] == 5
    await reader.client.stream.aclose()
    await mcp.client.stream.aclose()
    return str(result["result"]["content"][0]["text"])


async def test_a_client_answers_on_another_replica(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    never = trio.Event()
    one, two = [await start_replica(asking_app(f"r{i}", never, never), redis.url) for i in (1, 2)]
    assert await answered_elsewhere(one, two) == "r1 heard accept"


async def test_a_client_cancels_through_another_replica(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    started, cancelled = trio.Event(), trio.Event()
    one, two = [
        await start_replica(asking_app(f"r{i}", started, cancelled), redis.url) for i in (1, 2)
    ]
    mcp = await initialized(one)
    client = await connect(one)
    call = {"jsonrpc": "2.0", "id": "w", "method": "tools/call", "params": {"name": "wait"}}
    await client.send(mcp_post(call, session=mcp.session, version=mcp.version))
    with trio.fail_after(EVENT_WAIT_S):
        await started.wait()
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "w"},
        }
        assert await post_elsewhere(two, mcp, notice) == 202
        await cancelled.wait()
    await client.stream.aclose()
    await mcp.client.stream.aclose()


async def test_a_malformed_message_on_a_channel_is_logged_and_the_link_goes_on(
    start_redis: StartRedis, start_replica: StartReplica, caplog: pytest.LogCaptureFixture
) -> None:
    redis = await start_redis()
    never = trio.Event()
    one, two = [await start_replica(asking_app(f"r{i}", never, never), redis.url) for i in (1, 2)]
    stream = await trio.open_tcp_stream("127.0.0.1", redis.port)
    async with stream:
        await stream.send_all(b"PUBLISH trio-mcp:cancel not-json\r\n")
        assert (await stream.receive_some(64)).startswith(b":2")  # (both replicas heard it)
    with trio.fail_after(EVENT_WAIT_S):
        while "a Redis message on trio-mcp:cancel failed" not in caplog.text:
            await trio.sleep(0.05)
    # and the forwarding still works
    assert await answered_elsewhere(one, two) == "r1 heard accept"
