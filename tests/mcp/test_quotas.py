"""Every per-session resource has a quota, and a refusal says when to retry:
429 with ``Retry-After`` before a response starts, else the JSON-RPC error
-31429 with ``data.retryAfterSeconds``."""

from __future__ import annotations

import orjson
import trio
from _support import MCP, EventReader, connect, initialize_body, mcp_post
from _support import tool_call as call

from trio_mcp import Context, Server

TOO_MANY = -31429


def hanging_app() -> Server:
    app = Server("quotas")

    @app.tool()
    async def hang() -> str:
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    @app.tool()
    async def ask(ctx: Context) -> str:
        await ctx.list_roots()
        return "answered"

    return app


async def session(port: int, version: str = "2025-11-25", capabilities: dict | None = None):
    mcp = MCP(await connect(port))
    body = initialize_body(version)
    body["params"]["capabilities"] = capabilities or {}
    reply = await mcp.post(body, session=None, version=None)
    mcp.session = reply.header(b"mcp-session-id").decode()
    mcp.version = version
    assert (await mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).status == 202
    return mcp


async def start_hanging(mcp: MCP, port: int, ids) -> list:
    """Calls of `hang`, each on a connection of its own, left running."""
    clients = []
    for id in ids:
        client = await connect(port)
        await client.send(mcp_post(call("hang", id), session=mcp.session, version=mcp.version))
        clients.append(client)
    await trio.sleep(0.2)  # (all running by now)
    return clients


async def test_a_request_beyond_the_sessions_running_quota_gets_429(start_mcp) -> None:
    port = (await start_mcp(hanging_app(), max_requests_per_session=2)).ports[0]
    mcp = await session(port)
    clients = await start_hanging(mcp, port, (1, 2))
    reply = await mcp.post(call("hang", 3))
    assert reply.status == 429
    assert reply.header(b"retry-after") == b"1"
    error = orjson.loads(reply.body)["error"]
    assert error["code"] == TOO_MANY and error["data"] == {"retryAfterSeconds": 1}
    other = await session(port)  # the quota is the session's, not the server's
    assert (await other.call("ping", id=3))["result"] == {}
    await clients[0].stream.aclose()
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert (await mcp.post(cancel)).status == 202
    await trio.sleep(0.1)
    assert (await mcp.call("ping", id=4))["result"] == {}  # room again
    for client in [*clients[1:], mcp.client, other.client]:
        await client.stream.aclose()


async def test_in_a_batch_the_request_beyond_the_quota_gets_the_error(start_mcp) -> None:
    port = (await start_mcp(hanging_app(), max_requests_per_session=1)).ports[0]
    mcp = await session(port, "2025-03-26")
    clients = await start_hanging(mcp, port, (1,))
    reply = await mcp.post([{"jsonrpc": "2.0", "id": 2, "method": "ping"}, call("hang", 3)])
    assert reply.status == 200
    first, second = orjson.loads(reply.body)
    assert first["error"]["code"] == TOO_MANY and second["error"]["code"] == TOO_MANY
    assert first["error"]["data"]["retryAfterSeconds"] == 1
    for client in [*clients, mcp.client]:
        await client.stream.aclose()


async def test_requests_to_the_client_beyond_the_quota_fail_the_call(start_mcp) -> None:
    port = (await start_mcp(hanging_app(), max_client_requests_per_session=1)).ports[0]
    mcp = await session(port, capabilities={"roots": {}})
    waiting = await connect(port)
    reader = EventReader(waiting)
    head = await reader.head(mcp_post(call("ask", 1), session=mcp.session, version=mcp.version))
    assert head.status_code == 200
    _, asked = await reader.message()
    assert asked["method"] == "roots/list"  # unanswered: the quota is used up
    answer = await mcp.call("tools/call", {"name": "ask", "arguments": {}}, id=2)
    assert answer["error"]["code"] == TOO_MANY
    assert answer["error"]["data"] == {"retryAfterSeconds": 1}
    roots = {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}}
    assert (await mcp.post(roots)).status == 202
    _, done = await reader.message()
    assert done["result"]["content"][0]["text"] == "answered"
    await waiting.stream.aclose()
    await mcp.client.stream.aclose()
