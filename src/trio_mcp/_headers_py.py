"""Check the header fields of a request (pure-Python twin of ``_headers``).

This module defines the behaviour; the compiled ``_headers`` must return the
same values and raise the same errors (class, message and status) for every
input whose names and values are ``bytes``.
"""

from __future__ import annotations

from ._errors import RemoteProtocolError

__all__ = [
    "FLAG_CLOSE",
    "FLAG_EXPECT_CONTINUE",
    "FLAG_KEEP_ALIVE",
    "SINGLETON_HEADERS",
    "check_headers",
]

#: ``Connection: close`` was sent.
FLAG_CLOSE = 1
#: ``Connection: keep-alive`` was sent.
FLAG_KEEP_ALIVE = 2
#: ``Expect: 100-continue`` was sent on HTTP/1.1.
FLAG_EXPECT_CONTINUE = 4

#: Headers that may appear at most once; `check_headers` returns their values.
SINGLETON_HEADERS: frozenset[bytes] = frozenset(
    {
        b"host",
        b"content-length",
        b"content-type",
        b"authorization",
        b"origin",
        b"mcp-protocol-version",
        b"mcp-session-id",
        b"mcp-method",
        b"mcp-name",
        b"last-event-id",
    }
)

#: How error messages spell each singleton.
_DISPLAY_NAMES: dict[bytes, str] = {
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

#: The longest Content-Length we parse (always fits in a signed 64-bit int).
_MAX_CONTENT_LENGTH_DIGITS = 18


def check_headers(
    headers: list[tuple[bytes, bytes]], http_minor: int
) -> tuple[dict[bytes, bytes], int, int]:
    """Validate `headers` (as returned by ``parse_head``) in one pass.

    Returns ``(singles, content_length, flags)``: the value of each singleton
    header present, the Content-Length (-1 when absent) and the ``FLAG_*``
    bits.

    Order of checks (the first failing one raises; status 400 unless noted):

    1. Each header, in order:

       - a singleton: "duplicate <Name> header" if seen before; then
         "comma-joined <Name> header" if its value holds a comma (except
         Mcp-Name, whose URI may contain commas); then for Content-Length
         "invalid Content-Length" unless the value is ``1*DIGIT``, then 413
         "Content-Length too large" beyond 18 digits.
       - ``transfer-encoding``: only remembered.
       - ``connection``: comma-separated, case-insensitive tokens with
         optional SP/HTAB around them; "close" and "keep-alive" set
         `FLAG_CLOSE` and `FLAG_KEEP_ALIVE`, others are ignored.
       - ``expect`` on HTTP/1.1: "100-continue" (any case) sets
         `FLAG_EXPECT_CONTINUE`, anything else is 417 "unsupported Expect".
         On HTTP/1.0 Expect is ignored.

    2. Transfer-Encoding present: 400 "Transfer-Encoding together with
       Content-Length" if Content-Length is present too, else 501 "request
       Transfer-Encoding is not supported".
    3. HTTP/1.1 (``http_minor == 1``) without Host: "missing Host header".
    """
    singles: dict[bytes, bytes] = {}
    content_length = -1
    flags = 0
    has_transfer_encoding = False
    for name, value in headers:
        if name in SINGLETON_HEADERS:
            if name in singles:
                raise RemoteProtocolError(f"duplicate {_DISPLAY_NAMES[name]} header", 400)
            if b"," in value and name != b"mcp-name":
                raise RemoteProtocolError(f"comma-joined {_DISPLAY_NAMES[name]} header", 400)
            singles[name] = value
            if name == b"content-length":
                content_length = _parse_content_length(value)
        elif name == b"transfer-encoding":
            has_transfer_encoding = True
        elif name == b"connection":
            for token in value.split(b","):
                token = token.strip(b" \t").lower()
                if token == b"close":
                    flags |= FLAG_CLOSE
                elif token == b"keep-alive":
                    flags |= FLAG_KEEP_ALIVE
        elif name == b"expect" and http_minor == 1:
            if value.lower() != b"100-continue":
                raise RemoteProtocolError("unsupported Expect", 417)
            flags |= FLAG_EXPECT_CONTINUE
    if has_transfer_encoding:
        if content_length >= 0:
            raise RemoteProtocolError("Transfer-Encoding together with Content-Length", 400)
        raise RemoteProtocolError("request Transfer-Encoding is not supported", 501)
    if http_minor == 1 and b"host" not in singles:
        raise RemoteProtocolError("missing Host header", 400)
    return singles, content_length, flags


def _parse_content_length(value: bytes) -> int:
    # bytes.isdigit() is ASCII-only and False for b"".
    if not value.isdigit():
        raise RemoteProtocolError("invalid Content-Length", 400)
    if len(value) > _MAX_CONTENT_LENGTH_DIGITS:
        raise RemoteProtocolError("Content-Length too large", 413)
    return int(value)
