"""SSE framing (both twins), checked against a small WHATWG event stream parser."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FIXTURE_SETTINGS = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
ERR_ID = "event_id must not contain CR, LF or NUL"
ERR_EVENT = "event must not contain CR or LF"
ERR_RETRY = "retry_ms must be >= 0"
ERR_COMMENT = "comment text must not contain CR or LF"


def outcome(func: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func(*args, **kwargs))
    except Exception as exc:  # compared, not swallowed
        return ("error", type(exc), str(exc))


# -- a WHATWG "event stream" parser (HTML, 9.2.6), on bytes ---------------------


@dataclass
class Event:
    type: bytes
    data: bytes
    last_event_id: bytes


@dataclass
class Parsed:
    events: list[Event]
    retry: int | None
    comments: list[bytes]


_EOL = re.compile(rb"\r\n|\r|\n")


def parse_stream(stream: bytes) -> Parsed:
    """Interpret a complete stream as a browser would (minus UTF-8 decoding)."""
    *lines, rest = _EOL.split(stream)
    assert rest == b"", "stream ends in the middle of a line"
    events: list[Event] = []
    comments: list[bytes] = []
    retry: int | None = None
    data = b""
    event_type = b""
    last_event_id = b""
    for line in lines:
        if line == b"":  # dispatch
            if data == b"":
                event_type = b""
                continue
            if data.endswith(b"\n"):
                data = data[:-1]
            events.append(Event(event_type or b"message", data, last_event_id))
            data = b""
            event_type = b""
            continue
        if line.startswith(b":"):
            comments.append(line[1:])
            continue
        if b":" in line:
            field, value = line.split(b":", 1)
            if value.startswith(b" "):
                value = value[1:]
        else:
            field, value = line, b""
        if field == b"event":
            event_type = value
        elif field == b"data":
            data += value + b"\n"
        elif field == b"id":
            if b"\0" not in value:
                last_event_id = value
        elif field == b"retry" and value and all(0x30 <= c <= 0x39 for c in value):
            retry = int(value)
        # any other field is ignored
    return Parsed(events, retry, comments)


def unchunk(wire: bytes) -> bytes:
    """The body of exactly one HTTP/1.1 chunk, checking the framing strictly."""
    size_line, sep, rest = wire.partition(b"\r\n")
    assert sep == b"\r\n"
    assert re.fullmatch(rb"[0-9a-f]+", size_line), size_line
    size = int(size_line, 16)
    assert size_line == b"%x" % size  # no leading zeros, lowercase
    assert len(rest) == size + 2
    assert rest[size:] == b"\r\n"
    return rest[:size]


def normalise(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


# -- format_event: tables ---------------------------------------------------------

FRAMES = [
    pytest.param(
        (b'{"jsonrpc":"2.0"}', b"s1-42", b"message"),
        {},
        b'id: s1-42\nevent: message\ndata: {"jsonrpc":"2.0"}\n\n',
        id="typical",
    ),
    pytest.param((b"x",), {}, b"data: x\n\n", id="data-only"),
    pytest.param(
        (b"x", b"1", b"e", 5000),
        {},
        b"id: 1\nevent: e\nretry: 5000\ndata: x\n\n",
        id="field-order",
    ),
    pytest.param((b"x",), {"retry_ms": 0}, b"retry: 0\ndata: x\n\n", id="retry-zero"),
    pytest.param(
        (b"x",), {"retry_ms": 10**20}, b"retry: 100000000000000000000\ndata: x\n\n", id="retry-big"
    ),
    pytest.param((b"",), {}, b"data: \n\n", id="empty-data"),
    pytest.param((b"", b"s1-0"), {}, b"id: s1-0\ndata: \n\n", id="priming"),
    pytest.param((b"x", b""), {}, b"id: \ndata: x\n\n", id="empty-id"),
    pytest.param((b"x", None, b""), {}, b"event: \ndata: x\n\n", id="empty-event"),
    pytest.param((b"x", None, b"a\0b"), {}, b"event: a\0b\ndata: x\n\n", id="nul-in-event-ok"),
    pytest.param((b"a\nb",), {}, b"data: a\ndata: b\n\n", id="lf"),
    pytest.param((b"a\rb",), {}, b"data: a\ndata: b\n\n", id="cr"),
    pytest.param((b"a\r\nb",), {}, b"data: a\ndata: b\n\n", id="crlf-is-one-break"),
    pytest.param((b"a\n\rb",), {}, b"data: a\ndata: \ndata: b\n\n", id="lf-cr-is-two-breaks"),
    pytest.param((b"a\r\rb",), {}, b"data: a\ndata: \ndata: b\n\n", id="cr-cr"),
    pytest.param((b"a\n",), {}, b"data: a\ndata: \n\n", id="trailing-break"),
    pytest.param((b"\r\n",), {}, b"data: \ndata: \n\n", id="only-crlf"),
    pytest.param((b"\na",), {}, b"data: \ndata: a\n\n", id="leading-break"),
    pytest.param((b" a ",), {}, b"data:  a \n\n", id="spaces-kept"),
    pytest.param((b"a\0b:c",), {}, b"data: a\0b:c\n\n", id="nul-and-colon-in-data"),
    pytest.param((bytearray(b"a\nb"),), {}, b"data: a\ndata: b\n\n", id="bytearray"),
    pytest.param((memoryview(b"abc"),), {}, b"data: abc\n\n", id="memoryview"),
    pytest.param(
        (memoryview(b"a-\nxb")[::2],), {}, b"data: a\ndata: b\n\n", id="strided-memoryview"
    ),
    pytest.param((b"x",), {"chunked": True}, b"9\r\ndata: x\n\n\r\n", id="chunked"),
    pytest.param((b"abc",), {"chunked": True}, b"b\r\ndata: abc\n\n\r\n", id="chunked-hex-letter"),
    pytest.param(
        (b"x" * 8,), {"chunked": True}, b"10\r\ndata: xxxxxxxx\n\n\r\n", id="chunked-two-digits"
    ),
    pytest.param((b"x",), {"chunked": 1}, b"9\r\ndata: x\n\n\r\n", id="chunked-truthy"),
    pytest.param((b"x",), {"chunked": 0}, b"data: x\n\n", id="chunked-falsy"),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), FRAMES)
def test_format_event(
    impl: Any, args: tuple[Any, ...], kwargs: dict[str, Any], expected: bytes
) -> None:
    result = impl.sse.format_event(*args, **kwargs)
    assert result == expected
    assert type(result) is bytes


def test_format_event_keywords(impl: Any) -> None:
    result = impl.sse.format_event(data=b"d", event_id=b"i", event=b"e", retry_ms=1, chunked=False)
    assert result == b"id: i\nevent: e\nretry: 1\ndata: d\n\n"


def test_large_chunk(impl: Any) -> None:
    data = b"y" * 100_000
    frame = impl.sse.format_event(data, b"id")
    assert impl.sse.format_event(data, b"id", chunked=True) == b"%x\r\n%b\r\n" % (
        len(frame),
        frame,
    )
    assert parse_stream(frame).events == [Event(b"message", data, b"id")]


def test_bytes_subclass_data(impl: Any) -> None:
    class B(bytes):
        pass

    assert impl.sse.format_event(B(b"a\nb"), B(b"i"), B(b"e")) == (
        b"id: i\nevent: e\ndata: a\ndata: b\n\n"
    )


EVENT_ERRORS = [
    pytest.param((b"x", b"a\nb"), {}, ValueError, ERR_ID, id="lf-in-id"),
    pytest.param((b"x", b"a\rb"), {}, ValueError, ERR_ID, id="cr-in-id"),
    pytest.param((b"x", b"a\0b"), {}, ValueError, ERR_ID, id="nul-in-id"),
    pytest.param((b"x", None, b"a\nb"), {}, ValueError, ERR_EVENT, id="lf-in-event"),
    pytest.param((b"x", None, b"a\rb"), {}, ValueError, ERR_EVENT, id="cr-in-event"),
    pytest.param((b"x",), {"retry_ms": -1}, ValueError, ERR_RETRY, id="negative-retry"),
    pytest.param(
        (b"x",), {"retry_ms": True}, TypeError, "retry_ms must be an int, not bool", id="bool-retry"
    ),
    pytest.param(
        (b"x",),
        {"retry_ms": 1.0},
        TypeError,
        "retry_ms must be an int, not float",
        id="float-retry",
    ),
    pytest.param(
        (b"x",), {"retry_ms": "1"}, TypeError, "retry_ms must be an int, not str", id="str-retry"
    ),
    pytest.param(
        ("x",),
        {},
        TypeError,
        "data must be bytes, bytearray or memoryview, not str",
        id="str-data",
    ),
    pytest.param(
        (None,),
        {},
        TypeError,
        "data must be bytes, bytearray or memoryview, not NoneType",
        id="none-data",
    ),
    pytest.param((b"x", "1"), {}, TypeError, "event_id must be bytes, not str", id="str-id"),
    pytest.param(
        (b"x", bytearray(b"1")),
        {},
        TypeError,
        "event_id must be bytes, not bytearray",
        id="bytearray-id",
    ),
    pytest.param(
        (b"x", None, "message"), {}, TypeError, "event must be bytes, not str", id="str-event"
    ),
    # the first bad argument, in signature order, wins
    pytest.param(("x", "1"), {}, TypeError, "data must be bytes", id="order-data-first"),
    pytest.param((b"x", b"\n", b"\n", -1), {}, ValueError, ERR_ID, id="order-id-before-event"),
    pytest.param((b"x", None, b"\n", -1), {}, ValueError, ERR_EVENT, id="order-event-before-retry"),
]


@pytest.mark.parametrize(("args", "kwargs", "exc_type", "message"), EVENT_ERRORS)
def test_format_event_errors(
    impl: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc_type: type[Exception],
    message: str,
) -> None:
    with pytest.raises(exc_type) as excinfo:
        impl.sse.format_event(*args, **kwargs)
    assert str(excinfo.value).startswith(message)


# -- format_comment ----------------------------------------------------------------

COMMENTS = [
    pytest.param((), {}, b":\n\n", id="default"),
    pytest.param((b"",), {}, b":\n\n", id="empty"),
    pytest.param((b"keepalive",), {}, b": keepalive\n\n", id="text"),
    pytest.param((b" x",), {}, b":  x\n\n", id="leading-space-kept"),
    pytest.param((b"a\0b",), {}, b": a\0b\n\n", id="nul-ok"),
    pytest.param((b"",), {"chunked": True}, b"3\r\n:\n\n\r\n", id="chunked-empty"),
    pytest.param((b"x" * 9, True), {}, b"d\r\n: xxxxxxxxx\n\n\r\n", id="chunked-text"),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), COMMENTS)
def test_format_comment(
    impl: Any, args: tuple[Any, ...], kwargs: dict[str, Any], expected: bytes
) -> None:
    result = impl.sse.format_comment(*args, **kwargs)
    assert result == expected
    assert type(result) is bytes


@pytest.mark.parametrize(
    ("text", "exc_type", "message"),
    [
        pytest.param(b"a\nb", ValueError, ERR_COMMENT, id="lf"),
        pytest.param(b"a\rb", ValueError, ERR_COMMENT, id="cr"),
        pytest.param(b"\r\n", ValueError, ERR_COMMENT, id="crlf"),
        pytest.param("x", TypeError, "text must be bytes, not str", id="str"),
        pytest.param(None, TypeError, "text must be bytes, not NoneType", id="none"),
        pytest.param(
            bytearray(b"x"), TypeError, "text must be bytes, not bytearray", id="bytearray"
        ),
    ],
)
def test_format_comment_errors(
    impl: Any, text: object, exc_type: type[Exception], message: str
) -> None:
    with pytest.raises(exc_type) as excinfo:
        impl.sse.format_comment(text)
    assert str(excinfo.value) == message


# -- round trips through the parser ---------------------------------------------------

sse_data = st.one_of(
    st.binary(),
    st.lists(
        st.sampled_from([b"\r", b"\n", b"\r\n", b"a", b" ", b":", b"\0", b"data: x", b"\xff"])
    ).map(b"".join),
)
event_ids = st.none() | st.binary().filter(lambda b: not (set(b) & {0, 10, 13}))
event_names = st.none() | st.binary().filter(lambda b: not (set(b) & {10, 13}))
retries = st.none() | st.integers(min_value=0, max_value=2**64)


@FIXTURE_SETTINGS
@given(data=sse_data, event_id=event_ids, event=event_names, retry=retries, chunked=st.booleans())
def test_round_trip(
    impl: Any,
    data: bytes,
    event_id: bytes | None,
    event: bytes | None,
    retry: int | None,
    chunked: bool,
) -> None:
    wire = impl.sse.format_event(data, event_id, event, retry, chunked)
    frame = unchunk(wire) if chunked else wire
    if chunked:
        assert frame == impl.sse.format_event(data, event_id, event, retry)
    parsed = parse_stream(frame)
    assert parsed.events == [
        Event(event or b"message", normalise(data), b"" if event_id is None else event_id)
    ]
    assert parsed.retry == retry
    assert parsed.comments == []


@FIXTURE_SETTINGS
@given(
    items=st.lists(
        st.one_of(
            st.tuples(st.just("event"), sse_data, event_ids),
            st.tuples(st.just("comment"), st.binary().filter(lambda b: not (set(b) & {10, 13}))),
        ),
        max_size=8,
    )
)
def test_stream_of_events_and_comments(impl: Any, items: list[tuple[Any, ...]]) -> None:
    stream = b""
    expected_events: list[Event] = []
    expected_comments: list[bytes] = []
    last_id = b""
    for item in items:
        if item[0] == "event":
            _, data, event_id = item
            stream += impl.sse.format_event(data, event_id)
            if event_id is not None:
                last_id = event_id
            expected_events.append(Event(b"message", normalise(data), last_id))
        else:
            _, text = item
            comment = impl.sse.format_comment(text, chunked=True)
            stream += unchunk(comment)
            expected_comments.append(b" " + text if text else b"")
    parsed = parse_stream(stream)
    assert parsed.events == expected_events
    assert parsed.comments == expected_comments


# -- compiled vs twin ------------------------------------------------------------------

any_data = st.one_of(
    sse_data,
    sse_data.map(bytearray),
    sse_data.map(memoryview),
    st.text(),
    st.none(),
    st.integers(),
)
any_field = st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=3), st.integers())
any_retry = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.floats(),
    st.text(),
)
any_flag = st.one_of(st.booleans(), st.integers(-1, 1), st.none(), st.binary(max_size=1))


@FIXTURE_SETTINGS
@given(data=any_data, event_id=any_field, event=any_field, retry=any_retry, chunked=any_flag)
def test_format_event_compiled_matches_twin(
    py_impl: Any,
    compiled_impl: Any,
    data: Any,
    event_id: Any,
    event: Any,
    retry: Any,
    chunked: Any,
) -> None:
    args = (data, event_id, event, retry, chunked)
    expected = outcome(py_impl.sse.format_event, *args)
    assert outcome(compiled_impl.sse.format_event, *args) == expected
    kwargs = {"event_id": event_id, "event": event, "retry_ms": retry, "chunked": chunked}
    assert outcome(compiled_impl.sse.format_event, data, **kwargs) == expected


@FIXTURE_SETTINGS
@given(text=st.one_of(st.binary(), st.text(max_size=3), st.none()), chunked=any_flag)
def test_format_comment_compiled_matches_twin(
    py_impl: Any, compiled_impl: Any, text: Any, chunked: Any
) -> None:
    expected = outcome(py_impl.sse.format_comment, text, chunked)
    assert outcome(compiled_impl.sse.format_comment, text, chunked) == expected
    assert outcome(compiled_impl.sse.format_comment, text=text, chunked=chunked) == expected
