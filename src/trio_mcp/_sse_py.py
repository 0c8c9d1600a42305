"""Server-Sent Events framing (pure-Python twin of ``_sse.pyx``).

Frames follow the WHATWG HTML "event stream" format with LF line endings.
This module defines the behaviour the compiled module must match exactly
(results, exception types and messages).

Accepted types, identical in both twins:

- `data`: `bytes` (or a subclass), `bytearray` or `memoryview` (its bytes, as
  ``memoryview.tobytes()`` gives them); anything else, `str` included, raises
  `TypeError`.
- `event_id`, `event`, `text`: `bytes` (or a subclass); `event_id` and `event`
  may also be None (field left out). Anything else raises `TypeError`.
- `retry_ms`: None or an `int` (not a `bool`), else `TypeError`; negative
  raises `ValueError`.
- `chunked`: any object, used for its truth value.

Arguments are checked in the order of the signature; the first problem wins.
"""

from __future__ import annotations

import re
from typing import NoReturn

__all__ = ["format_comment", "format_event"]

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")

_ERR_ID = "event_id must not contain CR, LF or NUL"
_ERR_EVENT = "event must not contain CR or LF"
_ERR_RETRY = "retry_ms must be >= 0"
_ERR_COMMENT = "comment text must not contain CR or LF"


def _as_data(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray):
        return bytes(data)
    if isinstance(data, memoryview):
        return data.tobytes()
    raise TypeError(f"data must be bytes, bytearray or memoryview, not {type(data).__name__}")


def _type_error(name: str, value: object) -> NoReturn:
    raise TypeError(f"{name} must be bytes, not {type(value).__name__}")


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(frame), frame)


def format_event(
    data: bytes | bytearray | memoryview,
    event_id: bytes | None = None,
    event: bytes | None = None,
    retry_ms: int | None = None,
    chunked: bool = False,
) -> bytes:
    """Frame one SSE event: ``id``, ``event``, ``retry`` (each if given), then data.

    `data` is split on CRLF, CR and LF (each one line break); every line
    becomes a ``data: `` line, so empty data gives one empty data line and data
    ending in a line break gives a final empty one: a conforming client gets
    `data` back with CRLF and CR turned into LF. A blank line ends the event.
    With `chunked`, the frame is wrapped in one HTTP/1.1 chunk.
    """
    if not isinstance(data, bytes):
        data = _as_data(data)
    fields = b""
    if event_id is not None:
        if not isinstance(event_id, bytes):
            _type_error("event_id", event_id)
        if 0x0A in event_id or 0x0D in event_id or 0x00 in event_id:
            raise ValueError(_ERR_ID)
        fields = b"id: " + event_id + b"\n"
    if event is not None:
        if not isinstance(event, bytes):
            _type_error("event", event)
        if 0x0A in event or 0x0D in event:
            raise ValueError(_ERR_EVENT)
        fields += b"event: " + event + b"\n"
    if retry_ms is not None:
        if not isinstance(retry_ms, int) or isinstance(retry_ms, bool):
            raise TypeError(f"retry_ms must be an int, not {type(retry_ms).__name__}")
        if retry_ms < 0:
            raise ValueError(_ERR_RETRY)
        fields += b"retry: %d\n" % retry_ms
    if 0x0A in data or 0x0D in data:  # (int lookups are memchr)
        data = b"\ndata: ".join(_LINE_BREAK.split(data))
    frame = b"%bdata: %b\n\n" % (fields, data)
    return _chunk(frame) if chunked else frame


def format_comment(text: bytes = b"", chunked: bool = False) -> bytes:
    """Frame an SSE comment (``: text`` and a blank line; ``:`` alone if empty).

    Clients ignore comments; they keep idle connections alive. `text` must not
    contain CR or LF. With `chunked`, the frame is wrapped in one HTTP/1.1 chunk.
    """
    if not isinstance(text, bytes):
        _type_error("text", text)
    if 0x0A in text or 0x0D in text:
        raise ValueError(_ERR_COMMENT)
    frame = b": " + text + b"\n\n" if text else b":\n\n"
    return _chunk(frame) if chunked else frame
