# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._observe._metrics cimport Histogram

cdef class Operation

@cython.final
cdef class AccessLog:
    cdef public list pieces
    cdef public Py_ssize_t waiting, limit, dropped, _ms, _second
    cdef public double sample, _offset
    cdef public object json, path, principal_text, _stop, _thread
    cdef public object _stamp, _prefix, _sessions, _principals, _micros
    cdef public object _no_session, _no_principal
    @cython.locals(ms=cython.Py_ssize_t, us=cython.Py_ssize_t)
    cpdef add(
        self, double now, client, principal, Operation operation, Py_ssize_t status,
        double seconds, session_id
    )
    @cython.locals(ms=cython.Py_ssize_t, second=cython.Py_ssize_t)
    cpdef _stamp_of(self, double now)
    cpdef _session(self, session_id)
    cpdef _principal(self, principal)
    cpdef _flush(self, fd)

@cython.final
cdef class Operation:
    cdef public Histogram histogram
    cdef public object is_error, version, ok, head, tail

cpdef _status(Py_ssize_t status)
