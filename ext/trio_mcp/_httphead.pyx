# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Find and parse an HTTP/1.1 request head (compiled twin of ``_httphead_py``).

``trio_mcp._httphead_py`` defines the behaviour, including the order of the
checks and the error messages; this module must match it for every input.
It works over a ``const unsigned char*`` view of the bytes with C loops and
builds Python objects only for the results.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Check, PyByteArray_GET_SIZE
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_Check,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from libc.string cimport memchr, memcmp

from trio_mcp._errors import RemoteProtocolError

__all__ = ["find_head_end", "parse_head"]

cdef enum:
    CR = 0x0D
    LF = 0x0A
    SP = 0x20
    HT = 0x09

# Character classes, one bit each in _CLASS.
cdef enum:
    C_TCHAR = 1     # tchar: method and field-name bytes
    C_VALUE = 2     # HTAB / SP / VCHAR / obs-text: field-value bytes
    C_TARGET = 4    # VCHAR: request-target bytes
    C_SCHEME = 8    # ALPHA / DIGIT / "+" / "-" / ".": URI scheme after its first byte
    C_ALPHA = 16    # ALPHA: first byte of a URI scheme

cdef unsigned char _CLASS[256]
cdef unsigned char _LOWER[256]

# Header names that most requests carry, lowercase. A line whose name is one of
# them (in any case) gets this very object back instead of a new bytes object:
# no allocation, and its hash, which the singleton-header map needs, is
# computed once per process instead of once per request.
_COMMON_NAMES = (
    b"host", b"accept", b"accept-encoding", b"accept-language", b"authorization",
    b"cache-control", b"connection", b"content-length", b"content-type", b"cookie",
    b"expect", b"forwarded", b"last-event-id", b"mcp-method", b"mcp-name",
    b"mcp-protocol-version", b"mcp-session-id", b"origin", b"pragma", b"referer",
    b"te", b"traceparent", b"transfer-encoding", b"upgrade", b"user-agent",
    b"x-forwarded-for", b"x-forwarded-proto",
)
cdef Py_ssize_t _LONGEST_COMMON = max([len(name) for name in _COMMON_NAMES])
# index: a name's length; value: the common names of that length
cdef tuple _COMMON_BY_LENGTH = tuple([
    tuple([name for name in _COMMON_NAMES if len(name) == size])
    for size in range(_LONGEST_COMMON + 1)
])


cdef void _init_tables() noexcept:
    cdef int c
    cdef unsigned char k
    cdef bytes punct = b"!#$%&'*+-.^_`|~"
    for c in range(256):
        k = 0
        if (0x41 <= c <= 0x5A) or (0x61 <= c <= 0x7A):
            k |= C_TCHAR | C_SCHEME | C_ALPHA
        elif 0x30 <= c <= 0x39:
            k |= C_TCHAR | C_SCHEME
        if c == HT or 0x20 <= c <= 0x7E or c >= 0x80:
            k |= C_VALUE
        if 0x21 <= c <= 0x7E:
            k |= C_TARGET
        if c == 0x2B or c == 0x2D or c == 0x2E:  # + - .
            k |= C_SCHEME
        _CLASS[c] = k
        _LOWER[c] = c + 32 if 0x41 <= c <= 0x5A else c
    for c in punct:
        _CLASS[c] |= C_TCHAR


_init_tables()


def find_head_end(buf, Py_ssize_t start):
    """Return the index just past the CRLFCRLF ending the head in `buf`, or -1.

    See ``trio_mcp._httphead_py.find_head_end``.
    """
    cdef const unsigned char* p
    cdef const unsigned char* q
    cdef Py_ssize_t n, i
    if PyBytes_Check(buf):
        p = <const unsigned char*>PyBytes_AS_STRING(buf)
        n = PyBytes_GET_SIZE(buf)
    elif PyByteArray_Check(buf):
        p = <const unsigned char*>PyByteArray_AS_STRING(buf)
        n = PyByteArray_GET_SIZE(buf)
    else:
        raise TypeError("find_head_end() needs bytes or bytearray")
    if start < 0:
        start = 0
    i = start
    while i < n:
        q = <const unsigned char*>memchr(p + i, LF, <size_t>(n - i))
        if q == NULL:
            return -1
        i = q - p
        if i == 0 or p[i - 1] != CR:
            raise RemoteProtocolError("bare LF in request head", 400)
        if i - 3 >= start and p[i - 3] == CR and p[i - 2] == LF:
            return i + 1
        i += 1
    return -1


cdef inline bint _has_bare_cr(const unsigned char* p, Py_ssize_t n) noexcept:
    cdef const unsigned char* q
    cdef Py_ssize_t i = 0
    while i < n:
        q = <const unsigned char*>memchr(p + i, CR, <size_t>(n - i))
        if q == NULL:
            return False
        i = q - p + 1
        if i >= n or p[i] != LF:
            return True
    return False


cdef inline bint _has_bare_lf(const unsigned char* p, Py_ssize_t n) noexcept:
    cdef const unsigned char* q
    cdef Py_ssize_t i = 0
    while i < n:
        q = <const unsigned char*>memchr(p + i, LF, <size_t>(n - i))
        if q == NULL:
            return False
        i = q - p
        if i == 0 or p[i - 1] != CR:
            return True
        i += 1
    return False


def parse_head(bytes head not None, Py_ssize_t max_line_bytes, Py_ssize_t max_headers):
    """Parse a request head into ``(method, target, http_minor, headers)``.

    See ``trio_mcp._httphead_py.parse_head``.
    """
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(head)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(head)
    cdef bint bare_cr = False

    if n < 4 or memcmp(p + n - 4, b"\r\n\r\n", 4) != 0:
        raise RemoteProtocolError("request head does not end with CRLFCRLF", 400)
    # The twin looks for bare CR and bare LF first. Here the single pass of
    # _parse_lines fails on any head that holds one (see there), so those
    # searches only run on the error path, to report the same error.
    try:
        return _parse_lines(p, n, max_line_bytes, max_headers)
    except RemoteProtocolError:
        if _has_bare_cr(p, n):
            bare_cr = True
        elif not _has_bare_lf(p, n):
            raise
    if bare_cr:
        raise RemoteProtocolError("bare CR in request head", 400)
    raise RemoteProtocolError("bare LF in request head", 400)


cdef tuple _parse_lines(
    const unsigned char* p, Py_ssize_t n, Py_ssize_t max_line_bytes, Py_ssize_t max_headers
):
    """Parse the head ``p[:n]``, which ends with CRLFCRLF.

    Lines end at each CR, which must be followed by LF. Every byte of a
    successfully parsed line belongs to a class without CR and LF, so success
    means the head has neither bare CR nor bare LF; on failure the caller
    checks for those first, as the twin does.
    """
    cdef const unsigned char* q
    cdef Py_ssize_t eol, pos, count, sp1 = 0, sp2 = 0
    cdef int http_minor
    cdef list headers

    if p[0] == CR:
        raise RemoteProtocolError("empty request line", 400)
    # p[n - 4] is a CR, so every search below finds one at or before it.
    q = <const unsigned char*>memchr(p, CR, <size_t>n)
    eol = q - p
    if p[eol + 1] != LF:
        raise RemoteProtocolError("bare CR in request head", 400)
    http_minor = _parse_request_line(p, eol, max_line_bytes, &sp1, &sp2)
    method = PyBytes_FromStringAndSize(<const char*>p, sp1)
    target = PyBytes_FromStringAndSize(<const char*>p + sp1 + 1, sp2 - sp1 - 1)

    headers = []
    pos = eol + 2
    count = 0
    while pos < n - 2:
        q = <const unsigned char*>memchr(p + pos, CR, <size_t>(n - pos))
        eol = q - p
        if p[eol + 1] != LF:
            raise RemoteProtocolError("bare CR in request head", 400)
        if count >= max_headers:
            raise RemoteProtocolError("too many header lines", 431)
        if eol - pos > max_line_bytes:
            raise RemoteProtocolError("header line too long", 431)
        headers.append(_parse_header_line(p + pos, eol - pos))
        count += 1
        pos = eol + 2
    return (method, target, http_minor, headers)


cdef int _parse_request_line(
    const unsigned char* p,
    Py_ssize_t n,
    Py_ssize_t max_line_bytes,
    Py_ssize_t* sp1_out,
    Py_ssize_t* sp2_out,
) except -1:
    """Check ``p[:n]``; store the offsets of both spaces; return the minor."""
    cdef const unsigned char* q
    cdef const unsigned char* t
    cdef const unsigned char* v
    cdef Py_ssize_t sp1, sp2, i, tn
    cdef int http_minor

    if n > max_line_bytes:
        raise RemoteProtocolError("request line too long", 414)
    q = <const unsigned char*>memchr(p, SP, <size_t>n)
    if q == NULL:
        raise RemoteProtocolError("malformed request line", 400)
    sp1 = q - p
    q = <const unsigned char*>memchr(p + sp1 + 1, SP, <size_t>(n - sp1 - 1))
    if q == NULL:
        raise RemoteProtocolError("request line without HTTP version", 400)
    sp2 = q - p

    if sp1 == 0:
        raise RemoteProtocolError("invalid method", 400)
    for i in range(sp1):
        if not (_CLASS[p[i]] & C_TCHAR):
            raise RemoteProtocolError("invalid method", 400)

    v = p + sp2 + 1
    if (
        n - sp2 - 1 != 8
        or memcmp(v, b"HTTP/", 5) != 0
        or not (0x30 <= v[5] <= 0x39)
        or v[6] != 0x2E
        or not (0x30 <= v[7] <= 0x39)
    ):
        raise RemoteProtocolError("invalid HTTP version", 400)
    if v[5] != 0x31:
        raise RemoteProtocolError("HTTP version not supported", 505)
    http_minor = 0 if v[7] == 0x30 else 1

    t = p + sp1 + 1
    tn = sp2 - sp1 - 1
    if tn == 0:
        raise RemoteProtocolError("empty request target", 400)
    for i in range(tn):
        if not (_CLASS[t[i]] & C_TARGET):
            raise RemoteProtocolError("invalid character in request target", 400)
    if t[0] == 0x2F:  # "/": origin-form
        pass
    elif t[0] == 0x2A:  # "*": asterisk-form
        if tn != 1:
            raise RemoteProtocolError("invalid request target", 400)
        if sp1 != 7 or memcmp(p, b"OPTIONS", 7) != 0:
            raise RemoteProtocolError("asterisk-form request target without OPTIONS", 400)
    else:
        # absolute-form: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) "://"
        # (the first "://" must follow the scheme; a scheme never holds ":").
        if not (_CLASS[t[0]] & C_ALPHA):
            raise RemoteProtocolError("invalid request target", 400)
        i = 1
        while i < tn and (_CLASS[t[i]] & C_SCHEME):
            i += 1
        if i + 3 > tn or t[i] != 0x3A or t[i + 1] != 0x2F or t[i + 2] != 0x2F:
            raise RemoteProtocolError("invalid request target", 400)
    sp1_out[0] = sp1
    sp2_out[0] = sp2
    return http_minor


cdef bint _is_lowercase_of(const unsigned char* p, bytes lower, Py_ssize_t n) noexcept:
    """Whether ``p[:n]`` lowercased is `lower` (whose length is n)."""
    cdef const unsigned char* w = <const unsigned char*>PyBytes_AS_STRING(lower)
    cdef Py_ssize_t i
    for i in range(n):
        if _LOWER[p[i]] != w[i]:
            return False
    return True


cdef tuple _parse_header_line(const unsigned char* p, Py_ssize_t n):
    """``field-name ":" OWS field-value OWS`` in ``p[:n]`` -> (name, value)."""
    cdef const unsigned char* q
    cdef Py_ssize_t colon, i, vs, ve
    cdef bytes name = None
    cdef bytes common
    cdef unsigned char* w

    if n > 0 and (p[0] == SP or p[0] == HT):
        raise RemoteProtocolError("obsolete line folding in header", 400)
    q = <const unsigned char*>memchr(p, 0x3A, <size_t>n)
    if q == NULL:
        raise RemoteProtocolError("header line without colon", 400)
    colon = q - p
    if colon == 0:
        raise RemoteProtocolError("empty header name", 400)
    if p[colon - 1] == SP or p[colon - 1] == HT:
        raise RemoteProtocolError("whitespace between header name and colon", 400)
    if colon <= _LONGEST_COMMON:
        for common in <tuple>_COMMON_BY_LENGTH[colon]:
            if _is_lowercase_of(p, common, colon):
                name = common  # (its bytes are all tchars)
                break
    if name is None:
        name = PyBytes_FromStringAndSize(NULL, colon)
        w = <unsigned char*>PyBytes_AS_STRING(name)
        for i in range(colon):
            if not (_CLASS[p[i]] & C_TCHAR):
                raise RemoteProtocolError("invalid character in header name", 400)
            w[i] = _LOWER[p[i]]
    for i in range(colon + 1, n):
        if not (_CLASS[p[i]] & C_VALUE):
            raise RemoteProtocolError("invalid character in header value", 400)

    vs = colon + 1
    ve = n
    while vs < ve and (p[vs] == SP or p[vs] == HT):
        vs += 1
    while ve > vs and (p[ve - 1] == SP or p[ve - 1] == HT):
        ve -= 1

    return (name, PyBytes_FromStringAndSize(<const char*>p + vs, ve - vs))
