"""The client behind trusted proxies (RFC 7239 ``Forwarded``, and
``X-Forwarded-For``/``-Proto``/``-Host``): believed from trusted peers only,
read from the right, ignored whole when malformed."""

from __future__ import annotations

import logging

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import Request, Response, ServerConfig, serve
from trio_mcp._http._forwarded import ORIGINS_NAMED, Trust, forwarded_client, parse_forwarded

TRUST = Trust(["10.0.0.0/8", "::1"])
PEER = "10.0.0.1"


def client(*headers: tuple[bytes, bytes]) -> tuple[str, str | None, bytes | None]:
    return forwarded_client(PEER, list(headers), TRUST)


def test_x_forwarded_for_is_read_from_the_right() -> None:
    assert client((b"x-forwarded-for", b"203.0.113.7"))[0] == "203.0.113.7"
    # a client that sends its own header cannot choose its address
    assert client((b"x-forwarded-for", b"1.2.3.4, 203.0.113.7, 10.0.0.2"))[0] == "203.0.113.7"
    # two header lines are one list
    spoof = [(b"x-forwarded-for", b"1.2.3.4"), (b"x-forwarded-for", b"198.51.100.9")]
    assert client(*spoof)[0] == "198.51.100.9"
    # every hop a proxy of ours: the leftmost is the client
    assert client((b"x-forwarded-for", b"10.1.1.1, 10.2.2.2"))[0] == "10.1.1.1"


def test_scheme_and_host_come_with_the_client() -> None:
    got = client(
        (b"x-forwarded-for", b"203.0.113.7"),
        (b"x-forwarded-proto", b"HTTPS"),
        (b"x-forwarded-host", b"mcp.example.com"),
    )
    assert got == ("203.0.113.7", "https", b"mcp.example.com")
    assert (
        client((b"x-forwarded-for", b"203.0.113.7"), (b"x-forwarded-proto", b"gopher"))[1] is None
    )


def test_forwarded_is_preferred_and_understood() -> None:
    got = client(
        (b"x-forwarded-for", b"198.51.100.1"),
        (b"forwarded", b'for=192.0.2.60;proto=https;host="mcp.example.com", for=10.0.0.9'),
    )
    assert got == ("192.0.2.60", "https", b"mcp.example.com")
    assert client((b"forwarded", b'for="[2001:db8:cafe::17]:4711"'))[0] == "2001:db8:cafe::17"
    assert client((b"forwarded", b"for=192.0.2.43:80"))[0] == "192.0.2.43"
    assert client((b"forwarded", b'FOR="192.0.2.44"'))[0] == "192.0.2.44"


@pytest.mark.parametrize(
    "value",
    [b'for="192.0.2.60', b"for", b"=192.0.2.60", b"for=unknown", b"for=_hidden", b"for=\xff"],
)
def test_what_cannot_be_read_leaves_the_peer_the_client(value: bytes) -> None:
    assert client((b"forwarded", value)) == (PEER, None, None)


def test_nothing_forwarded_is_the_peer() -> None:
    assert client() == (PEER, None, None)
    assert client((b"x-forwarded-for", b"")) == (PEER, None, None)


def test_trust_takes_addresses_and_networks() -> None:
    assert TRUST.trusts("10.200.0.1") and TRUST.trusts("::1") and TRUST.trusts("::ffff:10.0.0.5")
    assert not TRUST.trusts("192.0.2.1") and not TRUST.trusts("not an address")
    assert not Trust([])
    with pytest.raises(ValueError, match="not an IP address"):
        Trust(["10.0.0.0/8", "proxy.example"])
    with pytest.raises(ValueError, match="forwarded_allow_ips"):
        ServerConfig(forwarded_allow_ips=("nginx",))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [b"forwarded", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"]
            ),
            st.binary(max_size=40),
        ),
        max_size=4,
    )
)
def test_any_header_values_name_a_client(headers: list[tuple[bytes, bytes]]) -> None:
    address, scheme, host = forwarded_client(PEER, headers, TRUST)
    assert isinstance(address, str) and address
    assert scheme in (None, "http", "https")
    assert host is None or isinstance(host, bytes)


def test_parse_forwarded_keeps_quoted_separators() -> None:
    assert parse_forwarded([b'for="a,b;c";by=x, for=y']) == [
        {"for": "a,b;c", "by": "x"},
        {"for": "y"},
    ]


async def who(request: Request) -> Response:
    host = request.singles.get(b"host", b"")
    return Response(200, [], f"{request.client} {request.scheme} {host.decode()}".encode())


async def ask(port: int, source: str, extra: bytes) -> bytes:
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    async with stream:
        await stream.send_all(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra + b"\r\n"
        )
        data = b""
        with trio.fail_after(5):
            while chunk := await stream.receive_some(4096):
                data += chunk
    return data.split(b"\r\n\r\n", 1)[1]


async def test_only_a_trusted_peer_may_say_who_the_client_is(nursery: trio.Nursery) -> None:
    config = ServerConfig(port=0, forwarded_allow_ips=("127.0.0.1",))
    server = await nursery.start(serve, who, config)
    port = server.ports[0]
    forwarded = b"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: mcp.example\r\n"
    assert await ask(port, "127.0.0.1", forwarded) == b"203.0.113.7 https mcp.example"
    assert await ask(port, "127.0.0.2", forwarded) == b"127.0.0.2 http 127.0.0.1"
    assert await ask(port, "127.0.0.1", b"") == b"127.0.0.1 http 127.0.0.1"


def test_each_public_origin_is_logged_once_and_few_are(caplog) -> None:
    caplog.set_level(logging.INFO, "trio_mcp.server")
    trust = Trust(["10.0.0.0/8"])
    for _ in range(3):
        trust.note_origin("https", b"mcp.example")
    trust.note_origin("http", b"mcp.example")
    for n in range(ORIGINS_NAMED * 3):  # (hosts a client may invent through the proxy)
        trust.note_origin("https", f"h{n}.example".encode())
    lines = [record.getMessage() for record in caplog.records]
    assert lines[:2] == [
        "clients reach this server through a trusted proxy at https://mcp.example",
        "clients reach this server through a trusted proxy at http://mcp.example",
    ]
    assert len(lines) == ORIGINS_NAMED + 1
    assert lines[-1] == "more public origins through the proxies: no more are named"
    assert len(trust.origins) == ORIGINS_NAMED + 1


async def test_a_proxied_request_names_its_public_origin(nursery: trio.Nursery, caplog) -> None:
    caplog.set_level(logging.INFO, "trio_mcp.server")
    config = ServerConfig(port=0, forwarded_allow_ips=("127.0.0.1",))
    server = await nursery.start(serve, who, config)
    forwarded = b"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n"
    await ask(server.ports[0], "127.0.0.1", forwarded + b"X-Forwarded-Host: mcp.example\r\n")
    await ask(server.ports[0], "127.0.0.2", forwarded + b"X-Forwarded-Host: other.example\r\n")
    named = [r.getMessage() for r in caplog.records if "trusted proxy at" in r.getMessage()]
    assert named == ["clients reach this server through a trusted proxy at https://mcp.example"]
