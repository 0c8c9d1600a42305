"""Sans-IO HTTP/1.1 for the server side: bytes in, requests out; responses in, bytes out.

This module owns the connection rules of DESIGN.md ("The HTTP connection
contract"): request framing, body limits, persistence, pipelining order and
what goes on the wire for full and streamed responses. It never awaits and
never imports trio; the trio shell (``_trio/_server.py``) moves the bytes and
applies the time limits, asking `HTTP11Connection.phase` which limit applies.

Usage, one connection::

    conn = HTTP11Connection(config)
    while True:
        event = conn.next_event()
        if event is NEED_DATA:      conn.receive_data(await read())   # b"" is EOF
        elif event is SEND_CONTINUE: await write(CONTINUE_RESPONSE)
        elif event is CLOSED:       break
        else:                       # a Request, body complete
            await write(conn.full_response(event, response, date))
            if conn.must_close: break

Errors in the peer's bytes raise `RemoteProtocolError`; answer them with
`error_response` and close, since unread bytes cannot be trusted as the next
request.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from http import HTTPStatus
from typing import Final

from .._config import ServerConfig
from .._errors import LocalProtocolError, RemoteProtocolError
from .._headers_py import FLAG_CLOSE, FLAG_EXPECT_CONTINUE, FLAG_KEEP_ALIVE
from .._httphead_py import TCHAR
from .._speedups import check_headers, find_head_end, parse_head
from ._forwarded import Trust, forwarded_client

Headers = list[tuple[bytes, bytes]]


class Request:
    """One complete request: head and body.

    `headers` holds every header as (lowercase name, value) in arrival order;
    `singles` maps the singleton headers (Host, Content-Type, Authorization,
    Origin, the MCP headers, ...) that were present to their one value.
    """

    __slots__ = (
        "method",
        "target",
        "path",
        "query",
        "http_minor",
        "headers",
        "singles",
        "body",
        "client",
        "scheme",
        "started",
    )

    def __init__(
        self,
        method: str,
        target: str,
        http_minor: int,
        headers: Headers,
        singles: dict[bytes, bytes],
        body: bytes,
        client: str = "",
        scheme: str = "http",
    ) -> None:
        self.method = method
        self.target = target
        # (`in` first: most targets have neither, and it costs no method call)
        if "?" in target:
            path, _, query = target.partition("?")
        else:
            path, query = target, ""
        if "://" in path and not path.startswith("/"):
            # absolute-form: the path is what follows the authority, and the
            # authority stands for Host (RFC 9112 3.2.2: the Host header is ignored)
            start = path.index("://") + 3
            slash = path.find("/", start)
            singles[b"host"] = (path[start:slash] if slash >= 0 else path[start:]).encode("latin-1")
            path = path[slash:] if slash >= 0 else "/"
        self.path = path
        self.query = query
        self.http_minor = http_minor
        self.headers = headers
        self.singles = singles
        self.body = body
        #: The client's address ("" when the transport has none to give):
        #: behind a trusted proxy, the one its forwarding headers name.
        self.client = client
        #: "https" when the client used TLS: to us, or to the trusted proxy
        #: that says so.
        self.scheme = scheme
        #: ``time.perf_counter()`` when it arrived whole, set by a server that
        #: reports to an observer (metrics, the access log); else 0.
        self.started = 0.0

    def header(self, name: bytes) -> bytes | None:
        """The value of header `name` (lowercase); for repeated headers, the first."""
        value = dict.get(self.singles, name)
        if value is not None:
            return value
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def header_values(self, name: bytes) -> list[bytes]:
        """Every value of header `name` (lowercase), in arrival order."""
        return [value for key, value in self.headers if key == name]

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.target} HTTP/1.{self.http_minor}>"


class Response:
    """A response with its whole body in memory (sent with Content-Length).

    `headers` must not contain Content-Length, Transfer-Encoding, Connection or
    Date: the connection writes those itself.
    """

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Headers | None = None, body: bytes = b"") -> None:
        self.status = status
        self.headers: Headers = headers if headers is not None else []
        self.body = body


class Phase(enum.Enum):
    """What the connection is waiting for; the shell picks the time limit from it."""

    IDLE = "idle"  # between requests: no byte of the next one yet
    HEAD = "head"  # part of a request head has arrived
    BODY = "body"  # the head is complete, the body is not
    RESPONDING = "responding"  # a request was handed out; its response is due
    DONE = "done"  # closed, or must close


# The phases as module globals, for the per-request code below and the shell.
# CPython 3.11 reads an Enum member through its class on a slow path (its
# metaclass defines __getattr__), more than ten times a global's cost, and a
# request reads a dozen of them.
IDLE: Final = Phase.IDLE
HEAD: Final = Phase.HEAD
BODY: Final = Phase.BODY
RESPONDING: Final = Phase.RESPONDING
DONE: Final = Phase.DONE


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Sentinel("NEED_DATA")
SEND_CONTINUE: Final = _Sentinel("SEND_CONTINUE")
CLOSED: Final = _Sentinel("CLOSED")
Event = Request | _Sentinel

CONTINUE_RESPONSE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_LAST_CHUNK: Final = b"0\r\n\r\n"
_CRLF: Final = b"\r\n"
#: How much of an incomplete request line is checked for a method's bytes
#: (longer than any registered method: the longest has 17).
_METHOD_WINDOW: Final = 32


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")


_STATUS_LINES: Final = {int(s): _status_line(int(s)) for s in HTTPStatus}
# Statuses whose responses never have a body (RFC 9110 6.4.1).
_NO_BODY_STATUSES: Final = frozenset({204, 304}) | frozenset(range(100, 200))
# The Content-Length lines of bodies up to _LENGTH_LINES_BELOW bytes (most JSON
# answers), formatted once: a table of 30 KiB instead of formatting per response.
_LENGTH_LINES_BELOW: Final = 512
_LENGTH_LINES: Final = tuple(
    b"\r\ncontent-length: %d" % size for size in range(_LENGTH_LINES_BELOW)
)


def _chunked_piece(data: bytes) -> bytes:
    """A piece of an HTTP/1.1 streamed body: one chunk (none for empty data)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def _raw_piece(data: bytes) -> bytes:
    """A piece of an HTTP/1.0 streamed body: as it is (its end is the close)."""
    return data


def _no_piece(data: bytes) -> bytes:
    """A piece of the body of an answer to HEAD: nothing goes out."""
    return b""


def status_line(status: int) -> bytes:
    line = dict.get(_STATUS_LINES, status)
    if line is None:
        if not 100 <= status <= 999:
            raise LocalProtocolError(f"invalid HTTP status {status}")
        line = _STATUS_LINES[status] = _status_line(status)
    return line


def method_not_allowed(allowed: Sequence[str]) -> Response:
    """A 405 answer naming the methods the resource supports (RFC 9110 15.5.6)."""
    return Response(
        405,
        [(b"allow", ", ".join(allowed).encode("ascii")), (b"content-type", b"text/plain")],
        b"method not allowed\n",
    )


class HTTP11Connection:
    """The server side of one HTTP/1.1 connection, without I/O."""

    __slots__ = (
        "_buf",
        "_pos",
        "_scan_from",
        "_line_done",
        "_head",
        "_content_length",
        "_continue_due",
        "_request_keep_alive",
        "_request_minor",
        "_head_request",
        "_requests_left",
        "_eof",
        "_max_body",
        "_max_head",
        "_max_line",
        "_max_headers",
        "phase",
        "must_close",
        "draining",
        "client",
        "proxy",
        "scheme",
        "status",
    )

    def __init__(self, config: ServerConfig) -> None:
        # Unconsumed input is _buf[_pos:]. _buf is the bytes object a read
        # returned while one read holds whole requests (no copy), and becomes a
        # bytearray only when data has to be joined.
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._scan_from = 0
        self._line_done = False
        # set while a parsed head waits for its body
        self._head: tuple[bytes, bytes, int, Headers, dict[bytes, bytes]] | None = None
        self._content_length = 0
        self._continue_due = False
        self._request_keep_alive = True
        self._request_minor = 1
        self._head_request = False
        self._requests_left = config.max_requests_per_connection
        self._eof = False
        self._max_body = config.max_body_bytes
        self._max_head = config.max_head_bytes
        self._max_line = config.max_request_line_bytes
        self._max_headers = config.max_header_count
        self.phase = IDLE
        #: True once the connection must close after the current response.
        self.must_close = False
        #: Set by the server on graceful shutdown: the next response closes.
        self.draining = False
        #: The peer's address, which each request carries (set by the server).
        self.client = ""
        #: Set by the server when the peer is a trusted proxy: each request's
        #: client, scheme and host are then the ones its headers forward. On a
        #: TLS connection from any other peer, `NO_PROXY`: its requests take
        #: the same branch, which gives them the connection's `scheme`.
        self.proxy: Trust | None = None
        #: The scheme the client used to reach us ("https" over TLS), for
        #: requests whose proxy says none.
        self.scheme = "http"
        #: The status of the last response whose head was made (for metrics).
        self.status = 0

    # ---- bytes in -------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Add bytes read from the peer; ``b""`` means the peer closed its side."""
        if not data:
            self._eof = True
            return
        buf = self._buf
        pos = self._pos
        if pos >= len(buf):
            self._buf = data
        else:
            if isinstance(buf, bytearray):
                if pos:
                    del buf[:pos]  # O(1): CPython moves the start of a bytearray
            else:
                buf = bytearray(memoryview(buf)[pos:])
            buf += data
            self._buf = buf
            self._scan_from -= pos
        self._pos = 0

    @property
    def trailing_data(self) -> bytes:
        """Bytes received and not yet consumed (pipelined requests)."""
        return bytes(self._buf[self._pos :])

    def next_event(self) -> Event:
        """The next thing to act on: a Request, NEED_DATA, SEND_CONTINUE or CLOSED.

        Raises RemoteProtocolError when the peer's bytes break the rules.
        """
        phase = self.phase
        if phase is BODY:
            return self._read_body()
        if phase is RESPONDING:
            raise LocalProtocolError("the previous request has not been answered")
        if phase is DONE:
            return CLOSED
        buf = self._buf
        pos = self._pos
        if phase is IDLE:
            # RFC 9112 2.2: ignore empty lines before a request line. (Indexing,
            # not buf.startswith: a method call with optional arguments is the
            # slowest call there is on the compiled path.)
            size = len(buf)
            while pos + 1 < size and buf[pos] == 13 and buf[pos + 1] == 10:
                pos += 2
            self._pos = pos
            if pos >= size:
                if self._eof:
                    self.phase = DONE
                    return CLOSED
                return NEED_DATA
            if pos + 1 == size and buf[pos] == 13 and not self._eof:
                return NEED_DATA  # a CR that may be half of an empty line
            self.phase = HEAD
            self._scan_from = pos
        end = find_head_end(buf, self._scan_from)
        if end < 0:
            return self._head_incomplete(buf, pos)
        if end - pos > self._max_head:
            raise RemoteProtocolError("request head too large", 431)
        head = buf[pos:end] if type(buf) is bytes else bytes(memoryview(buf)[pos:end])
        self._pos = end
        self._line_done = False
        method, target, minor, headers = parse_head(head, self._max_line, self._max_headers)
        singles, content_length, flags = check_headers(headers, minor)
        if content_length > self._max_body:
            raise RemoteProtocolError("request body too large", 413)
        if minor:
            self._request_keep_alive = not flags & FLAG_CLOSE
        else:
            self._request_keep_alive = bool(flags & FLAG_KEEP_ALIVE) and not flags & FLAG_CLOSE
        self._request_minor = minor
        self._content_length = content_length if content_length > 0 else 0
        self._continue_due = bool(flags & FLAG_EXPECT_CONTINUE)
        self._head = (method, target, minor, headers, singles)
        self.phase = BODY
        return self._read_body()

    def head_gathering(self) -> tuple[bytes, int, int] | None:
        """How the rest of a head being received may be read elsewhere and
        handed over whole (the slow lane): the last bytes held (at most 4),
        where in them the search for the head's end resumes
        (`find_head_end`'s start), and how many more bytes may come before
        the head is too large. The reader hands over what it read once the
        end is in, `find_head_end` raises, the room is exceeded or the peer
        is gone; `next_event` then decides as it would have, read by read.

        None when not receiving a head, or while its request line is
        incomplete (its checks, method and length, need each read)."""
        if self.phase is not HEAD or self._eof:
            return None
        buf = self._buf
        pos = self._pos
        if buf.find(_CRLF, pos) < 0:
            return None
        end = len(buf)
        start = end - 4 if end > 4 else 0
        return bytes(buf[start:end]), self._scan_from - start, self._max_head - (end - pos)

    def body_size(self) -> int:
        """The size of the body being received (its Content-Length)."""
        return self._content_length

    def _head_incomplete(self, buf: bytes | bytearray, pos: int) -> Event:
        size = len(buf) - pos
        self._scan_from = max(pos, len(buf) - 3)
        if not self._line_done:
            # A request line starts with a method, a token: bytes that cannot
            # begin one are refused now, not at the end of the head timeout.
            method = buf[pos : pos + _METHOD_WINDOW].split(b" ", 1)[0]
            if method.translate(None, TCHAR):
                raise RemoteProtocolError("not an HTTP request", 400)
        if not self._line_done and size > self._max_line:
            if buf.find(_CRLF, pos, pos + self._max_line + 2) < 0:
                raise RemoteProtocolError("request line too long", 414)
            self._line_done = True
        if size > self._max_head:
            raise RemoteProtocolError("request head too large", 431)
        if self._eof:
            raise RemoteProtocolError("connection closed inside a request head", 400)
        return NEED_DATA

    def _read_body(self) -> Event:
        head = self._head
        assert head is not None
        buf = self._buf
        pos = self._pos
        length = self._content_length
        if len(buf) - pos < length:
            if self._eof:
                raise RemoteProtocolError("connection closed inside a request body", 400)
            if self._continue_due:
                self._continue_due = False
                return SEND_CONTINUE
            return NEED_DATA
        if length:
            end = pos + length
            body = buf[pos:end] if type(buf) is bytes else bytes(memoryview(buf)[pos:end])
            self._pos = end
        else:
            body = b""
        self._head = None
        self._continue_due = False
        method_bytes, target_bytes, minor, headers, singles = head
        # (the usual methods as the module's constants: their hashes are made
        # once, and comparing them further on is an identity test)
        if method_bytes == b"POST":
            method = "POST"
        elif method_bytes == b"GET":
            method = "GET"
        else:
            method = method_bytes.decode("ascii")
        self._head_request = method == "HEAD"
        self.phase = RESPONDING
        if self.proxy is not None:
            return self._forwarded_request(method, target_bytes, minor, headers, singles, body)
        return Request(
            method, target_bytes.decode("ascii"), minor, headers, singles, body, self.client
        )

    def _forwarded_request(
        self,
        method: str,
        target: bytes,
        minor: int,
        headers: Headers,
        singles: dict[bytes, bytes],
        body: bytes,
    ) -> Request:
        """A request from a trusted proxy: its client as the proxy forwards it;
        or one on a TLS connection (`NO_PROXY`: a direct client)."""
        proxy = self.proxy
        assert proxy is not None
        scheme: str | None = None
        if proxy:
            client, scheme, host = forwarded_client(self.client, headers, proxy)
            if host is not None:
                singles[b"host"] = host  # (the public host: the Host rules check it)
            proxy.note_origin(scheme or self.scheme, dict.get(singles, b"host"))
        else:  # (NO_PROXY: the peer is the client)
            client = self.client
        return Request(
            method,
            target.decode("ascii"),
            minor,
            headers,
            singles,
            body,
            client,
            scheme or self.scheme,
        )

    # ---- bytes out ------------------------------------------------------

    def _decide_close(self, streaming: bool) -> bool:
        self._requests_left -= 1
        close = (
            not self._request_keep_alive
            or self._requests_left <= 0
            or self.draining
            or (streaming and self._request_minor == 0)
        )
        self.must_close = close
        return close

    def _head_bytes(
        self, status: int, headers: Iterable[tuple[bytes, bytes]], date: bytes, framing: bytes
    ) -> list[bytes]:
        self.status = status
        parts = [status_line(status), b"date: ", date, _CRLF]
        for name, value in headers:
            parts += (name, b": ", value, _CRLF)
        parts.append(framing)
        return parts

    def _connection_header(self, close: bool) -> bytes:
        if close:
            return b"connection: close\r\n"
        if self._request_minor == 0:
            return b"connection: keep-alive\r\n"
        return b""

    def full_response(self, response: Response, date: bytes) -> bytes:
        """Serialize the answer to the current request; head and body in one buffer."""
        if self.phase is not RESPONDING:
            raise LocalProtocolError("no request is waiting for a response")
        close = self._decide_close(streaming=False)
        self.status = status = response.status
        body = response.body
        parts = [dict.get(_STATUS_LINES, status) or status_line(status), b"date: ", date]
        for name, value in response.headers:
            parts += (_CRLF, name, b": ", value)
        if status in _NO_BODY_STATUSES:
            body = b""
        else:
            size = len(body)
            parts.append(
                _LENGTH_LINES[size]
                if size < _LENGTH_LINES_BELOW
                else b"\r\ncontent-length: %d" % size
            )
            if self._head_request:
                body = b""
                self._head_request = False
        if close:
            parts.append(b"\r\nconnection: close\r\n\r\n")
            self.phase = DONE
        else:
            parts.append(
                b"\r\nconnection: keep-alive\r\n\r\n" if not self._request_minor else b"\r\n\r\n"
            )
            self.phase = IDLE
        parts.append(body)
        return b"".join(parts)

    def start_stream(self, status: int, headers: Headers, date: bytes) -> bytes:
        """The head of a streamed answer; then `stream_chunk` for each piece, then `end_stream`.

        For HEAD requests the head is all there is: `stream_body_allowed` is
        False and `end_stream` returns nothing.
        """
        self._check_responding()
        close = self._decide_close(streaming=True)
        if self._request_minor == 1 and not self._head_request:
            framing = b"transfer-encoding: chunked\r\n"
        else:
            framing = b""
        framing += self._connection_header(close) + _CRLF
        return b"".join(self._head_bytes(status, headers, date, framing))

    @property
    def stream_body_allowed(self) -> bool:
        return not self._head_request

    @property
    def stream_chunked(self) -> bool:
        """Whether stream pieces need chunk framing (HTTP/1.1) or go raw (HTTP/1.0)."""
        return self._request_minor == 1

    def stream_chunk(self, data: bytes) -> bytes:
        """One piece of a streamed body, framed for the wire (empty data gives b"")."""
        return self.stream_framer()(data)

    def stream_framer(self) -> Callable[[bytes], bytes]:
        """What `stream_chunk` does to each piece of the current streamed body,
        as a function of the piece alone: fixed from its head to its end, so a
        writer can frame many pieces without coming back here."""
        if self._head_request:
            return _no_piece
        return _chunked_piece if self._request_minor == 1 else _raw_piece

    def end_stream(self) -> bytes:
        """The end of a streamed body; the connection is ready for the next request."""
        last = _LAST_CHUNK if self._request_minor == 1 and not self._head_request else b""
        self._finish_response(self.must_close)
        return last

    def _check_responding(self) -> None:
        if self.phase is not RESPONDING:
            raise LocalProtocolError("no request is waiting for a response")

    def _finish_response(self, close: bool) -> None:
        self._head_request = False
        self.phase = DONE if close else IDLE

    def error_response(self, error: RemoteProtocolError, date: bytes) -> bytes:
        """The answer to a broken request: its status, a short text, and a close."""
        self.must_close = True
        self.phase = DONE
        body = f"{error.status} {_reason(error.status)}: {error}\n".encode("ascii", "replace")
        return b"".join(
            self._head_bytes(
                error.status,
                [(b"content-type", b"text/plain; charset=utf-8")],
                date,
                b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body),
            )
            + [body]
        )


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
