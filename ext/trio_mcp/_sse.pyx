# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Server-Sent Events framing (compiled twin of ``trio_mcp._sse_py``).

The twin defines the behaviour (and documents the accepted types); this module
must match it exactly, results, exception types and messages. Each frame is
one bytes object, sized first and then filled with memcpy.
"""

from libc.string cimport memchr, memcpy

cdef extern from "Python.h":
    bint PyBytes_Check(object o)
    bint PyByteArray_Check(object o)
    bint PyMemoryView_Check(object o)
    bint PyLong_Check(object o)
    bint PyBool_Check(object o)
    char *PyBytes_AS_STRING(object o)
    Py_ssize_t PyBytes_GET_SIZE(object o)
    bytes PyBytes_FromStringAndSize(const char *v, Py_ssize_t n)

__all__ = ["format_comment", "format_event"]

cdef const char *_HEX = b"0123456789abcdef"


cdef inline bint _has(const char *p, Py_ssize_t n, int c) noexcept nogil:
    return n > 0 and memchr(p, c, <size_t>n) != NULL


cdef inline bint _has_break(const char *p, Py_ssize_t n) noexcept nogil:
    return _has(p, n, b'\n') or _has(p, n, b'\r')


cdef inline char *_put(char *o, const char *s, Py_ssize_t n) noexcept nogil:
    if n > 0:
        memcpy(o, s, <size_t>n)
    return o + n


cdef inline Py_ssize_t _hex_len(Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k = 1
    while n >= 16:
        n >>= 4
        k += 1
    return k


cdef inline char *_put_hex(char *o, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(k - 1, -1, -1):
        o[i] = _HEX[n & 0x0F]
        n >>= 4
    return o + k


cdef inline Py_ssize_t _chunk_overhead(Py_ssize_t frame_len) noexcept nogil:
    # b"<hex>\r\n" + frame + b"\r\n"
    return _hex_len(frame_len) + 4


cdef inline char *_chunk_head(char *o, Py_ssize_t frame_len) noexcept nogil:
    o = _put_hex(o, frame_len, _hex_len(frame_len))
    o[0] = b'\r'
    o[1] = b'\n'
    return o + 2


cdef inline char *_chunk_tail(char *o) noexcept nogil:
    o[0] = b'\r'
    o[1] = b'\n'
    return o + 2


cdef Py_ssize_t _data_size(const char *p, Py_ssize_t n) noexcept nogil:
    """Bytes the ``data: `` lines of p[0:n] take; lines split on CRLF, CR, LF."""
    cdef Py_ssize_t lines = 1, breaks = 0, i = 0
    cdef char c
    while i < n:
        c = p[i]
        if c == b'\n':
            lines += 1
            breaks += 1
        elif c == b'\r':
            lines += 1
            if i + 1 < n and p[i + 1] == b'\n':
                breaks += 2
                i += 1
            else:
                breaks += 1
        i += 1
    return 7 * lines + (n - breaks)


cdef char *_put_data(char *o, const char *p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t start = 0, i = 0
    cdef char c
    while i < n:
        c = p[i]
        if c == b'\n' or c == b'\r':
            o = _put(o, b"data: ", 6)
            o = _put(o, p + start, i - start)
            o[0] = b'\n'
            o += 1
            if c == b'\r' and i + 1 < n and p[i + 1] == b'\n':
                i += 1
            start = i + 1
        i += 1
    o = _put(o, b"data: ", 6)
    o = _put(o, p + start, n - start)
    o[0] = b'\n'
    return o + 1


def format_event(data, event_id=None, event=None, retry_ms=None, chunked=False):
    """format_event(data, event_id=None, event=None, retry_ms=None, chunked=False) -> bytes

    Frame one SSE event: ``id``, ``event``, ``retry`` (each if given), then
    every line of `data` (split on CRLF, CR, LF) as a ``data: `` line, then a
    blank line. With `chunked`, wrap the frame in one HTTP/1.1 chunk.
    """
    cdef bytes b_data, b_id, b_event, b_retry = None
    cdef const char *p
    cdef Py_ssize_t n, id_len = 0, event_len = 0, retry_len = 0
    cdef Py_ssize_t frame_len, total
    cdef bint multiline, chunk
    cdef bytes out
    cdef char *o

    if PyBytes_Check(data):
        b_data = <bytes>data
    elif PyByteArray_Check(data):
        b_data = bytes(data)
    elif PyMemoryView_Check(data):
        b_data = data.tobytes()
    else:
        raise TypeError(
            f"data must be bytes, bytearray or memoryview, not {type(data).__name__}"
        )
    # 'data: ' + line + '\n' per line, then the blank line.
    p = PyBytes_AS_STRING(b_data)
    n = PyBytes_GET_SIZE(b_data)
    multiline = _has_break(p, n)
    frame_len = (_data_size(p, n) if multiline else n + 7) + 1

    if event_id is not None:
        if not PyBytes_Check(event_id):
            raise TypeError(f"event_id must be bytes, not {type(event_id).__name__}")
        b_id = <bytes>event_id
        id_len = PyBytes_GET_SIZE(b_id)
        if _has_break(PyBytes_AS_STRING(b_id), id_len) or _has(
            PyBytes_AS_STRING(b_id), id_len, 0
        ):
            raise ValueError("event_id must not contain CR, LF or NUL")
        frame_len += 5 + id_len  # 'id: ' + id + '\n'
    if event is not None:
        if not PyBytes_Check(event):
            raise TypeError(f"event must be bytes, not {type(event).__name__}")
        b_event = <bytes>event
        event_len = PyBytes_GET_SIZE(b_event)
        if _has_break(PyBytes_AS_STRING(b_event), event_len):
            raise ValueError("event must not contain CR or LF")
        frame_len += 8 + event_len  # 'event: ' + event + '\n'
    if retry_ms is not None:
        if not PyLong_Check(retry_ms) or PyBool_Check(retry_ms):
            raise TypeError(f"retry_ms must be an int, not {type(retry_ms).__name__}")
        if retry_ms < 0:
            raise ValueError("retry_ms must be >= 0")
        b_retry = b"%d" % retry_ms
        retry_len = PyBytes_GET_SIZE(b_retry)
        frame_len += 8 + retry_len  # 'retry: ' + digits + '\n'

    chunk = bool(chunked)
    total = frame_len + _chunk_overhead(frame_len) if chunk else frame_len
    out = PyBytes_FromStringAndSize(NULL, total)
    o = PyBytes_AS_STRING(out)
    if chunk:
        o = _chunk_head(o, frame_len)
    if event_id is not None:
        o = _put(o, b"id: ", 4)
        o = _put(o, PyBytes_AS_STRING(b_id), id_len)
        o[0] = b'\n'
        o += 1
    if event is not None:
        o = _put(o, b"event: ", 7)
        o = _put(o, PyBytes_AS_STRING(b_event), event_len)
        o[0] = b'\n'
        o += 1
    if retry_len:
        o = _put(o, b"retry: ", 7)
        o = _put(o, PyBytes_AS_STRING(b_retry), retry_len)
        o[0] = b'\n'
        o += 1
    if multiline:
        o = _put_data(o, p, n)
    else:
        o = _put(o, b"data: ", 6)
        o = _put(o, p, n)
        o[0] = b'\n'
        o += 1
    o[0] = b'\n'
    o += 1
    if chunk:
        o = _chunk_tail(o)
    return out


def format_comment(text=b"", chunked=False):
    """format_comment(text=b'', chunked=False) -> bytes

    Frame an SSE comment: ``: text`` and a blank line (``:`` alone if `text`
    is empty). `text` must not contain CR or LF. With `chunked`, wrap the
    frame in one HTTP/1.1 chunk.
    """
    if not PyBytes_Check(text):
        raise TypeError(f"text must be bytes, not {type(text).__name__}")
    cdef bytes b_text = <bytes>text
    cdef const char *p = PyBytes_AS_STRING(b_text)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(b_text)
    if _has_break(p, n):
        raise ValueError("comment text must not contain CR or LF")
    # ':' + (' ' + text if text) + '\n\n'
    cdef Py_ssize_t frame_len = 3 + (n + 1 if n else 0)
    cdef bint chunk = bool(chunked)
    cdef Py_ssize_t total = frame_len + _chunk_overhead(frame_len) if chunk else frame_len
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef char *o = PyBytes_AS_STRING(out)
    if chunk:
        o = _chunk_head(o, frame_len)
    o[0] = b':'
    o += 1
    if n:
        o[0] = b' '
        o = _put(o + 1, p, n)
    o[0] = b'\n'
    o[1] = b'\n'
    o += 2
    if chunk:
        o = _chunk_tail(o)
    return out
