# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Check the header fields of a request (compiled twin of ``_headers_py``).

``trio_mcp._headers_py`` defines the behaviour, including the order of the
checks and the error messages; this module must match it for every input
whose names and values are ``bytes`` (other types raise TypeError here).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp

from trio_mcp._errors import RemoteProtocolError

__all__ = [
    "FLAG_CLOSE",
    "FLAG_EXPECT_CONTINUE",
    "FLAG_KEEP_ALIVE",
    "SINGLETON_HEADERS",
    "check_headers",
]

cdef enum:
    F_CLOSE = 1
    F_KEEP_ALIVE = 2
    F_EXPECT_CONTINUE = 4

FLAG_CLOSE = F_CLOSE
FLAG_KEEP_ALIVE = F_KEEP_ALIVE
FLAG_EXPECT_CONTINUE = F_EXPECT_CONTINUE

# Header kinds: 0..9 are the singletons (bit positions in a "seen" mask).
cdef enum:
    H_HOST = 0
    H_CONTENT_LENGTH = 1
    H_CONTENT_TYPE = 2
    H_AUTHORIZATION = 3
    H_ORIGIN = 4
    H_MCP_PROTOCOL_VERSION = 5
    H_MCP_SESSION_ID = 6
    H_MCP_METHOD = 7
    H_MCP_NAME = 8
    H_LAST_EVENT_ID = 9
    N_SINGLETONS = 10
    H_TRANSFER_ENCODING = 10
    H_CONNECTION = 11
    H_EXPECT = 12
    H_OTHER = 13

# Indexed by the singleton kinds above.
_DISPLAY_NAMES = (
    "Host",
    "Content-Length",
    "Content-Type",
    "Authorization",
    "Origin",
    "MCP-Protocol-Version",
    "Mcp-Session-Id",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
)
cdef tuple _DUPLICATE_MESSAGES = tuple([f"duplicate {d} header" for d in _DISPLAY_NAMES])
cdef tuple _COMMA_MESSAGES = tuple([f"comma-joined {d} header" for d in _DISPLAY_NAMES])

# Indexed by the singleton kinds above: the keys of the returned dict (equal
# to the names passed in; these objects already carry their hash).
cdef tuple _KEYS = (
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
)
for _key in _KEYS:
    hash(_key)
del _key

SINGLETON_HEADERS = frozenset(_KEYS)

cdef enum:
    MAX_CONTENT_LENGTH_DIGITS = 18


cdef inline bint _is(const unsigned char* s, const char* lit, Py_ssize_t n) noexcept:
    return memcmp(s, lit, <size_t>n) == 0


cdef int _kind(const unsigned char* s, Py_ssize_t n) noexcept:
    """The kind of the (already lowercased) header name ``s[:n]``."""
    if n == 4:
        if _is(s, b"host", 4):
            return H_HOST
    elif n == 6:
        if _is(s, b"origin", 6):
            return H_ORIGIN
        if _is(s, b"expect", 6):
            return H_EXPECT
    elif n == 8:
        if _is(s, b"mcp-name", 8):
            return H_MCP_NAME
    elif n == 10:
        if _is(s, b"connection", 10):
            return H_CONNECTION
        if _is(s, b"mcp-method", 10):
            return H_MCP_METHOD
    elif n == 12:
        if _is(s, b"content-type", 12):
            return H_CONTENT_TYPE
    elif n == 13:
        if _is(s, b"authorization", 13):
            return H_AUTHORIZATION
        if _is(s, b"last-event-id", 13):
            return H_LAST_EVENT_ID
    elif n == 14:
        if _is(s, b"content-length", 14):
            return H_CONTENT_LENGTH
        if _is(s, b"mcp-session-id", 14):
            return H_MCP_SESSION_ID
    elif n == 17:
        if _is(s, b"transfer-encoding", 17):
            return H_TRANSFER_ENCODING
    elif n == 20:
        if _is(s, b"mcp-protocol-version", 20):
            return H_MCP_PROTOCOL_VERSION
    return H_OTHER


cdef inline unsigned char _lower(unsigned char c) noexcept:
    return c + 32 if 0x41 <= c <= 0x5A else c


cdef bint _iequals(const unsigned char* s, Py_ssize_t n, const char* lit, Py_ssize_t m) noexcept:
    """ASCII case-insensitive ``s[:n] == lit`` (`lit` is lowercase)."""
    cdef Py_ssize_t i
    if n != m:
        return False
    for i in range(n):
        if _lower(s[i]) != <unsigned char>lit[i]:
            return False
    return True


cdef int _connection_flags(const unsigned char* s, Py_ssize_t n) noexcept:
    """Flags for the comma-separated tokens (OWS around them) in ``s[:n]``."""
    cdef int flags = 0
    cdef Py_ssize_t start = 0, end, a, b
    cdef const unsigned char* q
    while start <= n:
        q = <const unsigned char*>memchr(s + start, 0x2C, <size_t>(n - start))
        end = n if q == NULL else q - s
        a = start
        b = end
        while a < b and (s[a] == 0x20 or s[a] == 0x09):
            a += 1
        while b > a and (s[b - 1] == 0x20 or s[b - 1] == 0x09):
            b -= 1
        if _iequals(s + a, b - a, b"close", 5):
            flags |= F_CLOSE
        elif _iequals(s + a, b - a, b"keep-alive", 10):
            flags |= F_KEEP_ALIVE
        start = end + 1
    return flags


cdef long long _content_length(const unsigned char* s, Py_ssize_t n) except -1:
    cdef Py_ssize_t i
    cdef long long result = 0
    if n == 0:
        raise RemoteProtocolError("invalid Content-Length", 400)
    for i in range(n):
        if not (0x30 <= s[i] <= 0x39):
            raise RemoteProtocolError("invalid Content-Length", 400)
    if n > MAX_CONTENT_LENGTH_DIGITS:
        raise RemoteProtocolError("Content-Length too large", 413)
    for i in range(n):
        result = result * 10 + (s[i] - 0x30)
    return result


def check_headers(headers, int http_minor):
    """Validate `headers` (as returned by ``parse_head``) in one pass.

    Returns ``(singles, content_length, flags)``. See
    ``trio_mcp._headers_py.check_headers`` for the rules and their order.
    """
    cdef dict singles = {}
    cdef long long content_length = -1
    cdef int flags = 0
    cdef bint has_transfer_encoding = False
    cdef unsigned int seen = 0
    cdef int kind
    cdef const unsigned char* ns
    cdef const unsigned char* vs
    cdef Py_ssize_t nn, vn

    for name, value in headers:
        if not PyBytes_Check(name) or not PyBytes_Check(value):
            raise TypeError("header names and values must be bytes")
        ns = <const unsigned char*>PyBytes_AS_STRING(name)
        nn = PyBytes_GET_SIZE(name)
        vs = <const unsigned char*>PyBytes_AS_STRING(value)
        vn = PyBytes_GET_SIZE(value)
        kind = _kind(ns, nn)
        if kind < N_SINGLETONS:
            if seen & (1u << kind):
                raise RemoteProtocolError(_DUPLICATE_MESSAGES[kind], 400)
            if kind != H_MCP_NAME and memchr(vs, 0x2C, <size_t>vn) != NULL:
                raise RemoteProtocolError(_COMMA_MESSAGES[kind], 400)
            seen |= 1u << kind
            singles[_KEYS[kind]] = value
            if kind == H_CONTENT_LENGTH:
                content_length = _content_length(vs, vn)
        elif kind == H_TRANSFER_ENCODING:
            has_transfer_encoding = True
        elif kind == H_CONNECTION:
            flags |= _connection_flags(vs, vn)
        elif kind == H_EXPECT and http_minor == 1:
            if not _iequals(vs, vn, b"100-continue", 12):
                raise RemoteProtocolError("unsupported Expect", 417)
            flags |= F_EXPECT_CONTINUE
    if has_transfer_encoding:
        if content_length >= 0:
            raise RemoteProtocolError("Transfer-Encoding together with Content-Length", 400)
        raise RemoteProtocolError("request Transfer-Encoding is not supported", 501)
    if http_minor == 1 and not (seen & (1u << H_HOST)):
        raise RemoteProtocolError("missing Host header", 400)
    return singles, content_length, flags
