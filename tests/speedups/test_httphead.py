"""Request head framing and parsing (both twins), differential and against h11."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h11
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_mcp._errors import RemoteProtocolError

FIXTURE_SETTINGS = settings(
    max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
MAX_LINE = 8192
MAX_HEADERS = 100

TYPICAL = (
    b"POST /mcp HTTP/1.1\r\n"
    b"Host: 127.0.0.1:8000\r\n"
    b"User-Agent: python-httpx/0.28.1\r\n"
    b"Accept: application/json, text/event-stream\r\n"
    b"Accept-Encoding: gzip, deflate\r\n"
    b"Connection: keep-alive\r\n"
    b"Content-Type: application/json\r\n"
    b"MCP-Protocol-Version: 2025-11-25\r\n"
    b"Mcp-Session-Id: 4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f\r\n"
    b"Content-Length: 98\r\n"
    b"\r\n"
)
TYPICAL_HEADERS = [
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

TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def outcome(func: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """The result, or the error as (type, status, message), for comparing twins."""
    try:
        return ("ok", func(*args))
    except RemoteProtocolError as exc:
        return ("error", type(exc), exc.status, str(exc))


def feed_bytewise(find_head_end: Callable[[bytearray, int], int], data: bytes) -> tuple[Any, ...]:
    """Grow a buffer one byte at a time as a connection would; stop at the end."""
    buf = bytearray()
    for byte in data:
        old_len = len(buf)
        buf.append(byte)
        result = outcome(find_head_end, buf, max(0, old_len - 3))
        if result != ("ok", -1):
            return result
    return ("ok", -1)


def head(*lines: bytes) -> bytes:
    return b"".join(line + b"\r\n" for line in lines) + b"\r\n"


# -- parse_head: accepted heads ------------------------------------------------------


def test_typical_mcp_head(impl: Any) -> None:
    result = impl.httphead.parse_head(TYPICAL, MAX_LINE, MAX_HEADERS)
    assert result == (b"POST", b"/mcp", 1, TYPICAL_HEADERS)
    assert type(result) is tuple
    assert all(type(x) is bytes for pair in result[3] for x in pair)


@pytest.mark.parametrize(
    ("request_line", "method", "target", "minor"),
    [
        (b"GET / HTTP/1.1", b"GET", b"/", 1),
        (b"GET /mcp?x=1&y=%20#frag HTTP/1.1", b"GET", b"/mcp?x=1&y=%20#frag", 1),
        (b"POST http://a.example/mcp HTTP/1.1", b"POST", b"http://a.example/mcp", 1),
        (b"GET https://a.example:8443/ HTTP/1.1", b"GET", b"https://a.example:8443/", 1),
        (b"GET a+b-c.9://x HTTP/1.1", b"GET", b"a+b-c.9://x", 1),
        (b"GET http:// HTTP/1.1", b"GET", b"http://", 1),
        (b"OPTIONS * HTTP/1.1", b"OPTIONS", b"*", 1),
        (b"GET / HTTP/1.0", b"GET", b"/", 0),
        (b"GET / HTTP/1.5", b"GET", b"/", 1),
        (b"GET / HTTP/1.9", b"GET", b"/", 1),
        (b"get / HTTP/1.1", b"get", b"/", 1),
        (b"M-!#$%&'*+.^_`|~9 / HTTP/1.1", b"M-!#$%&'*+.^_`|~9", b"/", 1),
        (b"DELETE //a//b/~!$&'()*+,;=:@ HTTP/1.1", b"DELETE", b"//a//b/~!$&'()*+,;=:@", 1),
    ],
)
def test_request_line(
    impl: Any, request_line: bytes, method: bytes, target: bytes, minor: int
) -> None:
    assert impl.httphead.parse_head(head(request_line), MAX_LINE, MAX_HEADERS) == (
        method,
        target,
        minor,
        [],
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"X-Empty:", (b"x-empty", b"")),
        (b"X-Empty: \t ", (b"x-empty", b"")),
        (b"X-A: \t a b\t\tc \t", (b"x-a", b"a b\t\tc")),
        (b"X-A:value", (b"x-a", b"value")),
        (b"X-Obs: caf\xc3\xa9 \xff\x80", (b"x-obs", b"caf\xc3\xa9 \xff\x80")),
        (b"X-Colons: a:b::c", (b"x-colons", b"a:b::c")),
        (b"CONTENT-TYPE: Application/JSON", (b"content-type", b"Application/JSON")),
        (TCHAR + b": ~", (TCHAR.lower(), b"~")),
        (b"X: " + bytes(range(0x20, 0x7F)), (b"x", bytes(range(0x21, 0x7F)))),
    ],
)
def test_header_line(impl: Any, line: bytes, expected: tuple[bytes, bytes]) -> None:
    result = impl.httphead.parse_head(head(b"GET / HTTP/1.1", line), MAX_LINE, MAX_HEADERS)
    assert result[3] == [expected]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (b"HOST", b"host"),
        (b"Mcp-Session-Id", b"mcp-session-id"),
        (b"MCP-PROTOCOL-VERSION", b"mcp-protocol-version"),
        (b"x-forwarded-PROTO", b"x-forwarded-proto"),
        (b"Te", b"te"),
        (b"Hosts", b"hosts"),  # one byte longer than a common name
        (b"Hst", b"hst"),  # one byte shorter
        (b"Mcp-Session-Ix", b"mcp-session-ix"),  # the same length, last byte differs
        (b"Mcp_Session-Id", b"mcp_session-id"),  # a tchar where the common name has "-"
    ],
)
def test_common_and_near_common_names(impl: Any, name: bytes, expected: bytes) -> None:
    data = head(b"GET / HTTP/1.1", name + b": v", name + b": w")
    _, _, _, headers = impl.httphead.parse_head(data, MAX_LINE, MAX_HEADERS)
    assert headers == [(expected, b"v"), (expected, b"w")]
    assert all(type(n) is bytes for n, _ in headers)


def test_invalid_name_that_lowercases_near_a_common_one(impl: Any) -> None:
    data = head(b"GET / HTTP/1.1", b"Hos\x80: v")
    with pytest.raises(RemoteProtocolError, match="invalid character in header name"):
        impl.httphead.parse_head(data, MAX_LINE, MAX_HEADERS)


def test_order_and_duplicates_preserved(impl: Any) -> None:
    data = head(b"GET / HTTP/1.1", b"B: 1", b"a: 2", b"B: 3", b"b: 4")
    _, _, _, headers = impl.httphead.parse_head(data, MAX_LINE, MAX_HEADERS)
    assert headers == [(b"b", b"1"), (b"a", b"2"), (b"b", b"3"), (b"b", b"4")]


def test_limits_are_inclusive(impl: Any) -> None:
    request_line = b"GET /" + b"a" * 10 + b" HTTP/1.1"  # 24 bytes
    header_line = b"X: " + b"v" * 21  # 24 bytes
    data = head(request_line, header_line, header_line)
    result = impl.httphead.parse_head(data, 24, 2)
    assert result[3] == [(b"x", b"v" * 21)] * 2
    assert outcome(impl.httphead.parse_head, data, 23, 2)[2] == 414
    assert outcome(impl.httphead.parse_head, head(b"GET / HTTP/1.1", header_line), 23, 2)[2:] == (
        431,
        "header line too long",
    )
    assert outcome(impl.httphead.parse_head, data, 24, 1)[2:] == (431, "too many header lines")
    assert impl.httphead.parse_head(head(b"GET / HTTP/1.1"), 24, 0) == (b"GET", b"/", 1, [])


# -- parse_head: rejected heads ------------------------------------------------------

R = b"GET / HTTP/1.1"
H = b"Host: a"

ERROR_CASES: list[tuple[bytes, int, str]] = [
    # framing
    (b"", 400, "request head does not end with CRLFCRLF"),
    (b"\r\n", 400, "request head does not end with CRLFCRLF"),
    (b"GET / HTTP/1.1\r\nHost: a\r\n", 400, "request head does not end with CRLFCRLF"),
    (b"GET / HTTP/1.1\r\n\r\n\n", 400, "request head does not end with CRLFCRLF"),
    (b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "bare CR in request head"),
    (b"GET / HTTP/1.1\r\r\n\r\n", 400, "bare CR in request head"),
    (b"GET /\r HTTP/1.1\r\n\r\n", 400, "bare CR in request head"),
    (b"\rGET / HTTP/1.1\r\n\r\n", 400, "bare CR in request head"),
    (b"GET / HTTP/1.1\r\nX: a\r\r\n\r\n", 400, "bare CR in request head"),
    (b"GET / HTTP/1.1\nHost: a\r\n\r\n", 400, "bare LF in request head"),
    (b"GET / HTTP/1.1\r\nX: a\nb\r\n\r\n", 400, "bare LF in request head"),
    (b"\nGET / HTTP/1.1\r\n\r\n", 400, "bare LF in request head"),
    (b"GET / HTTP/1.1\r\nX: a\r\n\n\r\n\r\n", 400, "bare LF in request head"),
    (b"\r\n\r\n", 400, "empty request line"),
    (b"\r\nGET / HTTP/1.1\r\n\r\n", 400, "empty request line"),
    # request line
    (head(b"GET /" + b"a" * MAX_LINE + b" HTTP/1.1"), 414, "request line too long"),
    (head(b"GET"), 400, "malformed request line"),
    (head(b"GET/HTTP/1.1"), 400, "malformed request line"),
    (head(b"GET\t/\tHTTP/1.1"), 400, "malformed request line"),
    (head(b"GET /"), 400, "request line without HTTP version"),
    (head(b"GET /index.html"), 400, "request line without HTTP version"),
    (head(b" / HTTP/1.1"), 400, "invalid method"),
    (head(b" GET / HTTP/1.1"), 400, "invalid method"),
    (head(b"GE(T / HTTP/1.1"), 400, "invalid method"),
    (head(b"G\xc3\x89T / HTTP/1.1"), 400, "invalid method"),
    (head(b"GET\x00 / HTTP/1.1"), 400, "invalid method"),
    (head(b"GET / HTTP/1.1 "), 400, "invalid HTTP version"),
    (head(b"GET / x HTTP/1.1"), 400, "invalid HTTP version"),
    (head(b"GET / http/1.1"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/1"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/1.10"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/11"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/1,1"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/a.1"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/1.a"), 400, "invalid HTTP version"),
    (head(b"GET / HTTPS/1.1"), 400, "invalid HTTP version"),
    (head(b"GET / HTTP/2.0"), 505, "HTTP version not supported"),
    (head(b"GET / HTTP/0.9"), 505, "HTTP version not supported"),
    (head(b"GET / HTTP/3.0"), 505, "HTTP version not supported"),
    (head(b"GET  HTTP/1.1"), 400, "empty request target"),
    (head(b"GET  / HTTP/1.1"), 400, "invalid HTTP version"),
    (head(b"GET /a\x7f HTTP/1.1"), 400, "invalid character in request target"),
    (head(b"GET /caf\xc3\xa9 HTTP/1.1"), 400, "invalid character in request target"),
    (head(b"GET /\x01 HTTP/1.1"), 400, "invalid character in request target"),
    (head(b"GET /a\tb HTTP/1.1"), 400, "invalid character in request target"),
    (head(b"GET * HTTP/1.1"), 400, "asterisk-form request target without OPTIONS"),
    (head(b"options * HTTP/1.1"), 400, "asterisk-form request target without OPTIONS"),
    (head(b"OPTIONS *x HTTP/1.1"), 400, "invalid request target"),
    (head(b"OPTIONS ** HTTP/1.1"), 400, "invalid request target"),
    (head(b"CONNECT example.com:443 HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET example.com:443 HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET example.com/mcp HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET 1http://a/ HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET ://a/ HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET ht_tp://a/ HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET http:/a HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET http:a//b HTTP/1.1"), 400, "invalid request target"),
    (head(b"GET ?q HTTP/1.1"), 400, "invalid request target"),
    # header lines
    (head(R, b"X: a", b" b"), 400, "obsolete line folding in header"),
    (head(R, b"X: a", b"\tb"), 400, "obsolete line folding in header"),
    (head(R, b" X: a"), 400, "obsolete line folding in header"),
    (head(R, b"X a"), 400, "header line without colon"),
    (head(R, b"X"), 400, "header line without colon"),
    (R + b"\r\n\r\nX: a\r\n\r\n", 400, "header line without colon"),
    (head(R, b": a"), 400, "empty header name"),
    (head(R, b":"), 400, "empty header name"),
    (head(R, b"X : a"), 400, "whitespace between header name and colon"),
    (head(R, b"X\t: a"), 400, "whitespace between header name and colon"),
    (head(R, b"X y: a"), 400, "invalid character in header name"),
    (head(R, b"X(y): a"), 400, "invalid character in header name"),
    (head(R, b"X\x00: a"), 400, "invalid character in header name"),
    (head(R, b"X\xc3\xa9: a"), 400, "invalid character in header name"),
    (head(R, b"X;: a"), 400, "invalid character in header name"),
    (head(R, b"X: a\x00b"), 400, "invalid character in header value"),
    (head(R, b"X: \x01"), 400, "invalid character in header value"),
    (head(R, b"X: a\x1f"), 400, "invalid character in header value"),
    (head(R, b"X: a\x7f"), 400, "invalid character in header value"),
    (head(R, b"X: a\x0bb"), 400, "invalid character in header value"),
    (head(R, b"X: a\x0cb"), 400, "invalid character in header value"),
    (head(R, *[H] * (MAX_HEADERS + 1)), 431, "too many header lines"),
    (head(R, b"X: " + b"a" * MAX_LINE), 431, "header line too long"),
    # which error wins
    (head(b"GET /" + b"a" * MAX_LINE + b" HTTP/1.1", b"X: \r"), 400, "bare CR in request head"),
    (head(b"G(T / HTTP/1.1", b"X: a\nb"), 400, "bare LF in request head"),
    (b"\r\nGET\r / HTTP/1.1\r\n\r\n", 400, "bare CR in request head"),
    (b"\r\nGET\n / HTTP/1.1\r\n\r\n", 400, "bare LF in request head"),
    (b"GET\r /\n HTTP/1.1\r\n\r\n", 400, "bare CR in request head"),
    (head(b"G(T /" + b"a" * MAX_LINE + b" HTTP/1.1"), 414, "request line too long"),
    (head(b"G(T / HTTP/2.0"), 400, "invalid method"),
    (head(b"GET /\x7f HTTP/2.0"), 505, "HTTP version not supported"),
    (head(b"GET /\x7f HTTP/1.1 "), 400, "invalid HTTP version"),
    (head(b"GET * HTTP/2.0"), 505, "HTTP version not supported"),
    (head(R, b"X(: a", b"X : a"), 400, "invalid character in header name"),
    (head(R, b"X : \x00"), 400, "whitespace between header name and colon"),
    (head(R, b"X(: \x00"), 400, "invalid character in header name"),
    (head(R, b"X: \x00", *[H] * MAX_HEADERS), 400, "invalid character in header value"),
    (head(R, *[H] * MAX_HEADERS, b"X(" * MAX_LINE), 431, "too many header lines"),
    (head(R, b"X(" * MAX_LINE), 431, "header line too long"),
]


@pytest.mark.parametrize(("data", "status", "message"), ERROR_CASES)
def test_rejected(impl: Any, data: bytes, status: int, message: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        impl.httphead.parse_head(data, MAX_LINE, MAX_HEADERS)
    assert (info.value.status, str(info.value)) == (status, message)


# -- find_head_end -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (TYPICAL, len(TYPICAL)),
        (TYPICAL + b"{body\n\n\r\r}", len(TYPICAL)),
        (TYPICAL + TYPICAL, len(TYPICAL)),
        (b"\r\n\r\n", 4),
        (b"\r\n\r\nGET", 4),
        (b"GET / HTTP/1.1\r\n\r", -1),
        (b"GET / HTTP/1.1\r\n", -1),
        (b"GET / HTTP/1.1\r\n\r\r\n", -1),
        (b"", -1),
        (b"\r", -1),
        (b"a\r\r\n\r\n", 6),
    ],
)
def test_find_head_end(impl: Any, data: bytes, expected: int) -> None:
    find = impl.httphead.find_head_end
    assert find(data, 0) == expected
    assert find(bytearray(data), 0) == expected
    assert find(data, -5) == expected
    assert feed_bytewise(find, data) == ("ok", expected)


@pytest.mark.parametrize(
    "data",
    [
        b"\n",
        b"\nGET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\n\r\n",
        b"GET / HTTP/1.1\r\n\n",
        b"GET / HTTP/1.1\r\nX: a\n\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\r\n\n",
        b"GET / HTTP/1.1\n\n",
    ],
)
def test_find_head_end_bare_lf(impl: Any, data: bytes) -> None:
    find = impl.httphead.find_head_end
    expected = ("error", RemoteProtocolError, 400, "bare LF in request head")
    assert outcome(find, data, 0) == expected
    assert outcome(find, bytearray(data), 0) == expected
    assert feed_bytewise(find, data) == expected


def test_find_head_end_scans_only_from_start(impl: Any) -> None:
    find = impl.httphead.find_head_end
    data = b"a\nb\r\nc\r\n\r\nbody"
    # The bare LF at 1 is reported while it is in the scanned region ...
    assert outcome(find, data, 0)[3] == "bare LF in request head"
    assert outcome(find, data, 1)[3] == "bare LF in request head"
    # ... and not once the scan starts after it.
    assert find(data, 2) == 10
    # An LF at `start` looks one byte back for its CR.
    assert find(b"ab\r\ncd", 3) == -1
    assert outcome(find, b"ab\n\r\n", 2)[3] == "bare LF in request head"
    # The terminator must lie wholly at or after `start`.
    assert find(b"ab\r\n\r\n", 2) == 6
    assert find(b"ab\r\n\r\n", 3) == -1
    assert find(b"ab\r\n\r\n", 6) == -1
    assert find(b"ab\r\n\r\n", 100) == -1
    # A terminator before `start` does not hide a bare LF after it.
    assert outcome(find, b"\r\n\r\nx\n", 3)[3] == "bare LF in request head"


def test_find_head_end_type(impl: Any) -> None:
    with pytest.raises(TypeError):
        impl.httphead.find_head_end("GET / HTTP/1.1\r\n\r\n", 0)


# -- differential: compiled vs twin --------------------------------------------------

VCHAR = bytes(range(0x21, 0x7F))
OBS_TEXT = bytes(range(0x80, 0x100))


def over(alphabet: bytes, min_size: int = 0, max_size: int = 16) -> st.SearchStrategy[bytes]:
    """Byte strings made of the bytes of `alphabet`."""
    return st.lists(st.sampled_from(alphabet), min_size=min_size, max_size=max_size).map(bytes)


PIECES = [
    b"\r\n",
    b"\r\n",
    b"\r",
    b"\n",
    b" ",
    b"\t",
    b":",
    b": ",
    b"GET",
    b"OPTIONS",
    b"/",
    b"*",
    b"http://",
    b"HTTP/1.1",
    b"HTTP/2.0",
    b"Host",
    b"x",
    b"\x00",
    b"\x7f",
    b"\xe9",
    b"(",
]


def weighted(good: list[bytes], bad: list[bytes]) -> st.SearchStrategy[bytes]:
    """Mostly one of `good`, sometimes one of `bad`."""
    return st.sampled_from(good * 3 + bad)


@st.composite
def near_valid_heads(draw: st.DrawFn) -> bytes:
    """A request line and header lines from the grammar, sometimes mutated."""
    method = draw(weighted([b"GET", b"POST", b"OPTIONS", b"get", b"M-1"], [b"G(T", b""]))
    target = draw(weighted([b"/", b"/mcp?a=b", b"*", b"http://a/b"], [b"a.b:1", b"/\x80", b""]))
    version = draw(weighted([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.7"], [b"HTTP/2.0", b"http/1.1"]))
    sep = draw(weighted([b" "] * 3, [b"  ", b"\t"]))
    lines = [method + sep + target + b" " + version]
    for _ in range(draw(st.integers(0, 6))):
        name = draw(
            weighted(
                [b"Host", b"X-A", b"mcp-session-id", b"Content-TYPE", b"MCP-Protocol-Version"],
                [b"", b"X y", b"X\x80", b"Hos\x80", b"Mcp-Nam:", b"accept\t"],
            )
        )
        colon = draw(weighted([b":", b": ", b":\t"], [b" :", b""]))
        value = draw(st.one_of(over(VCHAR + OBS_TEXT + b" \t", 0, 12), st.binary(max_size=12)))
        lines.append(name + colon + value)
    data = b"".join(line + b"\r\n" for line in lines) + b"\r\n"
    for _ in range(draw(st.integers(-2, 2))):
        pos = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = draw(st.sampled_from([b"\r", b"\n", b" ", b"\t", b":", b"\x00", b"a", b"\xff"]))
        if action == "insert":
            data = data[:pos] + byte + data[pos:]
        elif action == "delete":
            data = data[:pos] + data[pos + 1 :]
        else:
            data = data[:pos] + byte + data[pos + 1 :]
    return data


HEADS = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=64).map(lambda b: b + b"\r\n\r\n"),
    st.lists(st.sampled_from(PIECES), max_size=30).map(b"".join),
    st.lists(st.sampled_from(PIECES), max_size=30).map(lambda x: b"".join(x) + b"\r\n\r\n"),
    near_valid_heads(),
    near_valid_heads(),
)


@FIXTURE_SETTINGS
@given(
    data=HEADS,
    max_line=st.one_of(st.just(MAX_LINE), st.integers(0, 40)),
    max_headers=st.one_of(st.just(MAX_HEADERS), st.integers(0, 4)),
)
@example(data=TYPICAL, max_line=MAX_LINE, max_headers=MAX_HEADERS)
@example(data=b"\r\nGET\n / HTTP/1.1\r\n\r\n", max_line=MAX_LINE, max_headers=MAX_HEADERS)
def test_parse_head_differential(
    py_impl: Any, compiled_impl: Any, data: bytes, max_line: int, max_headers: int
) -> None:
    expected = outcome(py_impl.httphead.parse_head, data, max_line, max_headers)
    assert outcome(compiled_impl.httphead.parse_head, data, max_line, max_headers) == expected


@FIXTURE_SETTINGS
@given(data=HEADS, body=st.binary(max_size=8), start=st.integers(-3, 80))
def test_find_head_end_differential(
    py_impl: Any, compiled_impl: Any, data: bytes, body: bytes, start: int
) -> None:
    data += body
    whole = outcome(py_impl.httphead.find_head_end, data, 0)
    assert outcome(compiled_impl.httphead.find_head_end, data, 0) == whole
    assert outcome(compiled_impl.httphead.find_head_end, bytearray(data), 0) == whole
    assert feed_bytewise(py_impl.httphead.find_head_end, data) == whole
    assert feed_bytewise(compiled_impl.httphead.find_head_end, data) == whole
    from_start = outcome(py_impl.httphead.find_head_end, data, start)
    assert outcome(compiled_impl.httphead.find_head_end, data, start) == from_start


@settings(max_examples=300, deadline=None)
@given(data=HEADS)
def test_find_head_end_bytewise_twin(data: bytes) -> None:
    """Without the compiled module too: byte-by-byte feeding equals one call."""
    from trio_mcp import _httphead_py

    whole = outcome(_httphead_py.find_head_end, data, 0)
    assert feed_bytewise(_httphead_py.find_head_end, data) == whole


@FIXTURE_SETTINGS
@given(data=HEADS)
def test_find_head_end_then_parse_head(impl: Any, data: bytes) -> None:
    """What find_head_end delimits has no bare LF, and parse_head agrees on it."""
    result = outcome(impl.httphead.find_head_end, data, 0)
    if result[0] == "ok" and result[1] > 0:
        head_bytes = data[: result[1]]
        parsed = outcome(impl.httphead.parse_head, head_bytes, MAX_LINE, MAX_HEADERS)
        assert parsed[-1] != "bare LF in request head"
        assert parsed[-1] != "request head does not end with CRLFCRLF"


# -- oracle: h11 ---------------------------------------------------------------------
#
# On purpose stricter than h11 (cases h11 accepts and we reject):
#   - control characters other than HTAB, and DEL, in field values;
#   - obs-fold continuation lines and bare LF line endings;
#   - request targets other than origin-form, absolute-form and OPTIONS *;
#   - HTTP versions other than 1.x (505).
# h11 rejects a head without Host on HTTP/1.1 or with two Host fields, which
# parse_head leaves to check_headers: the generator always sends one Host.


def h11_parse(data: bytes) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]]] | None:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    if not isinstance(event, h11.Request):
        return None
    return (event.method, event.target, event.http_version, list(event.headers))


@st.composite
def oracle_heads(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A head h11 may accept, and whether it stays inside our grammar."""
    inside = True
    method = draw(over(TCHAR, 1, 8))
    target_kind = draw(
        st.sampled_from(["origin"] * 6 + ["absolute"] * 2 + ["asterisk", "authority"])
    )
    if target_kind == "origin":
        target = b"/" + draw(over(VCHAR, 0, 12))
    elif target_kind == "absolute":
        target = draw(st.sampled_from([b"http", b"https", b"h2c", b"a+b.c-d"])) + b"://a.example/x"
    elif target_kind == "asterisk":
        target = b"*"
        if draw(st.booleans()):
            method = b"OPTIONS"
        inside = method == b"OPTIONS"
    else:
        target = b"a.example:443"
        inside = False
    version = draw(st.sampled_from([b"1.1"] * 5 + [b"1.0", b"1.0", b"1.4", b"2.0", b"0.9"]))
    if version[:1] != b"1":
        inside = False
    lines = [method + b" " + target + b" HTTP/" + version]

    alphabets = st.sampled_from(
        [VCHAR, VCHAR + b" \t", VCHAR + b" \t", VCHAR + OBS_TEXT + b" \t"] * 3
        + [VCHAR + b"\x01\x7f"]
    )
    fields: list[bytes] = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(over(TCHAR, 1, 10))
        if name.lower() in (b"host", b"content-length", b"transfer-encoding"):
            name = b"x-" + name
        value = draw(over(draw(alphabets)))
        if b"\x01" in value or b"\x7f" in value:
            inside = False
        ows1 = draw(st.sampled_from([b"", b" ", b"\t", b" \t "]))
        ows2 = draw(st.sampled_from([b"", b" ", b"\t", b" \t "]))
        fields.append(name + b":" + ows1 + value + ows2)
    fields.insert(draw(st.integers(0, len(fields))), b"Host: a.example")
    if draw(st.integers(0, 19)) == 0:
        fields.append(b" folded continuation")
        inside = False
    lines += fields

    eol = b"\r\n"
    if draw(st.integers(0, 19)) == 0:
        eol = b"\n"
        inside = False
    return b"".join(line + eol for line in lines) + b"\r\n", inside


@FIXTURE_SETTINGS
@given(case=oracle_heads())
def test_h11_oracle(impl: Any, case: tuple[bytes, bool]) -> None:
    data, inside = case
    ours = outcome(impl.httphead.parse_head, data, MAX_LINE, MAX_HEADERS)
    theirs = h11_parse(data)
    if ours[0] == "ok":
        # Whatever we accept, h11 accepts with the same reading.
        assert theirs is not None
        method, target, minor, headers = ours[1]
        assert (method, target, headers) == (theirs[0], theirs[1], theirs[3])
        assert minor == (0 if theirs[2] == b"1.0" else 1)
        assert theirs[2][:2] == b"1."
    # Inside our grammar we accept (and so h11 does, see above); outside it,
    # on purpose, we reject, wherever h11 stands.
    assert (ours[0] == "ok") == inside, ours


def test_h11_oracle_examples(impl: Any) -> None:
    """Fixed cases for both branches of the oracle."""
    parsed = impl.httphead.parse_head(TYPICAL, MAX_LINE, MAX_HEADERS)
    theirs = h11_parse(TYPICAL)
    assert theirs is not None
    assert (parsed[0], parsed[1], b"1.%d" % parsed[2], parsed[3]) == theirs
    for data in [
        head(b"CONNECT a.example:443 HTTP/1.1", H),
        head(b"GET * HTTP/1.1", H),
        head(R, H, b"X: a\x01"),
        head(R, H, b"X: a", b" b"),
        b"GET / HTTP/1.1\nHost: a\n\r\n",
    ]:
        assert h11_parse(data) is not None
        assert outcome(impl.httphead.parse_head, data, MAX_LINE, MAX_HEADERS)[0] == "error"
