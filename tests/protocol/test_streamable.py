"""Media types, Origin and Host rules of the Streamable HTTP endpoint."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp._protocol._admission import (
    JSON,
    SSE,
    accepts,
    host_allowed,
    host_is_valid,
    host_name,
    is_json_content_type,
    origin_allowed,
    origin_host,
)


@pytest.mark.parametrize(
    ("accept", "json", "sse"),
    [
        ([b"application/json, text/event-stream"], True, True),
        ([b"application/json", b"text/event-stream"], True, True),
        ([b"*/*"], True, True),
        ([b"application/*"], True, False),
        ([b"text/*;q=0.5, application/json"], True, True),
        ([b"application/json;q=0, */*"], False, True),
        ([b"APPLICATION/JSON ; q=1"], True, False),
        ([b"text/event-stream;q=bogus"], False, False),
        ([], False, False),
        ([b"text/html"], False, False),
    ],
)
def test_accepts(accept: list[bytes], json: bool, sse: bool) -> None:
    assert accepts(accept, JSON) is json
    assert accepts(accept, SSE) is sse


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (b"application/json", True),
        (b"application/json; charset=utf-8", True),
        (b"Application/Json", True),
        (b"application/json-seq", False),
        (b"text/json", False),
        (None, False),
    ],
)
def test_json_content_type(value: bytes | None, ok: bool) -> None:
    assert is_json_content_type(value) is ok


@pytest.mark.parametrize(
    ("host", "name"),
    [(b"localhost:8000", b"localhost"), (b"[::1]:80", b"[::1]"), (b"Example.COM", b"example.com")],
)
def test_host_name(host: bytes, name: bytes) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (b"http://localhost:3000", b"localhost"),
        (b"https://[::1]", b"[::1]"),
        (b"null", None),
        (b"file://x", None),
        (b"http://a/b", None),
    ],
)
def test_origin_host(origin: bytes, host: bytes | None) -> None:
    assert origin_host(origin) == host


def test_origins() -> None:
    assert origin_allowed(b"http://127.0.0.1:9", frozenset(), loopback_only=True)
    assert not origin_allowed(b"http://127.0.0.1:9", frozenset(), loopback_only=False)
    assert not origin_allowed(b"http://evil.example", frozenset(), loopback_only=True)
    assert origin_allowed(b"https://app.example", frozenset({b"https://app.example"}), False)
    assert origin_allowed(b"https://any.example", frozenset({b"*"}), False)


def test_hosts() -> None:
    assert host_allowed(b"localhost:1", frozenset(), loopback_only=True)
    assert not host_allowed(b"evil.example.com", frozenset(), loopback_only=True)
    assert host_allowed(b"evil.example.com", frozenset(), loopback_only=False)
    assert host_allowed(b"api.example:443", frozenset({b"api.example"}), loopback_only=False)
    assert not host_allowed(b"other.example", frozenset({b"api.example"}), loopback_only=False)
    assert host_allowed(None, frozenset(), loopback_only=True)


@pytest.mark.parametrize(
    "host",
    [
        b"localhost",
        b"localhost:8000",
        b"localhost:",  # an empty port is allowed (RFC 3986 3.2.3)
        b"127.0.0.1:65535",
        b"[::1]",
        b"[::1]:80",
        b"[2001:db8::7]",
        b"api.example",
        b"xn--nxasmq6b.example",
        b"a%20b",
        b"",  # (RFC 9112 3.2: an empty Host is valid; it is just not ours)
    ],
)
def test_valid_hosts(host: bytes) -> None:
    assert host_is_valid(host)


@pytest.mark.parametrize(
    "host",
    [
        b"local host",  # once 403 "Host not allowed"; RFC 9112 says 400
        b"localhost:abc",  # once read as localhost
        b"[::1]junk",  # once read as [::1]
        b"[::1]:80:80",
        b"localhost:80:80",
        b"localhost:65536",
        b"localhost:000080",
        b"localhost:+80",
        b"[not-ipv6]",
        b"[::1",
        b"a%zz",
        b"user@localhost",
        b"localhost/path",
        b"\xff",
    ],
)
def test_invalid_hosts(host: bytes) -> None:
    assert not host_is_valid(host)


@given(st.binary(max_size=40))
def test_any_host_value_is_judged_without_error(host: bytes) -> None:
    assert host_is_valid(host) in (True, False)


@given(
    st.one_of(
        st.from_regex(rb"\A[a-z0-9.-]{1,30}\Z"),
        st.ip_addresses(v=4).map(lambda a: str(a).encode()),
        st.ip_addresses(v=6).map(lambda a: b"[" + str(a).encode() + b"]"),
    ),
    st.one_of(st.none(), st.integers(0, 65535)),
)
def test_every_name_and_port_of_the_grammar_is_valid(name: bytes, port: int | None) -> None:
    host = name if port is None else name + b":%d" % port
    assert host_is_valid(host)
    if name.startswith(b"["):
        assert ipaddress.ip_address(name[1:-1].decode())
