"""The response reader, fed whole and byte by byte, and how responses are classified."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp._bench._response import (
    STREAM,
    PeerProtocolError,
    ResponseReader,
    classify,
    session_id,
    sse_events,
    sse_messages,
    status_error,
)

JSON_BODY = b'{"jsonrpc":"2.0","id":1000000001,"result":{"content":[{"type":"text","text":"hi"}]}}'
JSON = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"mcp-session-id: AbC123\r\ncontent-length: %d\r\n\r\n" % len(JSON_BODY) + JSON_BODY
)


def chunked(*parts: bytes, head: bytes = b"content-type: text/event-stream\r\n") -> bytes:
    out = b"HTTP/1.1 200 OK\r\n" + head + b"transfer-encoding: chunked\r\n\r\n"
    for part in parts:
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def event(message: dict | None, event_id: str = "1") -> bytes:
    data = b"" if message is None else orjson.dumps(message)
    return b"id: " + event_id.encode() + b"\nevent: message\ndata: " + data + b"\n\n"


PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
FINAL = {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}
SSE = chunked(event(None), event(PROGRESS), event(PROGRESS), event(FINAL))


def read_whole(data: bytes, **reset: bool) -> ResponseReader:
    reader = ResponseReader()
    reader.reset(**reset)
    assert reader.feed(data)
    return reader


def read_bytewise(data: bytes, **reset: bool) -> ResponseReader:
    reader = ResponseReader()
    reader.reset(**reset)
    done = [reader.feed(data[i : i + 1]) for i in range(len(data))]
    assert done[-1] and not any(done[:-1]), "complete exactly at the last byte"
    return reader


@pytest.mark.parametrize("read", [read_whole, read_bytewise])
def test_json_response(read) -> None:
    reader = read(JSON)
    assert (reader.status, reader.body, reader.is_sse, reader.close) == (
        200,
        JSON_BODY,
        False,
        False,
    )
    assert session_id(reader) == b"AbC123"
    assert classify(reader) == (None, 0)


@pytest.mark.parametrize("read", [read_whole, read_bytewise])
def test_chunked_sse_response_counts_progress_and_the_answer(read) -> None:
    reader = read(SSE)
    assert reader.is_sse and reader.status == 200
    assert [orjson.loads(m) for m in sse_messages(reader.body)] == [PROGRESS, PROGRESS, FINAL]
    assert classify(reader) == (None, 2)


def test_sse_events_keep_ids_and_priming_events() -> None:
    body = event(None, "a-1") + b": keepalive\n\n" + event(PROGRESS, "a-2") + b"data: x\n\n"
    assert sse_events(body) == [
        (b"a-1", b""),
        (b"a-2", orjson.dumps(PROGRESS)),
        (None, b"x"),
    ]
    assert sse_messages(body) == [orjson.dumps(PROGRESS), b"x"]


@given(st.lists(st.integers(min_value=1, max_value=len(SSE) - 1), max_size=12))
def test_taking_the_body_as_it_comes_gives_it_all_once(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [SSE[a:b] for a, b in zip([0, *points], [*points, len(SSE)], strict=True)]
    reader = ResponseReader()
    taken = b""
    for piece in pieces:
        done = reader.feed(piece)
        taken += reader.take_body()
    assert done
    assert taken + reader.body == read_whole(SSE).body


@pytest.mark.parametrize("read", [read_whole, read_bytewise])
def test_chunk_extensions_trailers_and_crlf_events(read) -> None:
    body = b"data: " + orjson.dumps(FINAL) + b"\r\n\r\n"
    data = chunked(body[:7], body[7:]).replace(b"%x\r\n" % 7, b"%x;ext=1\r\n" % 7, 1)
    data = data[:-2] + b"x-trailer: 1\r\n\r\n"
    reader = read(data)
    assert classify(reader) == (None, 0)


@pytest.mark.parametrize("read", [read_whole, read_bytewise])
def test_no_body_statuses_and_interim_responses(read) -> None:
    reader = read(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
    )
    assert (reader.status, reader.body) == (202, b"")
    assert status_error(reader) is None
    reader = read(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert (reader.status, reader.body) == (204, b"")


def test_body_until_close_and_http10() -> None:
    reader = ResponseReader()
    assert not reader.feed(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{}")
    assert reader.feed_eof()
    assert (reader.body, reader.close) == (b"{}", True)


def test_connection_close_is_seen() -> None:
    reader = read_whole(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    assert reader.close


def test_get_stream_is_done_at_its_head_and_later_bytes_are_ignored() -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    for reader in (read_whole(head + b"5\r\n: hi\n\r\n", stream_head=True),):
        assert reader.state == STREAM and reader.status == 200
        assert not reader.feed(b"a\r\n: ping\n\n\r\n")  # keepalives, not kept
    reader = read_bytewise(head, stream_head=True)
    assert reader.state == STREAM


def test_leftover_bytes_wait_for_the_next_response() -> None:
    reader = ResponseReader()
    assert reader.feed(JSON + JSON[:20])
    assert reader.leftover()
    reader.reset()
    assert reader.feed(JSON[20:])
    assert reader.body == JSON_BODY


@pytest.mark.parametrize(
    "data",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXX",
    ],
)
def test_malformed_responses_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(PeerProtocolError):
        ResponseReader().feed(data)
    reader = ResponseReader()

    def bytewise() -> None:
        for i in range(len(data)):
            reader.feed(data[i : i + 1])

    with pytest.raises(PeerProtocolError):
        bytewise()


def test_a_close_before_or_inside_a_response_is_an_error() -> None:
    with pytest.raises(PeerProtocolError, match="before a response"):
        ResponseReader().feed_eof()
    reader = ResponseReader()
    reader.feed(JSON[:-5])
    with pytest.raises(PeerProtocolError, match="middle"):
        reader.feed_eof()


def test_an_endless_head_is_refused() -> None:
    reader = ResponseReader()
    line = b"x-filler: " + b"a" * 1000 + b"\r\n"
    for _ in range(64):
        assert not reader.feed(line)
    with pytest.raises(PeerProtocolError, match="too large"):
        reader.feed(line)


def json_response(status: int, body: bytes) -> ResponseReader:
    return read_whole(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n" % (status, len(body)) + body)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}', "jsonrpc -32602"),
        (200, b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}', "tool error"),
        (200, b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}', None),
        (200, b'{"jsonrpc":"2.0","id":1,"result":{"text":"no \\"error\\" here"}}', None),
        (200, b"not json", "protocol"),
        (200, b'{"error":', "protocol"),
        (
            404,
            b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}',
            "http 404 jsonrpc -32601",
        ),
        (503, b"busy", "http 503"),
        (400, b'{"jsonrpc":"2.0","error":{"message":"no code"}}', "http 400 jsonrpc (no code)"),
    ],
)
def test_classification(status: int, body: bytes, kind: str | None) -> None:
    assert classify(json_response(status, body))[0] == kind


def test_sse_classification() -> None:
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "boom"}}
    assert classify(read_whole(chunked(event(PROGRESS), event(error)))) == ("jsonrpc -32603", 1)
    assert classify(read_whole(chunked(event(PROGRESS)))) == ("protocol", 1)  # never answered
    assert classify(read_whole(chunked(b"data: {nope\n\n"))) == ("protocol", 0)
    request = {"jsonrpc": "2.0", "id": 9, "method": "roots/list"}
    assert classify(read_whole(chunked(event(request), event(FINAL)))) == (None, 0)
    not_ok = read_whole(
        b"HTTP/1.1 500 X\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n"
    )
    assert classify(not_ok) == ("http 500", 0)
    assert status_error(not_ok) == "http 500"


@given(st.lists(st.integers(min_value=1, max_value=len(SSE) - 1), max_size=12))
def test_any_split_reads_the_same(cuts: list[int]) -> None:
    for data in (SSE, JSON):
        points = sorted({c for c in cuts if c < len(data)})
        pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
        reader = ResponseReader()
        results = [reader.feed(piece) for piece in pieces]
        assert results[-1] and not any(results[:-1])
        assert reader.body == read_whole(data).body
