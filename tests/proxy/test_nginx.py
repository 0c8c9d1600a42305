"""trio-mcp behind nginx, configured with deploy/nginx.conf (the README's).

Both eras work through it; a chunked request reaches trio-mcp with a
Content-Length; and a 12 s tool call lives through an nginx whose
``proxy_read_timeout`` is 5 s because its answer turns into a stream of
keepalives (``stream_slow_answers_after_s``), while the same call with that
setting off is cut by nginx (504). Real clock: about 12 s per era.
"""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import MCP, connect, mcp_post, modern_body, modern_headers, sse_messages

from trio_mcp import Context, Server

#: The proxy's read timeout in the long-call tests, and the call's length.
READ_TIMEOUT_S = 5
CALL_S = 12


def app() -> Server:
    server = Server("behind-nginx")

    @server.tool()
    async def index(seconds: int) -> str:
        """A call that takes `seconds` and sends nothing meanwhile."""
        await trio.sleep(seconds)
        return f"indexed in {seconds} s"

    @server.tool()
    def forwarded(ctx: Context) -> dict[str, list[str]]:
        """The request's Host and forwarding headers, each with all its values."""
        names = (b"host", b"x-forwarded-for", b"x-forwarded-proto", b"mcp-protocol-version")
        seen: dict[str, list[str]] = {name.decode(): [] for name in names}
        for name, value in ctx.headers:
            if name.lower() in names:
                seen[name.lower().decode()].append(value.decode())
        return seen

    return server


def call(name: str, arguments: dict, id: int = 2) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def call_through(port: int, era: str, name: str, arguments: dict):
    """One tools/call through the proxy on `port`, in `era`: the reply."""
    async with await connect(port) as client:
        if era == "2026-07-28":
            body = modern_body("tools/call", {"name": name, "arguments": arguments}, id=3)
            await client.send(mcp_post(body, version=era, extra=modern_headers(body)))
        else:
            mcp = MCP(client)
            await mcp.initialize(era)
            await client.send(
                mcp_post(call(name, arguments), session=mcp.session, version=mcp.version)
            )
        with trio.fail_after(CALL_S + 10):
            return await client.read_reply()


def the_answer(reply) -> dict:
    if reply.header(b"content-type") == b"text/event-stream":
        return sse_messages(reply.body)[-1]  # type: ignore[return-value]
    return orjson.loads(reply.body)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_both_eras_work_through_nginx(start_mcp_upstream, start_nginx, era) -> None:
    port = await start_nginx(await start_mcp_upstream(app()))
    reply = await call_through(port, era, "forwarded", {})
    assert reply.status == 200, reply.body
    result = the_answer(reply)["result"]["structuredContent"]
    # Host and the MCP headers pass as the client sent them, once each, and
    # X-Forwarded-* name the client once
    assert result == {
        "host": ["127.0.0.1"],
        "x-forwarded-for": ["127.0.0.1"],
        "x-forwarded-proto": ["http"],
        "mcp-protocol-version": [era],
    }


async def test_a_chunked_request_reaches_trio_mcp_with_a_length(
    start_mcp_upstream, start_nginx
) -> None:
    """trio-mcp refuses any request Transfer-Encoding; nginx reads the body
    whole first (proxy_request_buffering), so a chunked client still works."""
    port = await start_nginx(await start_mcp_upstream(app(), stateless=True))
    body = orjson.dumps(call("index", {"seconds": 0}))
    request = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        b"MCP-Protocol-Version: 2025-11-25\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
    async with await connect(port) as client:
        await client.send(request)
        with trio.fail_after(10):
            reply = await client.read_reply()
    assert reply.status == 200, reply.body
    assert the_answer(reply)["result"]["content"][0]["text"] == "indexed in 0 s"


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_long_call_lives_through_a_short_proxy_timeout(
    start_mcp_upstream, start_nginx, era
) -> None:
    """With keepalives (every 2 s from 2 s on) the 12 s call succeeds through
    nginx's 5 s read timeout; with the setting off, nginx cuts it (504)."""
    kept = await start_nginx(
        await start_mcp_upstream(app(), stream_slow_answers_after_s=2.0, keepalive_s=2.0),
        read_timeout_s=READ_TIMEOUT_S,
    )
    silent = await start_nginx(
        await start_mcp_upstream(app(), stream_slow_answers_after_s=None),
        read_timeout_s=READ_TIMEOUT_S,
    )
    replies: dict[str, object] = {}

    async def run(name: str, port: int) -> None:
        replies[name] = await call_through(port, era, "index", {"seconds": CALL_S})

    async with trio.open_nursery() as nursery:  # (both at once: 12 s, not 17)
        nursery.start_soon(run, "kept", kept)
        nursery.start_soon(run, "silent", silent)
    kept_reply, silent_reply = replies["kept"], replies["silent"]
    assert kept_reply.status == 200, kept_reply.body  # type: ignore[attr-defined]
    assert kept_reply.header(b"content-type") == b"text/event-stream"  # type: ignore[attr-defined]
    answer = the_answer(kept_reply)
    assert answer["result"]["content"][0]["text"] == f"indexed in {CALL_S} s"
    assert silent_reply.status == 504  # type: ignore[attr-defined]
