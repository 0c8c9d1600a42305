"""The sans-IO HTTP/1.1 connection: framing, persistence and limits, without sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import LocalProtocolError, RemoteProtocolError, Response, ServerConfig
from trio_mcp._http._connection import (
    CLOSED,
    NEED_DATA,
    SEND_CONTINUE,
    HTTP11Connection,
    Phase,
    Request,
    method_not_allowed,
)

DATE = b"Sun, 29 Nov 2026 10:00:00 GMT"


def conn(**kwargs: object) -> HTTP11Connection:
    return HTTP11Connection(ServerConfig(**kwargs))  # type: ignore[arg-type]


def post(body: bytes = b"{}", extra: bytes = b"", version: bytes = b"1.1") -> bytes:
    return (
        b"POST /mcp HTTP/" + version + b"\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n" % len(body) + extra + b"\r\n" + body
    )


def next_request(c: HTTP11Connection) -> Request:
    event = c.next_event()
    assert isinstance(event, Request), event
    return event


def split_response(data: bytes) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(b": ")
        assert name.lower() not in headers, f"duplicate {name!r}"
        headers[name.lower()] = value
    return status, headers, body


def test_one_request_whole() -> None:
    c = conn()
    c.receive_data(post(b'{"a":1}'))
    request = next_request(c)
    assert (request.method, request.target, request.path, request.http_minor) == (
        "POST",
        "/mcp",
        "/mcp",
        1,
    )
    assert request.body == b'{"a":1}'
    assert request.header(b"content-type") == b"application/json"
    assert request.singles[b"host"] == b"h"
    assert c.phase is Phase.RESPONDING


def test_request_fed_byte_by_byte() -> None:
    c = conn()
    data = post(b'{"jsonrpc":"2.0"}')
    for i, byte in enumerate(data):
        assert c.next_event() is NEED_DATA, i
        c.receive_data(bytes([byte]))
    assert next_request(c).body == b'{"jsonrpc":"2.0"}'


def test_phases_follow_the_request() -> None:
    c = conn()
    assert c.next_event() is NEED_DATA and c.phase is Phase.IDLE
    c.receive_data(b"POST /mcp HTTP/1.1\r\n")
    assert c.next_event() is NEED_DATA and c.phase is Phase.HEAD
    c.receive_data(b"Host: h\r\nContent-Length: 2\r\n\r\n{")
    assert c.next_event() is NEED_DATA and c.phase is Phase.BODY
    c.receive_data(b"}")
    next_request(c)
    assert c.phase is Phase.RESPONDING
    c.full_response(Response(200), DATE)
    assert c.phase is Phase.IDLE


def test_pipelined_requests_come_out_in_order() -> None:
    c = conn()
    c.receive_data(post(b"[1]") + post(b"[2]") + b"GET /x?y=1 HTTP/1.1\r\nHost: h\r\n\r\n")
    bodies = []
    for _ in range(3):
        request = next_request(c)
        bodies.append((request.method, request.path, request.query, request.body))
        c.full_response(Response(200), DATE)
    assert bodies == [
        ("POST", "/mcp", "", b"[1]"),
        ("POST", "/mcp", "", b"[2]"),
        ("GET", "/x", "y=1", b""),
    ]
    assert c.next_event() is NEED_DATA


def test_next_request_only_after_the_answer() -> None:
    c = conn()
    c.receive_data(post() + post())
    next_request(c)
    with pytest.raises(LocalProtocolError):
        c.next_event()


def test_leading_empty_lines_are_ignored() -> None:
    c = conn()
    c.receive_data(b"\r\n\r\n" + post())
    assert next_request(c).method == "POST"


def test_absolute_form_target() -> None:
    c = conn()
    c.receive_data(b"GET http://h:8/mcp?q HTTP/1.1\r\nHost: h:8\r\n\r\n")
    request = next_request(c)
    assert (request.target, request.path, request.query) == ("http://h:8/mcp?q", "/mcp", "q")


@pytest.mark.parametrize(
    ("target", "host"),
    [(b"http://a.example:8/mcp", b"a.example:8"), (b"http://a.example", b"a.example")],
)
def test_an_absolute_form_targets_authority_stands_for_host(target: bytes, host: bytes) -> None:
    """RFC 9112 3.2.2: the Host header is ignored; the target's authority counts."""
    c = conn()
    c.receive_data(b"GET " + target + b" HTTP/1.1\r\nHost: other.example\r\n\r\n")
    assert next_request(c).header(b"host") == host


@pytest.mark.parametrize(
    ("target", "path", "query"),
    [
        (b"/mcp", "/mcp", ""),
        (b"/mcp?", "/mcp", ""),
        (b"/mcp?u=http://x/y", "/mcp", "u=http://x/y"),  # "://" after the "?"
        (b"/a://b", "/a://b", ""),  # origin-form that contains "://"
        (b"http://h:8/mcp", "/mcp", ""),
        (b"http://h:8", "/", ""),
        (b"http://h:8?q", "/", "q"),
    ],
)
def test_target_splits_into_path_and_query(target: bytes, path: str, query: str) -> None:
    c = conn()
    c.receive_data(b"GET " + target + b" HTTP/1.1\r\nHost: h:8\r\n\r\n")
    request = next_request(c)
    assert (request.target, request.path, request.query) == (target.decode(), path, query)


def test_leading_empty_lines_may_arrive_in_pieces() -> None:
    c = conn()
    c.receive_data(b"\r\n\r")  # a lone CR at the end: not yet an empty line
    assert c.next_event() is NEED_DATA
    c.receive_data(b"\n" + post())
    assert next_request(c).method == "POST"


def test_response_has_length_date_and_no_connection_header() -> None:
    c = conn()
    c.receive_data(post())
    next_request(c)
    status, headers, body = split_response(
        c.full_response(Response(200, [(b"content-type", b"application/json")], b"{}"), DATE)
    )
    assert status == b"HTTP/1.1 200 OK"
    assert headers == {b"date": DATE, b"content-type": b"application/json", b"content-length": b"2"}
    assert body == b"{}"
    assert not c.must_close


@pytest.mark.parametrize(
    ("request_bytes", "closes", "connection_header"),
    [
        (post(), False, None),
        (post(extra=b"Connection: close\r\n"), True, b"close"),
        (post(extra=b"Connection: Keep-Alive, Close\r\n"), True, b"close"),
        (post(version=b"1.0"), True, b"close"),
        (post(version=b"1.0", extra=b"Connection: keep-alive\r\n"), False, b"keep-alive"),
        (post(version=b"1.0", extra=b"Connection: keep-alive, close\r\n"), True, b"close"),
    ],
)
def test_persistence(request_bytes: bytes, closes: bool, connection_header: bytes | None) -> None:
    c = conn()
    c.receive_data(request_bytes)
    next_request(c)
    _, headers, _ = split_response(c.full_response(Response(200), DATE))
    assert headers.get(b"connection") == connection_header
    assert c.must_close is closes
    assert (c.next_event() is CLOSED) is closes


def test_request_limit_per_connection() -> None:
    c = conn(max_requests_per_connection=3)
    c.receive_data(post() * 4)
    for i in range(3):
        next_request(c)
        _, headers, _ = split_response(c.full_response(Response(200), DATE))
        assert (headers.get(b"connection") == b"close") is (i == 2)
    assert c.must_close
    assert c.next_event() is CLOSED


def test_draining_closes_after_the_current_response() -> None:
    c = conn()
    c.receive_data(post())
    next_request(c)
    c.draining = True
    _, headers, _ = split_response(c.full_response(Response(200), DATE))
    assert headers[b"connection"] == b"close"
    assert c.next_event() is CLOSED


def test_head_response_has_length_but_no_body() -> None:
    c = conn()
    c.receive_data(b"HEAD /mcp HTTP/1.1\r\nHost: h\r\n\r\n" + post())
    assert next_request(c).method == "HEAD"
    data = c.full_response(Response(200, [], b"hello"), DATE)
    _, headers, body = split_response(data)
    assert headers[b"content-length"] == b"5"
    assert body == b""
    # the next response on the connection has its body again
    next_request(c)
    assert split_response(c.full_response(Response(200, [], b"hello"), DATE))[2] == b"hello"


@pytest.mark.parametrize("status", [204, 304, 101])
def test_no_body_statuses(status: int) -> None:
    c = conn()
    c.receive_data(post())
    next_request(c)
    _, headers, body = split_response(c.full_response(Response(status, [], b"x"), DATE))
    assert b"content-length" not in headers
    assert body == b""


def test_expect_continue_asks_for_interim_response_once() -> None:
    c = conn()
    c.receive_data(
        b"POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
    )
    assert c.next_event() is SEND_CONTINUE
    assert c.next_event() is NEED_DATA
    c.receive_data(b"null")
    assert next_request(c).body == b"null"


def test_expect_continue_not_sent_when_body_already_here() -> None:
    c = conn()
    c.receive_data(
        b"POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nnull"
    )
    assert next_request(c).body == b"null"


def test_expect_continue_with_oversized_body_is_413_without_continue() -> None:
    c = conn(max_body_bytes=10)
    c.receive_data(
        b"POST /mcp HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n"
    )
    with pytest.raises(RemoteProtocolError) as info:
        c.next_event()
    assert info.value.status == 413


def test_upgrade_request_is_an_ordinary_request() -> None:
    c = conn()
    c.receive_data(
        post(b"[42]", extra=b"Connection: upgrade\r\nUpgrade: websocket\r\n") + post(b"[7]")
    )
    assert next_request(c).body == b"[42]"
    c.full_response(Response(200), DATE)
    assert next_request(c).body == b"[7]"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"G" * 9000, 414),
        (b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * 17000, 431),
        (b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431),
        (post(b"x" * 20, version=b"1.1"), 413),
    ],
)
def test_limits(data: bytes, status: int) -> None:
    c = conn(max_body_bytes=10)
    c.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        c.next_event()
    assert info.value.status == status


@pytest.mark.parametrize(
    "data",
    [b"\x16\x03\x01\x02\x00", b"\x00", b'{"jsonrpc"', b"GET\t/", b"G\x80T / HTTP/1.1", b"\n"],
)
def test_bytes_that_cannot_begin_a_request_are_refused_at_once(data: bytes) -> None:
    """A TLS hello, a JSON body, a control byte: no line break needed to know."""
    c = conn()
    c.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        c.next_event()
    assert info.value.status == 400


@given(st.sampled_from([post(b"{}"), b"GET /mcp HTTP/1.1\r\nHost: h\r\n\r\n"]), st.data())
def test_every_beginning_of_a_request_waits_for_the_rest(
    request: bytes, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(request) - 1))
    c = conn()
    c.receive_data(b"\r\n" + request[:cut])  # (an empty line first is allowed)
    assert c.next_event() is NEED_DATA


#: RFC 9110 5.6.2, written out here rather than taken from the parser.
RFC_TCHAR = frozenset(
    b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)


@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"\r" not in b and b"\n" not in b))
def test_an_incomplete_line_is_refused_exactly_when_its_method_is_no_token(start: bytes) -> None:
    method = start.split(b" ", 1)[0][:32]
    c = conn()
    c.receive_data(start)
    if set(method) <= RFC_TCHAR:
        assert c.next_event() is NEED_DATA
    else:
        with pytest.raises(RemoteProtocolError) as info:
            c.next_event()
        assert info.value.status == 400


def test_oversized_request_line_noticed_before_the_head_limit() -> None:
    c = conn()
    for _ in range(9):  # 9 KiB of request line, well under the 16 KiB head limit
        c.receive_data(b"G" * 1024)
    with pytest.raises(RemoteProtocolError) as info:
        c.next_event()
    assert info.value.status == 414


@pytest.mark.parametrize(
    "data",
    [b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Le", post(b"0123456789")[:-3]],
)
def test_eof_inside_a_request_is_an_error(data: bytes) -> None:
    c = conn()
    c.receive_data(data)
    assert c.next_event() is NEED_DATA
    c.receive_data(b"")
    with pytest.raises(RemoteProtocolError) as info:
        c.next_event()
    assert info.value.status == 400


def test_eof_between_requests_is_a_clean_close() -> None:
    c = conn()
    c.receive_data(post())
    next_request(c)
    c.full_response(Response(200), DATE)
    c.receive_data(b"")
    assert c.next_event() is CLOSED


def test_error_response_closes() -> None:
    c = conn()
    status, headers, body = split_response(c.error_response(RemoteProtocolError("bad", 431), DATE))
    assert status == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert headers[b"connection"] == b"close"
    assert int(headers[b"content-length"]) == len(body)
    assert b"bad" in body
    assert c.must_close and c.next_event() is CLOSED


async def _pieces() -> object:
    yield b"data: 1\n\n"
    yield b""
    yield b"data: 2\n\n"


def test_streaming_on_http11_is_chunked() -> None:
    c = conn()
    c.receive_data(post())
    next_request(c)
    head = c.start_stream(200, [(b"content-type", b"text/event-stream")], DATE)
    _, headers, _ = split_response(head)
    assert headers[b"transfer-encoding"] == b"chunked"
    assert b"content-length" not in headers
    assert c.stream_chunk(b"data: 1\n\n") == b"9\r\ndata: 1\n\n\r\n"
    assert c.stream_chunk(b"") == b""  # an empty chunk would end the body
    assert c.end_stream() == b"0\r\n\r\n"
    assert not c.must_close
    assert c.phase is Phase.IDLE


def test_streaming_on_http10_is_close_delimited() -> None:
    c = conn()
    c.receive_data(post(version=b"1.0", extra=b"Connection: keep-alive\r\n"))
    next_request(c)
    head = c.start_stream(200, [], DATE)
    _, headers, _ = split_response(head)
    assert b"transfer-encoding" not in headers
    assert headers[b"connection"] == b"close"
    assert c.stream_chunk(b"abc") == b"abc"
    assert c.end_stream() == b""
    assert c.must_close


def test_streaming_head_request_sends_no_body() -> None:
    c = conn()
    c.receive_data(b"HEAD /mcp HTTP/1.1\r\nHost: h\r\n\r\n")
    next_request(c)
    head = c.start_stream(200, [], DATE)
    assert b"transfer-encoding" not in split_response(head)[1]
    assert not c.stream_body_allowed
    assert c.end_stream() == b""


def test_method_not_allowed_names_the_methods() -> None:
    response = method_not_allowed(["GET", "POST"])
    assert response.status == 405
    assert (b"allow", b"GET, POST") in response.headers


def test_response_without_request_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        conn().full_response(Response(200), DATE)


@pytest.mark.parametrize("size", [0, 1, 9, 10, 511, 512, 513, 70_000])
def test_content_length_is_the_body_length(size: int) -> None:
    # (small bodies take a pre-formatted line; the boundary is 512 bytes)
    c = conn()
    c.receive_data(post())
    next_request(c)
    body = b"x" * size
    _, headers, sent = split_response(c.full_response(Response(200, [], body), DATE))
    assert headers[b"content-length"] == str(size).encode()
    assert sent == body


@pytest.mark.parametrize(
    ("request_bytes", "framed"),
    [
        (post(), b"a\r\ndata: {}\n\n\r\n"),  # HTTP/1.1: one chunk per piece
        (post(version=b"1.0"), b"data: {}\n\n"),  # HTTP/1.0: as it is
        (b"HEAD /mcp HTTP/1.1\r\nHost: x\r\n\r\n", b""),  # HEAD: no body
    ],
)
def test_stream_pieces_are_framed_for_the_request(request_bytes: bytes, framed: bytes) -> None:
    # A writer takes stream_framer() once, at the head, for all its pieces.
    c = conn()
    c.receive_data(request_bytes)
    next_request(c)
    c.start_stream(200, [], DATE)
    frame = c.stream_framer()
    assert frame(b"data: {}\n\n") == framed == c.stream_chunk(b"data: {}\n\n")
    assert frame(b"") == b""
