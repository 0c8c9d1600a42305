"""TLS over real loopback sockets: HTTPS with Python's ssl client, ALPN,
failed and stalled handshakes, client certificates, and the one-line error for
a certificate that cannot be used."""

from __future__ import annotations

import logging
import re
import ssl
from pathlib import Path

import pytest
import trio
import trustme
from _support import MCP, Client, connect, post
from _tls_files import TLSFiles, make_tls_files, tls_connect
from mcp_fixtures import start_mcp  # noqa: F401

from trio_mcp import HTTPServer, Request, Response, ServerConfig, serve
from trio_mcp._errors import TLSConfigError
from trio_mcp._trio._run import run
from trio_mcp._trio._tls import server_context


@pytest.fixture
def tls(tmp_path: Path) -> TLSFiles:
    return make_tls_files(tmp_path)


async def scheme_of(request: Request) -> Response:
    """Answers with the scheme the request came in by."""
    return Response(200, [(b"content-type", b"text/plain")], request.scheme.encode())


async def start(nursery: trio.Nursery, handler=scheme_of, **config: object) -> HTTPServer:
    server: HTTPServer = await nursery.start(serve, handler, ServerConfig(port=0, **config))  # type: ignore[arg-type]
    return server


async def served_over_tls(port: int, tls: TLSFiles, **client: object) -> bytes:
    """One request over a new TLS connection; the body of its answer."""
    with trio.fail_after(10):
        async with Client(await tls_connect(port, tls.client_context(**client))) as http:  # type: ignore[arg-type]
            await http.send(post(b"{}", path=b"/"))
            reply = await http.read_reply()
    assert reply.status == 200
    return reply.body


async def refused(port: int, context: ssl.SSLContext) -> bool:
    """Whether a TLS client is turned away: its handshake fails, or (TLS 1.3,
    where the client's half may finish first) its first request meets the
    end of the connection instead of an answer."""
    with trio.fail_after(10):
        try:
            stream = await tls_connect(port, context)
        except trio.BrokenResourceError:
            return True
        try:
            await stream.send_all(post(b"{}", path=b"/"))
            return await stream.receive_some(65536) == b""
        except trio.BrokenResourceError:
            return True
        finally:
            await trio.aclose_forcefully(stream)


async def test_mcp_initialize_and_tools_call_over_https(start_mcp, tls: TLSFiles) -> None:  # noqa: F811
    server = await start_mcp(http=tls.settings())
    with trio.fail_after(20):
        stream = await tls_connect(server.ports[0], tls.client_context(alpn=("h2", "http/1.1")))
        # (ALPN offers HTTP/1.1 only: a client that prefers h2 gets http/1.1)
        assert stream.selected_alpn_protocol() == "http/1.1"
        assert stream.version() in ("TLSv1.2", "TLSv1.3")
        async with Client(stream) as client:
            mcp = MCP(client)
            init = await mcp.initialize()
            assert init["result"]["serverInfo"]["name"] == "trio-mcp-everything"
            called = await mcp.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            assert called["result"]["content"] == [{"type": "text", "text": "hi"}]
            # A last request with Connection: close: the answer whole, then
            # the server's close_notify and FIN (the lingering close over TLS).
            await client.send(post(b"{}", path=b"/nowhere", extra=b"Connection: close\r\n"))
            reply = await client.read_reply()
            assert reply.header(b"connection") == b"close"
            assert await client.read_until_eof() == b""


async def test_a_direct_tls_connection_requests_say_https(nursery, tls: TLSFiles) -> None:
    plain = await start(nursery)
    secure = await start(nursery, **tls.settings())
    with trio.fail_after(10):
        async with await connect(plain.ports[0]) as client:
            await client.send(post(b"{}", path=b"/"))
            assert (await client.read_reply()).body == b"http"
    assert await served_over_tls(secure.ports[0], tls) == b"https"


async def test_a_trusted_proxy_over_tls_keeps_the_scheme_it_forwards(
    nursery, tls: TLSFiles
) -> None:
    server = await start(nursery, forwarded_allow_ips=("127.0.0.1",), **tls.settings())
    with trio.fail_after(10):
        stream = await tls_connect(server.ports[0], tls.client_context())
        async with Client(stream) as client:
            await client.send(post(b"{}", path=b"/"))  # (says nothing: its own connection's)
            assert (await client.read_reply()).body == b"https"
            await client.send(
                post(
                    b"{}",
                    path=b"/",
                    extra=b"X-Forwarded-For: 10.1.2.3\r\nX-Forwarded-Proto: http\r\n",
                )
            )
            assert (await client.read_reply()).body == b"http"


async def test_plain_http_to_the_tls_port_fails_that_connection_only(
    nursery, tls: TLSFiles, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    server = await start(nursery, **tls.settings())
    port = server.ports[0]
    with trio.fail_after(10):
        secure = Client(await tls_connect(port, tls.client_context()))
        async with secure, await connect(port) as plain:
            await plain.send(post(b"{}", path=b"/"))
            try:
                leftover = await plain.read_until_eof()
            except trio.BrokenResourceError:  # (a reset: closed with our bytes unread)
                leftover = b""
            assert b"HTTP/1.1" not in leftover  # no plaintext answer, just the close
            # The TLS client, connected before and still open, is served.
            await secure.send(post(b"{}", path=b"/"))
            assert (await secure.read_reply()).body == b"https"
    assert await served_over_tls(port, tls) == b"https"
    # Quietly: one debug line, nothing louder.
    failed = [r for r in caplog.records if r.getMessage().startswith("TLS handshake with")]
    assert [r.levelno for r in failed] == [logging.DEBUG]
    assert "127.0.0.1" in failed[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_stalled_handshake_is_closed_after_the_handshake_timeout(
    nursery, tls: TLSFiles, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start(nursery, ssl_handshake_timeout_s=3.0, **tls.settings())
    with trio.fail_after(30):
        async with await trio.open_tcp_stream("127.0.0.1", server.ports[0]) as stalled:
            started = trio.current_time()
            assert await stalled.receive_some(100) == b""  # (a ClientHello never comes)
            took = trio.current_time() - started
    assert 3.0 <= took <= 3.0 + 3 * server.timeout_tick_s


async def test_handshakes_count_as_slow_heads(nursery, tls: TLSFiles) -> None:
    """Half-open handshakes are heads still arriving: they count toward
    ``slow_heads_threshold`` and their limit shortens with the heads', so a
    flood of them is closed sooner and real requests get through."""
    server = await start(
        nursery,
        slow_heads_threshold=4,
        head_timeout_s=20.0,
        ssl_handshake_timeout_s=20.0,
        **tls.settings(),
    )
    port = server.ports[0]
    stalled = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(4)]
    try:
        started = trio.current_time()
        with trio.fail_after(5):
            while server.statistics().heads_waiting < 4:
                await trio.sleep(server.timeout_tick_s)
            assert await served_over_tls(port, tls) == b"https"  # served meanwhile
            # (not the 20 s of the handshake limit: the shortened head limit, 1 s)
            assert [await stream.receive_some(100) for stream in stalled] == [b""] * 4
        assert trio.current_time() - started < 5
    finally:
        for stream in stalled:
            await trio.aclose_forcefully(stream)


async def test_an_overdue_head_over_tls_gets_408(nursery, tls: TLSFiles) -> None:
    server = await start(nursery, head_timeout_s=0.5, **tls.settings())
    with trio.fail_after(10):
        stream = await tls_connect(server.ports[0], tls.client_context())
        async with Client(stream) as client:
            await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # (no end of head)
            reply = await client.read_reply()
            assert reply.status == 408
            assert await client.read_until_eof() == b""
    assert await served_over_tls(server.ports[0], tls) == b"https"


async def test_required_client_certificates(nursery, tls: TLSFiles) -> None:
    server = await start(
        nursery, ssl_ca_certs=str(tls.ca_file), ssl_cert_reqs="required", **tls.settings()
    )
    port = server.ports[0]
    client_cert = tls.ca.issue_cert("client@example.test")
    assert await served_over_tls(port, tls, cert=client_cert) == b"https"
    stranger = trustme.CA().issue_cert("stranger@example.test")
    assert await refused(port, tls.client_context())
    assert await refused(port, tls.client_context(cert=stranger))
    assert await served_over_tls(port, tls, cert=client_cert) == b"https"


async def test_optional_client_certificates(nursery, tls: TLSFiles) -> None:
    server = await start(
        nursery, ssl_ca_certs=str(tls.ca_file), ssl_cert_reqs="optional", **tls.settings()
    )
    port = server.ports[0]
    assert await served_over_tls(port, tls) == b"https"
    assert await served_over_tls(port, tls, cert=tls.ca.issue_cert("c@example.test")) == b"https"
    assert await refused(port, tls.client_context(cert=trustme.CA().issue_cert("x")))


def test_the_context_offers_http11_from_tls12(tls: TLSFiles) -> None:
    context = server_context(ServerConfig(**tls.settings()))  # type: ignore[arg-type]
    assert context is not None
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.options & ssl.OP_NO_RENEGOTIATION
    assert context.verify_mode == ssl.CERT_NONE
    assert server_context(ServerConfig()) is None


def one_line_error(**settings: object) -> str:
    with pytest.raises(TLSConfigError) as caught:
        server_context(ServerConfig(**settings))  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_unreadable_certificate_is_one_line_naming_the_file(
    tls: TLSFiles, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.pem"
    assert one_line_error(ssl_certfile=str(missing)) == (
        f"ssl_certfile {missing}: cannot read it: No such file or directory"
    )
    assert one_line_error(ssl_certfile=str(tls.certfile), ssl_keyfile=str(missing)) == (
        f"ssl_keyfile {missing}: cannot read it: No such file or directory"
    )
    assert one_line_error(ssl_certfile=str(tmp_path)).startswith(f"ssl_certfile {tmp_path}: ")


def test_a_file_without_a_certificate_or_key_is_named(tls: TLSFiles, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    assert one_line_error(ssl_certfile=str(garbage), ssl_keyfile=str(tls.keyfile)) == (
        f"ssl_certfile {garbage}: no PEM certificate in it"
    )
    assert one_line_error(ssl_certfile=str(tls.certfile), ssl_keyfile=str(garbage)) == (
        f"ssl_keyfile {garbage}: no usable PEM private key in it"
    )
    assert one_line_error(**tls.settings(ssl_ca_certs=str(garbage), ssl_cert_reqs="required")) == (
        f"ssl_ca_certs {garbage}: no PEM certificate in it"
    )


def test_a_key_of_another_certificate_is_named(tls: TLSFiles, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    tls.ca.issue_cert("other.example").private_key_pem.write_to_path(str(other))
    assert one_line_error(ssl_certfile=str(tls.certfile), ssl_keyfile=str(other)) == (
        f"ssl_keyfile {other}: the private key does not match the certificate"
    )


def test_an_encrypted_key_needs_its_password(tls: TLSFiles, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(tls.server.private_key_pem.bytes(), None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"sesame"),
        )
    )
    settings = {"ssl_certfile": str(tls.certfile), "ssl_keyfile": str(encrypted)}
    assert one_line_error(**settings) == (
        f"ssl_keyfile {encrypted}: the private key is encrypted and ssl_keyfile_password is not set"
    )
    assert one_line_error(**settings, ssl_keyfile_password="wrong") == (
        f"ssl_keyfile {encrypted}: no usable PEM private key in it, "
        "or ssl_keyfile_password is wrong"
    )
    assert server_context(ServerConfig(**settings, ssl_keyfile_password="sesame")) is not None


async def test_serve_fails_before_it_starts(nursery, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(TLSConfigError, match=r"^ssl_certfile .*missing\.pem: cannot read it"):
        await nursery.start(serve, scheme_of, ServerConfig(port=0, ssl_certfile=missing))


def test_run_fails_before_trio_starts(tmp_path: Path) -> None:
    """`run` exits with the one line (status 1), before trio starts."""
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(SystemExit) as exited:
        run(scheme_of, ServerConfig(port=0, ssl_certfile=missing))
    assert re.match(r"trio-mcp: ssl_certfile .*missing\.pem: cannot read it", str(exited.value))
    assert isinstance(exited.value.__context__, TLSConfigError)
