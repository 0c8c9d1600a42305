"""check_headers (both twins): singletons, framing, Host, Connection, Expect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_mcp._errors import RemoteProtocolError

FIXTURE_SETTINGS = settings(
    max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)

SINGLETONS = {
    b"host": "Host",
    b"content-length": "Content-Length",
    b"content-type": "Content-Type",
    b"authorization": "Authorization",
    b"origin": "Origin",
    b"mcp-protocol-version": "MCP-Protocol-Version",
    b"mcp-session-id": "Mcp-Session-Id",
    b"mcp-method": "Mcp-Method",
    b"mcp-name": "Mcp-Name",
    b"last-event-id": "Last-Event-ID",
}
# A valid value for each singleton (Content-Length needs digits).
VALID = {name: b"7" if name == b"content-length" else b"v" for name in SINGLETONS}
HOST = (b"host", b"a.example")


def outcome(func: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func(*args))
    except RemoteProtocolError as exc:
        return ("error", type(exc), exc.status, str(exc))


def error(impl: Any, headers: list[tuple[bytes, bytes]], http_minor: int = 1) -> tuple[int, str]:
    with pytest.raises(RemoteProtocolError) as info:
        impl.headers.check_headers(headers, http_minor)
    return info.value.status, str(info.value)


# -- constants -----------------------------------------------------------------------


def test_constants(impl: Any, py_impl: Any) -> None:
    mod = impl.headers
    assert (mod.FLAG_CLOSE, mod.FLAG_KEEP_ALIVE, mod.FLAG_EXPECT_CONTINUE) == (1, 2, 4)
    assert type(mod.SINGLETON_HEADERS) is frozenset
    assert frozenset(SINGLETONS) == mod.SINGLETON_HEADERS == py_impl.headers.SINGLETON_HEADERS


# -- accepted ------------------------------------------------------------------------


def test_typical_mcp_headers(impl: Any) -> None:
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"user-agent", b"python-httpx/0.28.1"),
        (b"accept", b"application/json, text/event-stream"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"connection", b"keep-alive"),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", b"2025-11-25"),
        (b"mcp-session-id", b"4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f"),
        (b"content-length", b"98"),
    ]
    singles, length, flags = impl.headers.check_headers(headers, 1)
    assert singles == {
        b"host": b"127.0.0.1:8000",
        b"content-type": b"application/json",
        b"mcp-protocol-version": b"2025-11-25",
        b"mcp-session-id": b"4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f",
        b"content-length": b"98",
    }
    assert (length, flags) == (98, impl.headers.FLAG_KEEP_ALIVE)
    assert type(length) is int


def test_all_singletons_once(impl: Any) -> None:
    headers = [*VALID.items(), (b"x-other", b"a,b"), (b"x-other", b"c")]
    singles, length, flags = impl.headers.check_headers(headers, 1)
    assert singles == VALID
    assert (length, flags) == (7, 0)


def test_empty(impl: Any) -> None:
    assert impl.headers.check_headers([], 0) == ({}, -1, 0)
    assert impl.headers.check_headers([HOST], 1) == ({b"host": b"a.example"}, -1, 0)


def test_mcp_name_may_hold_commas(impl: Any) -> None:
    headers = [HOST, (b"mcp-name", b"file:///a,b.txt")]
    assert impl.headers.check_headers(headers, 1)[0][b"mcp-name"] == b"file:///a,b.txt"


def test_names_must_be_lowercase(impl: Any) -> None:
    """check_headers expects parse_head's lowercased names; others are unknown."""
    headers = [HOST, (b"Host", b"x"), (b"Content-Length", b"x"), (b"Expect", b"x")]
    assert impl.headers.check_headers(headers, 1) == ({b"host": b"a.example"}, -1, 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"0", 0),
        (b"98", 98),
        (b"00012", 12),
        (b"9" * 18, 10**18 - 1),
        (b"0" * 18, 0),
    ],
)
def test_content_length(impl: Any, value: bytes, expected: int) -> None:
    assert impl.headers.check_headers([HOST, (b"content-length", value)], 1)[1] == expected


@pytest.mark.parametrize(
    ("values", "http_minor", "flags"),
    [
        ([b"close"], 1, 1),
        ([b"keep-alive"], 1, 2),
        ([b"Keep-Alive"], 0, 2),
        ([b"CLOSE"], 0, 1),
        ([b"close, keep-alive"], 1, 3),
        ([b" \tclose\t ,\t keep-alive \t"], 1, 3),
        ([b"upgrade", b"ClOsE"], 1, 1),
        ([b"te", b"keep-alive", b"upgrade"], 1, 2),
        ([b"close", b"close"], 1, 1),
        ([b",,close,,"], 1, 1),
        ([b""], 1, 0),
        ([b"closed", b"x-close", b"keep-alive-ish", b"keep alive", b"close;x", b'"close"'], 1, 0),
        ([b"clo\rse", b"-lose"], 1, 0),
    ],
)
def test_connection(impl: Any, values: list[bytes], http_minor: int, flags: int) -> None:
    headers = [HOST] + [(b"connection", v) for v in values]
    assert impl.headers.check_headers(headers, http_minor)[2] == flags


@pytest.mark.parametrize("value", [b"100-continue", b"100-Continue", b"100-CONTINUE"])
def test_expect_continue(impl: Any, value: bytes) -> None:
    flags = impl.headers.check_headers([HOST, (b"expect", value)], 1)[2]
    assert flags == impl.headers.FLAG_EXPECT_CONTINUE


@pytest.mark.parametrize("value", [b"100-continue", b"foo", b"", b"102-processing"])
def test_expect_ignored_on_http10(impl: Any, value: bytes) -> None:
    assert impl.headers.check_headers([(b"expect", value)], 0) == ({}, -1, 0)


def test_flags_combine(impl: Any) -> None:
    headers = [(b"connection", b"close"), (b"expect", b"100-continue"), HOST]
    assert impl.headers.check_headers(headers, 1)[2] == 1 | 4


# -- rejected ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SINGLETONS))
def test_duplicate_singleton(impl: Any, name: bytes) -> None:
    headers = [HOST, (name, VALID[name]), (name, VALID[name])]
    if name == b"host":
        headers = headers[1:]
    assert error(impl, headers) == (400, f"duplicate {SINGLETONS[name]} header")
    # also when the values differ and on HTTP/1.0
    headers[-1] = (name, b"0")
    assert error(impl, headers, 0) == (400, f"duplicate {SINGLETONS[name]} header")


@pytest.mark.parametrize("name", sorted(set(SINGLETONS) - {b"mcp-name"}))
def test_comma_joined_singleton(impl: Any, name: bytes) -> None:
    for value in [b"a,b", b",", b"1, 2", b"a,"]:
        assert error(impl, [HOST, (name, value)] if name != b"host" else [(name, value)]) == (
            400,
            f"comma-joined {SINGLETONS[name]} header",
        )


@pytest.mark.parametrize(
    ("value", "status"),
    [
        (b"", 400),
        (b"+1", 400),
        (b"-1", 400),
        (b" 1", 400),
        (b"1 ", 400),
        (b"1 2", 400),
        (b"0x10", 400),
        (b"1.0", 400),
        (b"1e3", 400),
        (b"\xef\xbc\x91", 400),  # FULLWIDTH DIGIT ONE
        (b"\xb2", 400),  # SUPERSCRIPT TWO in Latin-1
        (b"a" * 19, 400),
        (b"1" * 19, 413),
        (b"0" * 19, 413),
        (b"9" * 40, 413),
    ],
)
def test_bad_content_length(impl: Any, value: bytes, status: int) -> None:
    message = "invalid Content-Length" if status == 400 else "Content-Length too large"
    assert error(impl, [HOST, (b"content-length", value)]) == (status, message)


@pytest.mark.parametrize("value", [b"chunked", b"identity", b"", b"xchunked", b"chunked, identity"])
@pytest.mark.parametrize("http_minor", [0, 1])
def test_transfer_encoding(impl: Any, value: bytes, http_minor: int) -> None:
    te = (b"transfer-encoding", value)
    cl = (b"content-length", b"5")
    not_supported = (501, "request Transfer-Encoding is not supported")
    together = (400, "Transfer-Encoding together with Content-Length")
    assert error(impl, [HOST, te], http_minor) == not_supported
    assert error(impl, [HOST, te, te], http_minor) == not_supported
    assert error(impl, [HOST, te, cl], http_minor) == together
    assert error(impl, [cl, HOST, te], http_minor) == together


def test_missing_host(impl: Any) -> None:
    assert error(impl, []) == (400, "missing Host header")
    assert error(impl, [(b"x-host", b"a"), (b"hosts", b"a")]) == (400, "missing Host header")
    assert impl.headers.check_headers([], 0) == ({}, -1, 0)
    # Any minor version other than 1 is not HTTP/1.1 for this check.
    assert impl.headers.check_headers([], 2) == ({}, -1, 0)


@pytest.mark.parametrize(
    "value", [b"foo", b"", b"100-continue, foo", b"100-continuex", b" 100-continue", b"100"]
)
def test_unsupported_expect(impl: Any, value: bytes) -> None:
    assert error(impl, [HOST, (b"expect", value)]) == (417, "unsupported Expect")


@pytest.mark.parametrize(
    ("headers", "http_minor", "expected"),
    [
        # in a header: duplicate before comma before Content-Length syntax
        ([HOST, (b"host", b"a,b")], 1, (400, "duplicate Host header")),
        ([HOST, (b"content-length", b"1,1")], 1, (400, "comma-joined Content-Length header")),
        # headers in order: the first offending one wins
        (
            [(b"expect", b"x"), (b"content-length", b"x")],
            1,
            (417, "unsupported Expect"),
        ),
        (
            [(b"content-length", b"x"), (b"expect", b"x")],
            1,
            (400, "invalid Content-Length"),
        ),
        ([(b"origin", b"a"), (b"origin", b"a,b"), HOST, HOST], 1, (400, "duplicate Origin header")),
        # loop errors before Transfer-Encoding, which comes before Host
        ([(b"transfer-encoding", b"chunked"), (b"expect", b"x")], 1, (417, "unsupported Expect")),
        (
            [(b"transfer-encoding", b"chunked"), HOST, HOST],
            1,
            (400, "duplicate Host header"),
        ),
        (
            [(b"transfer-encoding", b"chunked")],
            1,
            (501, "request Transfer-Encoding is not supported"),
        ),
        (
            [(b"transfer-encoding", b"chunked"), (b"content-length", b"1" * 19)],
            1,
            (413, "Content-Length too large"),
        ),
        ([(b"expect", b"x")], 1, (417, "unsupported Expect")),
    ],
)
def test_check_order(
    impl: Any, headers: list[tuple[bytes, bytes]], http_minor: int, expected: tuple[int, str]
) -> None:
    assert error(impl, headers, http_minor) == expected


def test_with_parse_head(impl: Any) -> None:
    head = (
        b"POST /mcp HTTP/1.1\r\nHOST: a\r\nConnection: Upgrade, Close\r\n"
        b"Expect: 100-Continue\r\nMcp-Name: file:///x,y\r\nContent-Length: 12 \r\n\r\n"
    )
    _, _, minor, headers = impl.httphead.parse_head(head, 8192, 100)
    assert impl.headers.check_headers(headers, minor) == (
        {b"host": b"a", b"mcp-name": b"file:///x,y", b"content-length": b"12"},
        12,
        impl.headers.FLAG_CLOSE | impl.headers.FLAG_EXPECT_CONTINUE,
    )


# -- differential --------------------------------------------------------------------

NAMES = [
    *SINGLETONS,
    b"transfer-encoding",
    b"connection",
    b"expect",
    b"x-other",
    b"hos",
    b"hostx",
    b"Host",
    b"mcp-names",
]
VALUES = st.one_of(
    st.sampled_from(
        [
            b"",
            b"0",
            b"12",
            b"1" * 18,
            b"1" * 19,
            b"a,b",
            b"close",
            b"Keep-Alive",
            b" close , keep-alive",
            b"100-continue",
            b"100-CONTINUE",
            b"chunked",
        ]
    ),
    st.binary(max_size=12),
    st.lists(st.sampled_from([b"close", b"keep-alive", b",", b" ", b"\t", b"1", b"x"])).map(
        b"".join
    ),
)


@FIXTURE_SETTINGS
@given(
    headers=st.lists(st.tuples(st.sampled_from(NAMES), VALUES), max_size=8),
    http_minor=st.sampled_from([0, 1, 1, 2]),
)
@example(headers=[(b"content-length", b"1" * 18)], http_minor=0)
def test_differential(
    py_impl: Any, compiled_impl: Any, headers: list[tuple[bytes, bytes]], http_minor: int
) -> None:
    expected = outcome(py_impl.headers.check_headers, headers, http_minor)
    assert outcome(compiled_impl.headers.check_headers, headers, http_minor) == expected
