# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself per request a C
# call (the method stays callable from Python, as in the .py). @cython.locals
# types a local whose value is always of that type, so that calls of its
# methods (bytes.decode) are C calls.
cimport cython

@cython.final
cdef class Request:
    cdef public object method, target, path, query, http_minor, headers, singles, body, client
    cdef public object scheme
    cdef public double started

@cython.final
cdef class Response:
    cdef public object status, headers, body

@cython.final
cdef class HTTP11Connection:
    cdef public object _buf, _pos, _scan_from, _line_done, _head, _content_length
    cdef public object _continue_due, _request_keep_alive, _request_minor, _head_request
    cdef public object _requests_left, _eof, _max_body, _max_head, _max_line
    cdef public object _max_headers
    cdef public object phase, must_close, draining, client, proxy, scheme, status
    @cython.locals(method_bytes=bytes, target_bytes=bytes)
    cpdef _read_body(self)
    cpdef _decide_close(self, streaming)
    cpdef full_response(self, Response response, date)
