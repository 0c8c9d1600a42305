"""Reading HTTP/1.1 responses incrementally, and telling success from failure.

Sans-IO: bytes go in, a finished response comes out. It reads just enough to
frame a response (status, Content-Length, chunked or until close, whether it
is an event stream, whether the server closes) and keeps the body. Bodies are
only parsed as JSON when a cheap substring test says they might hold an error.
No scan restarts from the beginning of a growing buffer, so a response fed
byte by byte costs linear time.
"""

from __future__ import annotations

from typing import Final

from .._errors import PeerProtocolError
from .._json import JSONDecodeError, loads

HEAD: Final = 0
LENGTH: Final = 1  # body of Content-Length bytes
CHUNK_SIZE: Final = 2
CHUNK_DATA: Final = 3
CHUNK_END: Final = 4  # the CRLF after a chunk's data
TRAILERS: Final = 5
UNTIL_CLOSE: Final = 6
STREAM: Final = 7  # an open-ended event stream we only hold (GET streams)
DONE: Final = 8

MAX_HEAD_BYTES: Final = 64 * 1024
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


def header(head: bytes, lower: bytes, name: bytes) -> bytes | None:
    """The value of header `name` (lowercase, no colon) in a response head, stripped.

    `lower` is ``head.lower()``; the value keeps its original case.
    """
    at = lower.find(b"\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 2
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip(b" \t")


class ResponseReader:
    """Frames one HTTP/1.1 response at a time from the bytes of a connection."""

    __slots__ = (
        "_buf",
        "_length",
        "_parts",
        "_scan",
        "_stream_head",
        "body",
        "close",
        "head",
        "is_sse",
        "state",
        "status",
    )

    def __init__(self) -> None:
        self._buf = bytearray()
        self.reset()

    def reset(self, *, stream_head: bool = False) -> None:
        """Expect the next response (leftover bytes are kept).

        With `stream_head`, an event-stream response counts as done at its head
        and its body is then consumed without keeping it (state STREAM).
        """
        self.state = HEAD
        self.status = 0
        self.head = b""
        self.body = b""
        self.is_sse = False
        self.close = False
        self._length = 0
        self._parts: list[bytes] = []
        self._scan = 0
        self._stream_head = stream_head

    def feed(self, data: bytes) -> bool:
        """Take bytes from the socket; True when the response is complete."""
        if self.state == HEAD and not self._buf:
            # fast path: a whole JSON response in one read
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                self._parse_head(data[:end])
                if self.state == STREAM:
                    return True
                if self.state == LENGTH and len(data) - end - 4 == self._length:
                    self.body = data[end + 4 :]
                    self.state = DONE
                    return True
                self._buf += data[end + 4 :]
                return self._advance()
        elif self.state == STREAM:
            return False  # held stream: bytes are keepalives or events we do not keep
        self._buf += data
        return self._advance()

    def feed_eof(self) -> bool:
        """The peer closed; True if that ends the response, PeerProtocolError if it cuts it."""
        if self.state == UNTIL_CLOSE:
            self.body = bytes(self._buf)
            self._buf.clear()
            self.state = DONE
            self.close = True
            return True
        if self.state == DONE:
            return True
        if self.state == HEAD and not self._buf:
            raise PeerProtocolError("connection closed before a response")
        raise PeerProtocolError("connection closed in the middle of a response")

    def leftover(self) -> bool:
        """Whether bytes beyond the finished response were received."""
        return bool(self._buf)

    def take_body(self) -> bytes:
        """The chunked body's bytes framed so far and not taken yet, for a client
        that acts on a stream's events as they arrive; once the response is
        complete, `body` holds only what was not taken."""
        parts = self._parts
        if not parts:
            return b""
        self._parts = []
        return b"".join(parts)

    # -- internals -------------------------------------------------------------

    def _parse_head(self, head: bytes) -> None:
        if not head.startswith(b"HTTP/1.") or len(head) < 12 or head[8:9] != b" ":
            raise PeerProtocolError(f"not an HTTP/1.x status line: {head[:40]!r}")
        code = head[9:12]
        if not code.isdigit() or head[12:13] not in (b" ", b"\r", b""):
            line = head.split(b"\r\n", 1)[0]
            raise PeerProtocolError(f"bad status line: {line[:60]!r}")
        status = int(code)
        self.status = status
        self.head = head
        lower = head.lower()
        connection = header(head, lower, b"connection")
        if head[7:8] == b"0":  # HTTP/1.0: close unless kept alive
            self.close = connection is None or b"keep-alive" not in connection.lower()
        else:
            self.close = connection is not None and b"close" in connection.lower()
        content_type = header(head, lower, b"content-type")
        self.is_sse = content_type is not None and content_type.lower().startswith(
            b"text/event-stream"
        )
        if 100 <= status < 200 or status in (204, 304):
            if status != 101 and 100 <= status < 200:
                self.state = HEAD  # interim response: the real one follows
                self.status = 0
                return
            self.state = LENGTH
            self._length = 0
            return
        encoding = header(head, lower, b"transfer-encoding")
        if encoding is not None:
            if encoding.lower().rsplit(b",", 1)[-1].strip() != b"chunked":
                raise PeerProtocolError(f"unsupported Transfer-Encoding {encoding!r}")
            self.state = CHUNK_SIZE
        else:
            length = header(head, lower, b"content-length")
            if length is None:
                self.state = UNTIL_CLOSE
                self.close = True
            elif length.isdigit():
                self.state = LENGTH
                self._length = int(length)
            else:
                raise PeerProtocolError(f"bad Content-Length {length!r}")
        if self._stream_head and self.is_sse and 200 <= status < 300:
            self.state = STREAM

    def _advance(self) -> bool:
        buf = self._buf
        while True:
            state = self.state
            if state == HEAD:
                end = buf.find(b"\r\n\r\n", max(0, self._scan - 3))
                if end < 0:
                    self._scan = len(buf)
                    if len(buf) > MAX_HEAD_BYTES:
                        raise PeerProtocolError("response head too large")
                    return False
                head = bytes(buf[:end])
                del buf[: end + 4]
                self._scan = 0
                self._parse_head(head)
                if self.state == STREAM:
                    buf.clear()
                    return True
            elif state == LENGTH:
                if len(buf) < self._length:
                    return False
                self.body = bytes(buf[: self._length])
                del buf[: self._length]
                self.state = DONE
                return True
            elif state in (CHUNK_SIZE, TRAILERS):
                end = buf.find(b"\r\n", max(0, self._scan - 1))
                if end < 0:
                    self._scan = len(buf)
                    if len(buf) > MAX_HEAD_BYTES:
                        raise PeerProtocolError("chunk size line too long")
                    return False
                line = bytes(buf[:end])
                del buf[: end + 2]
                self._scan = 0
                if state == TRAILERS:
                    if not line:
                        self.body = b"".join(self._parts)
                        self._parts = []
                        self.state = DONE
                        return True
                    continue
                size_text = line.split(b";", 1)[0].strip(b" \t")
                if not size_text or not _HEX.issuperset(size_text):
                    raise PeerProtocolError(f"bad chunk size line {line[:40]!r}")
                self._length = int(size_text, 16)
                self.state = CHUNK_DATA if self._length else TRAILERS
            elif state == CHUNK_DATA:
                if not buf:
                    return False
                take = min(self._length, len(buf))
                self._parts.append(bytes(buf[:take]))
                del buf[:take]
                self._length -= take
                if self._length:
                    return False
                self.state = CHUNK_END
            elif state == CHUNK_END:
                if len(buf) < 2:
                    return False
                if buf[:2] != b"\r\n":
                    raise PeerProtocolError("chunk data not followed by CRLF")
                del buf[:2]
                self.state = CHUNK_SIZE
            elif state in (UNTIL_CLOSE, STREAM):
                if state == STREAM:
                    buf.clear()
                return False
            else:  # DONE: bytes past the response wait for the next one
                return True


# -- what a response means ------------------------------------------------------


def session_id(reader: ResponseReader) -> bytes | None:
    return header(reader.head, reader.head.lower(), b"mcp-session-id")


def sse_events(body: bytes) -> list[tuple[bytes | None, bytes]]:
    """(id, data) of each event of an event-stream body; data is empty when
    the event has none (a priming event), and blocks with neither are skipped."""
    events = []
    for event in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n"):
        event_id = None
        data = []
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
            elif line.startswith(b"id:"):
                value = line[3:]
                event_id = value[1:] if value.startswith(b" ") else value
        if any(data):
            events.append((event_id, b"\n".join(data)))
        elif event_id is not None:
            events.append((event_id, b""))
    return events


def sse_messages(body: bytes) -> list[bytes]:
    """The data of each event of an event-stream body (events with no data skipped)."""
    return [data for _, data in sse_events(body) if data]


def _message_error(message: object) -> str | None:
    """The error kind a parsed JSON-RPC response stands for, or None."""
    if not isinstance(message, dict):
        return "protocol"
    error = message.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        return f"jsonrpc {code}" if isinstance(code, int) else "jsonrpc (no code)"
    result = message.get("result")
    if not isinstance(result, dict):
        return "protocol"
    if result.get("isError") is True:
        return "tool error"
    return None


def _json_error(body: bytes) -> str | None:
    try:
        message = loads(body)
    except JSONDecodeError:
        return "protocol"
    return _message_error(message)


def classify(reader: ResponseReader) -> tuple[str | None, int]:
    """(error kind or None, progress notifications seen) for a finished response
    to a JSON-RPC request.

    Kinds: ``http N`` (with `` jsonrpc C`` when the body says), ``jsonrpc C``,
    ``tool error`` (a result with ``isError: true``), ``protocol``.
    """
    status = reader.status
    body = reader.body
    if not reader.is_sse:
        if status == 200 and b'"error"' not in body and b'"isError"' not in body:
            return (None, 0) if body.startswith(b"{") else ("protocol", 0)
        if not 200 <= status < 300:
            kind = f"http {status}"
            if body.startswith(b"{"):
                inner = _json_error(body)
                if inner is not None and inner.startswith("jsonrpc"):
                    kind += " " + inner
            return kind, 0
        return _json_error(body), 0
    if not 200 <= status < 300:
        return f"http {status}", 0
    progress = 0
    final: str | None = "protocol"  # an event stream that never answered
    for data in sse_messages(body):
        try:
            message = loads(data)
        except JSONDecodeError:
            return "protocol", progress
        if isinstance(message, dict) and "method" in message and "id" not in message:
            if message["method"] == "notifications/progress":
                progress += 1
            continue
        if isinstance(message, dict) and "method" in message:
            continue  # a server-to-client request (legacy); not ours to answer here
        final = _message_error(message)
    return final, progress


def status_error(reader: ResponseReader) -> str | None:
    """The error kind of a response whose body does not matter (notifications, DELETE)."""
    if 200 <= reader.status < 300:
        return None
    return f"http {reader.status}"
