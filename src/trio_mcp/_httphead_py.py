"""Find and parse an HTTP/1.1 request head (pure-Python twin of ``_httphead``).

This module defines the behaviour; the compiled ``_httphead`` must return the
same values and raise the same errors (class, message and status) for every
input. Both functions accept ``bytes``; `find_head_end` also takes a
``bytearray`` (the receive buffer).

The grammar is RFC 9112 without its leniencies: CRLF only (bare CR and bare LF
are errors), single spaces in the request line, no obs-fold, no whitespace
before the colon, no control characters in field values, and only origin-form,
absolute-form and (for OPTIONS) asterisk-form request targets.
"""

from __future__ import annotations

from ._errors import RemoteProtocolError

__all__ = ["find_head_end", "parse_head"]

_CRLF = b"\r\n"
_TERMINATOR = b"\r\n\r\n"
_OWS = b" \t"

_ALPHA = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DIGIT = b"0123456789"
#: tchar (RFC 9110 5.6.2): the bytes of a token (method, field name).
TCHAR = _ALPHA + _DIGIT + b"!#$%&'*+-.^_`|~"
#: The bytes allowed in a field value: HTAB, SP, VCHAR, obs-text.
_VALUE_CHARS = b"\t" + bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100))
#: The bytes allowed in a request target (VCHAR).
_TARGET_CHARS = bytes(range(0x21, 0x7F))
#: The bytes allowed in a URI scheme after its first letter.
_SCHEME_CHARS = _ALPHA + _DIGIT + b"+-."


def find_head_end(buf: bytes | bytearray, start: int) -> int:
    """Return the index just past the CRLFCRLF ending the head in `buf`, or -1.

    Only ``buf[start:]`` is scanned (`start` is clamped to >= 0): the
    terminator must lie wholly at or after `start`, and an LF at or after
    `start` whose preceding byte is not CR raises
    ``RemoteProtocolError("bare LF in request head", 400)`` (the check of an LF
    at index `start` reads ``buf[start - 1]``; an LF at index 0 is bare). LFs
    after the terminator (the body) are not looked at.

    A caller receiving the head piece by piece passes
    ``max(0, previous_len - 3)``: each byte is then examined a bounded number
    of times, and the result (or error) is the same as one call with start 0
    on the whole buffer.
    """
    if start < 0:
        start = 0
    end = buf.find(_TERMINATOR, start)
    limit = len(buf) if end < 0 else end + 4
    lf = buf.find(b"\n", start, limit)
    while lf >= 0:
        if lf == 0 or buf[lf - 1] != 0x0D:
            raise RemoteProtocolError("bare LF in request head", 400)
        lf = buf.find(b"\n", lf + 1, limit)
    return -1 if end < 0 else end + 4


def parse_head(
    head: bytes, max_line_bytes: int, max_headers: int
) -> tuple[bytes, bytes, int, list[tuple[bytes, bytes]]]:
    """Parse a request head into ``(method, target, http_minor, headers)``.

    `head` runs from the request line through the terminating CRLFCRLF
    inclusive. Header names come back lowercased, values without leading and
    trailing SP/HTAB, in their original order, duplicates kept.

    Checks, in this order (the first failing one raises; status 400 unless
    noted):

    1. `head` ends with CRLFCRLF ("request head does not end with CRLFCRLF").
    2. No CR that is not followed by LF ("bare CR in request head").
    3. No LF that is not preceded by CR ("bare LF in request head").
    4. The head does not start with CRLF ("empty request line").
    5. The request line (`_parse_request_line`): its length (414), then its
       shape, method, version (505 for a major version other than 1) and
       target.
    6. Each header line in order (`_parse_header_line`): first the count
       (the line after the `max_headers`-th is 431 "too many header lines"),
       then the length (431), then its content.

    Lengths exclude the CRLF.
    """
    if not head.endswith(_TERMINATOR):
        raise RemoteProtocolError("request head does not end with CRLFCRLF", 400)
    crlfs = head.count(_CRLF)
    if head.count(b"\r") != crlfs:
        raise RemoteProtocolError("bare CR in request head", 400)
    if head.count(b"\n") != crlfs:
        raise RemoteProtocolError("bare LF in request head", 400)
    if head.startswith(_CRLF):
        raise RemoteProtocolError("empty request line", 400)

    lines = head[:-4].split(_CRLF)
    method, target, http_minor = _parse_request_line(lines[0], max_line_bytes)
    headers: list[tuple[bytes, bytes]] = []
    for count, line in enumerate(lines[1:]):
        if count >= max_headers:
            raise RemoteProtocolError("too many header lines", 431)
        if len(line) > max_line_bytes:
            raise RemoteProtocolError("header line too long", 431)
        headers.append(_parse_header_line(line))
    return method, target, http_minor, headers


def _parse_request_line(line: bytes, max_line_bytes: int) -> tuple[bytes, bytes, int]:
    """``method SP request-target SP HTTP-version``; checks in this order."""
    if len(line) > max_line_bytes:
        raise RemoteProtocolError("request line too long", 414)
    sp1 = line.find(b" ")
    if sp1 < 0:
        raise RemoteProtocolError("malformed request line", 400)
    sp2 = line.find(b" ", sp1 + 1)
    if sp2 < 0:
        raise RemoteProtocolError("request line without HTTP version", 400)
    method = line[:sp1]
    target = line[sp1 + 1 : sp2]
    version = line[sp2 + 1 :]

    if not method or method.translate(None, TCHAR):
        raise RemoteProtocolError("invalid method", 400)

    if (
        len(version) != 8
        or not version.startswith(b"HTTP/")
        or version[5] not in _DIGIT
        or version[6] != 0x2E  # "."
        or version[7] not in _DIGIT
    ):
        raise RemoteProtocolError("invalid HTTP version", 400)
    if version[5] != 0x31:  # "1"
        raise RemoteProtocolError("HTTP version not supported", 505)
    http_minor = 0 if version[7] == 0x30 else 1

    if not target:
        raise RemoteProtocolError("empty request target", 400)
    if target.translate(None, _TARGET_CHARS):
        raise RemoteProtocolError("invalid character in request target", 400)
    first = target[0]
    if first == 0x2F:  # "/": origin-form
        pass
    elif first == 0x2A:  # "*": asterisk-form
        if target != b"*":
            raise RemoteProtocolError("invalid request target", 400)
        if method != b"OPTIONS":
            raise RemoteProtocolError("asterisk-form request target without OPTIONS", 400)
    elif not _is_absolute_form(target):
        raise RemoteProtocolError("invalid request target", 400)
    return method, target, http_minor


def _is_absolute_form(target: bytes) -> bool:
    """``ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) "://"`` at the start."""
    colon = target.find(b"://")
    return colon >= 1 and target[0] in _ALPHA and not target[1:colon].translate(None, _SCHEME_CHARS)


def _parse_header_line(line: bytes) -> tuple[bytes, bytes]:
    """``field-name ":" OWS field-value OWS``; checks in this order."""
    if line[:1] in (b" ", b"\t"):
        raise RemoteProtocolError("obsolete line folding in header", 400)
    colon = line.find(b":")
    if colon < 0:
        raise RemoteProtocolError("header line without colon", 400)
    if colon == 0:
        raise RemoteProtocolError("empty header name", 400)
    name = line[:colon]
    if name[-1] in _OWS:
        raise RemoteProtocolError("whitespace between header name and colon", 400)
    if name.translate(None, TCHAR):
        raise RemoteProtocolError("invalid character in header name", 400)
    value = line[colon + 1 :]
    if value.translate(None, _VALUE_CHARS):
        raise RemoteProtocolError("invalid character in header value", 400)
    return name.lower(), value.strip(_OWS)
