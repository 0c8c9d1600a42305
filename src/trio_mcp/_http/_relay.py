"""The hop between two processes of one group: a request passed to the
process that owns its session, over that process's unix socket, and the
answer read back. Sans-IO: bytes out, bytes in.

A hop connection begins with a preamble line that says who the client is,
as the passing process saw it (its address, after any trusted proxy, and
the scheme it used; `hop_preamble`)::

    TRIO-MCP-HOP/1 <scheme> <address>\\r\\n

then carries that client's requests as HTTP/1.1 (`hop_request`): method,
target and headers as the client sent them, but for the hop-by-hop ones,
Host set to the public host the passing process found, and the body with
its Content-Length. The owner believes the preamble because only its group
can reach the socket (a 0700 directory); it never reads one anywhere else,
and a client cannot write one (the passing process writes the first line).
`HopReader` reads an answer: the status and headers, then the body, whole
(Content-Length) or in chunks, and whether the owner closes the hop after it.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from .._errors import RemoteProtocolError
from ._connection import Headers, Request

PREAMBLE: Final = b"TRIO-MCP-HOP/1 "
#: The longest preamble line: the tag, a scheme and an IPv6 address with a zone.
MAX_PREAMBLE_BYTES: Final = 128
_SCHEMES: Final = frozenset({"http", "https"})
#: Request headers that belong to one connection, not to the request (RFC
#: 9110 7.6.1), and those the hop writes itself.
_NOT_PASSED: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"expect",
        b"content-length",
        b"host",
    }
)
#: Answer headers the passing process's own connection writes.
_NOT_RELAYED: Final = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"date"}
)
#: The largest answer head read from a hop.
MAX_ANSWER_HEAD_BYTES: Final = 64 * 1024


def hop_preamble(request: Request) -> bytes:
    """The first line of a hop that carries requests of `request`'s client."""
    return b"%s%s %s\r\n" % (
        PREAMBLE,
        request.scheme.encode("ascii"),
        request.client.encode("ascii"),
    )


def hop_request(request: Request, via: bytes) -> bytes:
    """The bytes that pass `request` on, after a hop's preamble, with `via`
    (``1.1 <the passing process's name>``) added to its Via header, as an
    intermediary does (RFC 9110 7.6.3)."""
    parts = [
        request.method.encode("ascii"),
        b" ",
        request.target.encode("ascii"),
        b" HTTP/1.1\r\n",
    ]
    host = request.header(b"host")
    if host is not None:
        parts += (b"host: ", host, b"\r\n")
    for name, value in request.headers:
        if name not in _NOT_PASSED:
            parts += (name, b": ", value, b"\r\n")
    parts += (b"via: ", via, b"\r\ncontent-length: %d\r\n\r\n" % len(request.body))
    parts.append(request.body)
    return b"".join(parts)


def parse_preamble(line: bytes) -> tuple[str, str] | None:
    """(client address, scheme) from a preamble line (without its CRLF);
    None when it is not one."""
    if not line.startswith(PREAMBLE) or len(line) > MAX_PREAMBLE_BYTES:
        return None
    scheme, _, address = line[len(PREAMBLE) :].partition(b" ")
    try:
        text = address.decode("ascii")
        if text:
            ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    name = scheme.decode("latin-1")
    if name not in _SCHEMES:
        return None
    return text, name


class HopReader:
    """Reads the answer to a passed-on request: `receive` bytes as they come;
    `status` and `headers` once the head is in (then `streamed` tells a
    chunked answer from a whole one), the body as pieces, `done` at its end.
    RemoteProtocolError when the bytes are not an HTTP/1.1 answer."""

    __slots__ = (
        "_buf",
        "status",
        "headers",
        "streamed",
        "done",
        "closes",
        "_left",
        "_in_chunks",
        "_head",
    )

    def __init__(self, head_request: bool = False) -> None:
        self._buf = b""
        self.status = 0
        self.headers: Headers = []
        self.streamed = False
        self.done = False
        #: The owner closes the hop after this answer.
        self.closes = False
        #: Bytes left of the whole body, or of the current chunk (-1: the next
        #: chunk's size line is due; -2: the CRLF after a chunk).
        self._left = 0
        self._in_chunks = False
        self._head = head_request

    def receive(self, data: bytes) -> list[bytes]:
        """Take `data` from the hop; the body's pieces it completes."""
        self._buf += data
        if not self.status and not self._read_head():
            return []
        pieces: list[bytes] = []
        while not self.done and self._buf:
            if not self._step(pieces):
                break
        return pieces

    def hop_ended(self) -> bool:
        """The hop has closed: whether the answer is whole (a body that ends
        with its connection is)."""
        if self._left == -3:
            self.done = True
        return self.done

    def _read_head(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_ANSWER_HEAD_BYTES:
                raise RemoteProtocolError("the owner's answer head is too large", 502)
            return False
        lines = buf[:end].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if version != b"HTTP/1.1" or len(code) != 3 or not code.isdigit():
            raise RemoteProtocolError("the owner's answer is not HTTP/1.1", 502)
        headers: Headers = []
        length = -1
        chunked = False
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise RemoteProtocolError("a malformed header in the owner's answer", 502)
            name = name.strip().lower()
            value = value.strip()
            if name == b"content-length":
                if not value.isdigit():
                    raise RemoteProtocolError("a malformed length in the owner's answer", 502)
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower() == b"chunked"
            elif name == b"connection":
                self.closes = b"close" in value.lower()
            if name not in _NOT_RELAYED:
                headers.append((name, value))
        self._buf = buf[end + 4 :]
        self.status = int(code)
        self.headers = headers
        self.streamed = chunked or length < 0
        if self._head or self.status in (204, 304) or self.status < 200:
            self.done = True
        elif chunked:
            self._in_chunks = True
            self._left = -1
        elif length >= 0:
            self._left = length
            self.done = length == 0
        else:  # (close-delimited: the hop's end is the body's)
            self._left = -3
            self.closes = True
        return True

    def _step(self, pieces: list[bytes]) -> bool:
        """Consume what the buffer holds of the body; False when more is needed."""
        buf = self._buf
        left = self._left
        if left == -3:
            pieces.append(buf)
            self._buf = b""
            return False
        if left > 0:
            piece = buf[:left]
            pieces.append(piece)
            self._buf = buf[len(piece) :]
            self._left = left = left - len(piece)
            if left == 0:
                if self._in_chunks:
                    self._left = -2
                else:
                    self.done = True
            return bool(self._buf)
        if left == -2:
            if len(buf) < 2:
                return False
            if buf[:2] != b"\r\n":
                raise RemoteProtocolError("a malformed chunk in the owner's answer", 502)
            self._buf = buf[2:]
            self._left = -1
            return True
        # a chunk's size line, or after the last chunk the trailer's lines
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > 1024:
                raise RemoteProtocolError("a malformed chunk in the owner's answer", 502)
            return False
        line = buf[:end]
        self._buf = buf[end + 2 :]
        if left == -4:  # trailers: an empty line ends the answer
            if not line:
                self.done = True
            return True
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise RemoteProtocolError("a malformed chunk in the owner's answer", 502) from None
        if size < 0:
            raise RemoteProtocolError("a malformed chunk in the owner's answer", 502)
        self._left = size if size else -4
        return True
