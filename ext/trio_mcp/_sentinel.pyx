# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Header value sentinel decoding (compiled twin of ``trio_mcp._sentinel_py``).

The twin defines the behaviour; this module must match it exactly, results,
exception types and messages. See the twin for the rules.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memcmp

from trio_mcp._errors import HeaderValueError

cdef extern from "Python.h":
    bint PyBytes_Check(object o)
    const char *PyBytes_AS_STRING(object o)
    Py_ssize_t PyBytes_GET_SIZE(object o)
    str PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)
    str PyUnicode_DecodeASCII(const char *s, Py_ssize_t size, const char *errors)

__all__ = ["decode_header_value"]

cdef const char *_PREFIX = b"=?base64?"
cdef const char *_SUFFIX = b"?="
cdef enum:
    _PREFIX_LEN = 9
    _SUFFIX_LEN = 2
    _STACK_BUF = 256  # decoded bytes that fit on the stack

# Value of each base64 symbol, -1 for anything else (including '=').
cdef signed char _B64[256]
# 1 for the bytes a literal value may contain: HTAB and 0x20-0x7E.
cdef unsigned char _LITERAL_OK[256]


cdef void _init_tables() noexcept:
    cdef int i
    cdef const char *alphabet = (
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    )
    for i in range(256):
        _B64[i] = -1
        _LITERAL_OK[i] = 1 if (i == 0x09 or 0x20 <= i <= 0x7E) else 0
    for i in range(64):
        _B64[<unsigned char>alphabet[i]] = <signed char>i


_init_tables()


cdef Py_ssize_t _b64_decode(
    const unsigned char *p, Py_ssize_t n, unsigned char *out
) noexcept nogil:
    """Decode strict canonical base64 p[0:n] (n a positive multiple of 4) into out.

    Returns the number of bytes written, or -1 when the input is not strict
    canonical base64. `out` must hold n // 4 * 3 bytes.
    """
    cdef Py_ssize_t quads = n >> 2
    cdef Py_ssize_t i
    cdef int a, b, c, d
    cdef unsigned char *o = out
    for i in range(quads - 1):
        a = _B64[p[0]]
        b = _B64[p[1]]
        c = _B64[p[2]]
        d = _B64[p[3]]
        if (a | b | c | d) < 0:
            return -1
        o[0] = <unsigned char>((a << 2) | (b >> 4))
        o[1] = <unsigned char>(((b & 0x0F) << 4) | (c >> 2))
        o[2] = <unsigned char>(((c & 0x03) << 6) | d)
        p += 4
        o += 3
    # The last quad may carry the padding.
    a = _B64[p[0]]
    b = _B64[p[1]]
    if (a | b) < 0:
        return -1
    o[0] = <unsigned char>((a << 2) | (b >> 4))
    if p[3] == b'=':
        if p[2] == b'=':
            if b & 0x0F:
                return -1
            return (o - out) + 1
        c = _B64[p[2]]
        if c < 0 or (c & 0x03):
            return -1
        o[1] = <unsigned char>(((b & 0x0F) << 4) | (c >> 2))
        return (o - out) + 2
    c = _B64[p[2]]
    d = _B64[p[3]]
    if (c | d) < 0:
        return -1
    o[1] = <unsigned char>(((b & 0x0F) << 4) | (c >> 2))
    o[2] = <unsigned char>(((c & 0x03) << 6) | d)
    return (o - out) + 3


cdef str _decode_sentinel(const unsigned char *p, Py_ssize_t n):
    cdef unsigned char stack_buf[_STACK_BUF]
    cdef unsigned char *buf = stack_buf
    cdef Py_ssize_t cap, size
    if n & 3:
        raise HeaderValueError("invalid base64 in sentinel-encoded value")
    if n == 0:
        return ""
    cap = (n >> 2) * 3
    if cap > _STACK_BUF:
        buf = <unsigned char *>PyMem_Malloc(cap)
        if buf == NULL:
            raise MemoryError()
    try:
        size = _b64_decode(p, n, buf)
        if size < 0:
            raise HeaderValueError("invalid base64 in sentinel-encoded value")
        try:
            return PyUnicode_DecodeUTF8(<const char *>buf, size, NULL)
        except UnicodeDecodeError:
            raise HeaderValueError("sentinel-encoded value is not valid UTF-8") from None
    finally:
        if buf != stack_buf:
            PyMem_Free(buf)


def decode_header_value(raw):
    """decode_header_value(raw: bytes) -> str

    Decode one MCP request header value (surrounding whitespace already
    stripped): a ``=?base64?...?=`` sentinel holds strict canonical base64 of
    strict UTF-8; any other value is a literal of HTAB and 0x20-0x7E only.
    Raises TypeError for a non-bytes `raw`, HeaderValueError for a bad value.
    """
    if not PyBytes_Check(raw):
        raise TypeError(f"header value must be bytes, not {type(raw).__name__}")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw)
    cdef Py_ssize_t i
    if (
        n >= _PREFIX_LEN + _SUFFIX_LEN
        and memcmp(p, _PREFIX, _PREFIX_LEN) == 0
        and memcmp(p + n - _SUFFIX_LEN, _SUFFIX, _SUFFIX_LEN) == 0
    ):
        return _decode_sentinel(p + _PREFIX_LEN, n - _PREFIX_LEN - _SUFFIX_LEN)
    for i in range(n):
        if not _LITERAL_OK[p[i]]:
            raise HeaderValueError("invalid character in header value")
    return PyUnicode_DecodeASCII(<const char *>p, n, NULL)
