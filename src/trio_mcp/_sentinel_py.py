"""Header value sentinel encoding (pure-Python twin of ``_sentinel.pyx``).

MCP 2026-07-28 sends a request header value that is not safe as a plain HTTP
header value as ``=?base64?`` + Base64(UTF-8 bytes) + ``?=``.
`decode_header_value` is the server side and defines the behaviour the
compiled module must match exactly (results, exception types and messages).
`encode_header_value` is the client side; it exists only here (for tests and
clients), it is not part of the twin contract.
"""

from __future__ import annotations

import binascii
import re

from ._errors import HeaderValueError

__all__ = ["decode_header_value", "encode_header_value"]

_PREFIX = b"=?base64?"
_SUFFIX = b"?="
# The two markers must not overlap: b"=?base64?=" is a literal.
_MIN_SENTINEL_LEN = len(_PREFIX) + len(_SUFFIX)

# Strict, canonical standard base64: full quads, at most two '=' at the very
# end, and the bits the last symbol before the padding does not use are zero
# (with "==" that symbol's value is a multiple of 16, with "=" of 4).
_CANONICAL_B64 = re.compile(
    rb"(?:[A-Za-z0-9+/]{4})*"
    rb"(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?"
)
# A literal value: HTAB or visible ASCII or SP, nothing else.
_LITERAL = re.compile(rb"[\t\x20-\x7e]*")
# What a client may send as is (also excludes leading/trailing SP and HTAB).
_SAFE_TEXT = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?")

_ERR_TYPE = "header value must be bytes, not {}"
_ERR_BASE64 = "invalid base64 in sentinel-encoded value"
_ERR_UTF8 = "sentinel-encoded value is not valid UTF-8"
_ERR_CHAR = "invalid character in header value"


def decode_header_value(raw: bytes) -> str:
    """Decode one MCP request header value (surrounding whitespace already stripped).

    A value that starts with ``=?base64?`` and ends with ``?=`` (markers not
    overlapping, case-sensitive) is sentinel-encoded: its payload must be
    strict canonical standard base64 of strict UTF-8. Any other value is a
    literal of HTAB and 0x20-0x7E bytes only. `raw` must be `bytes` (or a
    subclass); anything else raises `TypeError`. Bad values raise
    `HeaderValueError` with a short reason; the caller adds the header name.
    """
    if not isinstance(raw, bytes):
        raise TypeError(_ERR_TYPE.format(type(raw).__name__))
    if len(raw) >= _MIN_SENTINEL_LEN and raw.startswith(_PREFIX) and raw.endswith(_SUFFIX):
        payload = raw[len(_PREFIX) : len(raw) - len(_SUFFIX)]
        if _CANONICAL_B64.fullmatch(payload) is None:
            raise HeaderValueError(_ERR_BASE64)
        try:
            return binascii.a2b_base64(payload).decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderValueError(_ERR_UTF8) from None
    if _LITERAL.fullmatch(raw) is None:
        raise HeaderValueError(_ERR_CHAR)
    return raw.decode("ascii")


def encode_header_value(value: str) -> bytes:
    """Encode `value` for an MCP request header the way a client must.

    The value goes as is (ASCII bytes) when it is safe as a plain header value:
    only 0x20-0x7E, no leading or trailing SP/HTAB, and it does not itself look
    like a sentinel. Otherwise it is sent as ``=?base64?`` + padded standard
    Base64 of its UTF-8 bytes + ``?=``. A str that cannot be encoded as UTF-8
    (lone surrogates) raises `UnicodeEncodeError`.
    """
    if not isinstance(value, str):
        raise TypeError(f"header value must be str, not {type(value).__name__}")
    if _SAFE_TEXT.fullmatch(value) is not None and not (
        value.startswith("=?base64?") and value.endswith("?=")
    ):
        return value.encode("ascii")
    return _PREFIX + binascii.b2a_base64(value.encode("utf-8"), newline=False) + _SUFFIX
