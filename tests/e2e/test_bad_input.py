"""Bad input over real sockets: a clear answer, then a close, and the server keeps serving."""

from __future__ import annotations

import pytest
import trio
from _support import connect, exchange_and_close, post, still_serving

from trio_mcp import HTTPServer

H = b"Host: 127.0.0.1\r\n"

BAD_REQUESTS = [
    # framing
    (
        "cl-with-te",
        b"POST /mcp HTTP/1.1\r\n"
        + H
        + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        400,
    ),
    (
        "te-chunked",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        501,
    ),
    (
        "te-obfuscated-value",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Transfer-Encoding: xchunked\r\n\r\n",
        501,
    ),
    (
        "te-obfuscated-space",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Transfer-Encoding : chunked\r\n\r\n",
        400,
    ),
    (
        "te-obfuscated-list",
        b"POST /mcp HTTP/1.1\r\n"
        + H
        + b"Content-Length: 2\r\nTransfer-Encoding: identity, chunked\r\n\r\n{}",
        400,
    ),
    (
        "cl-duplicate",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
        400,
    ),
    ("cl-list", b"POST /mcp HTTP/1.1\r\n" + H + b"Content-Length: 2, 2\r\n\r\n{}", 400),
    ("cl-sign", b"POST /mcp HTTP/1.1\r\n" + H + b"Content-Length: +2\r\n\r\n{}", 400),
    ("cl-hex", b"POST /mcp HTTP/1.1\r\n" + H + b"Content-Length: 0x2\r\n\r\n{}", 400),
    # line syntax
    (
        "obs-fold",
        b"POST /mcp HTTP/1.1\r\n" + H + b"X-A: 1\r\n  continued\r\nContent-Length: 2\r\n\r\n{}",
        400,
    ),
    ("bare-lf", b"POST /mcp HTTP/1.1\n" + H + b"\r\n", 400),
    ("bare-lf-headers", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\nX: y\r\n\r\n", 400),
    ("bare-cr", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\rX: y\r\n\r\n", 400),
    ("nul-in-value", b"GET /mcp HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n", 400),
    ("nul-in-target", b"GET /m\x00cp HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("bad-method-token", b"GE(T /mcp HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("bad-header-token", b"GET /mcp HTTP/1.1\r\n" + H + b"X(A): 1\r\n\r\n", 400),
    ("space-before-colon", b"GET /mcp HTTP/1.1\r\n" + H + b"X-A : 1\r\n\r\n", 400),
    ("double-space", b"GET  /mcp HTTP/1.1\r\n" + H + b"\r\n", 400),
    # targets
    ("asterisk-not-options", b"GET * HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("authority-form", b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("authority-form-get", b"GET 127.0.0.1:443 HTTP/1.1\r\n" + H + b"\r\n", 400),
    # versions
    ("http-0.9", b"GET /mcp\r\n\r\n", 400),
    ("http-2.0", b"GET /mcp HTTP/2.0\r\n" + H + b"\r\n", 505),
    ("http-0.9-versioned", b"GET /mcp HTTP/0.9\r\n" + H + b"\r\n", 505),
    # Host
    ("missing-host", b"GET /mcp HTTP/1.1\r\n\r\n", 400),
    ("duplicate-host", b"GET /mcp HTTP/1.1\r\n" + H + H + b"\r\n", 400),
    (
        "duplicate-session-id",
        b"POST /mcp HTTP/1.1\r\n"
        + H
        + b"Mcp-Session-Id: a\r\nMcp-Session-Id: b\r\nContent-Length: 2\r\n\r\n{}",
        400,
    ),
    (
        "comma-joined-version",
        b"POST /mcp HTTP/1.1\r\n"
        + H
        + b"MCP-Protocol-Version: 2025-06-18, 2025-11-25\r\nContent-Length: 2\r\n\r\n{}",
        400,
    ),
    # sizes
    ("request-line-too-long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    (
        "head-too-large",
        b"GET /mcp HTTP/1.1\r\n"
        + H
        + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(20))
        + b"\r\n",
        431,
    ),
    ("too-many-headers", b"GET /mcp HTTP/1.1\r\n" + H + b"X: y\r\n" * 150 + b"\r\n", 431),
    ("body-too-large", post(b"x" * (4 * 1024 * 1024 + 1)), 413),
    (
        "body-too-large-declared",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Content-Length: 99999999999\r\n\r\n",
        413,
    ),
    (
        "expect-unknown",
        b"POST /mcp HTTP/1.1\r\n" + H + b"Expect: 200-ok\r\nContent-Length: 2\r\n\r\n{}",
        417,
    ),
]


@pytest.mark.parametrize(("data", "status"), [pytest.param(d, s, id=n) for n, d, s in BAD_REQUESTS])
async def test_bad_request_gets_status_then_close(
    echo_server: HTTPServer, data: bytes, status: int
) -> None:
    port = echo_server.ports[0]
    with trio.fail_after(10):
        reply = await exchange_and_close(port, data)
        assert reply.status == status, reply.body
        await still_serving(port)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        pytest.param(b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n", 204, id="asterisk-options"),
        pytest.param(
            b"GET http://127.0.0.1/mcp HTTP/1.1\r\n" + H + b"\r\n", 200, id="absolute-form"
        ),
        pytest.param(b"GET /mcp HTTP/1.2\r\n" + H + b"\r\n", 200, id="http-1.2-as-1.1"),
        pytest.param(b"get /mcp HTTP/1.1\r\n" + H + b"\r\n", 405, id="methods-are-case-sensitive"),
        pytest.param(b"DELETE /mcp HTTP/1.1\r\n" + H + b"\r\n", 405, id="405-for-delete"),
        pytest.param(b"GET /other HTTP/1.1\r\n" + H + b"\r\n", 404, id="other-path"),
        pytest.param(b"GET /mcp HTTP/1.0\r\n\r\n", 200, id="http-1.0-without-host"),
        pytest.param(b"\r\nGET /mcp HTTP/1.1\r\n" + H + b"\r\n", 200, id="leading-empty-line"),
    ],
)
async def test_edge_requests_are_served(echo_server: HTTPServer, data: bytes, status: int) -> None:
    async with await connect(echo_server.ports[0]) as client:
        with trio.fail_after(10):
            await client.send(data)
            reply = await client.read_reply()
    assert reply.status == status
    if status == 405:
        assert reply.header(b"allow") == b"GET, HEAD, POST, OPTIONS"


async def test_body_shorter_than_length_then_silence(start_server) -> None:
    server = await start_server(body_timeout_s=0.5)
    with trio.fail_after(10):
        reply = await exchange_and_close(server.ports[0], post(b"0123456789")[:-5])
        assert reply.status == 408
        await still_serving(server.ports[0])


async def test_body_shorter_than_length_then_close(echo_server: HTTPServer) -> None:
    port = echo_server.ports[0]
    with trio.fail_after(10):
        async with await connect(port) as client:
            await client.send(post(b"0123456789")[:-5])
            await client.stream.send_eof()
            reply = await client.read_reply()  # the server answers the half-closed client
            assert reply.status == 400
            assert await client.read_until_eof() == b""
        await still_serving(port)


async def test_head_trickled_byte_by_byte_is_served(echo_server: HTTPServer) -> None:
    with trio.fail_after(20):
        async with await connect(echo_server.ports[0]) as client:
            for byte in post(b'{"slow":true}'):
                await client.send(bytes([byte]))
                await trio.sleep(0.001)
            reply = await client.read_reply()
    assert reply.body == b'{"slow":true}'


async def test_slowly_trickled_head_times_out(start_server) -> None:
    server = await start_server(head_timeout_s=0.5)
    with trio.fail_after(10):
        async with await connect(server.ports[0]) as client:
            t0 = trio.current_time()
            for byte in b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"y" * 100:
                try:
                    await client.send(bytes([byte]))
                except trio.BrokenResourceError:
                    break
                await trio.sleep(0.05)
                if trio.current_time() - t0 > 2:
                    break
            reply = await client.read_reply()
            assert reply.status == 408
            assert trio.current_time() - t0 < 2
        await still_serving(server.ports[0])


async def test_hundreds_of_idle_connections_do_not_block_a_new_client(
    echo_server: HTTPServer,
) -> None:
    port = echo_server.ports[0]
    idle = []
    with trio.fail_after(20):
        for i in range(300):
            client = await connect(port)
            if i % 2:
                await client.send(b"POST /mcp HTTP/1.1\r\n")  # a head that never ends
            idle.append(client)
        t0 = trio.current_time()
        await still_serving(port)
        assert trio.current_time() - t0 < 1.0
        assert echo_server.statistics().connections_open >= 300
    for client in idle:
        await client.stream.aclose()
