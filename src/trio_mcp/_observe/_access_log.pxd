# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._observe._metrics cimport Histogram

cdef class LineFormatter
cdef class Operation

@cython.final
cdef class AccessLog:
    cdef public object lines, json, path, principal_text, _stop, _thread
    cdef public Py_ssize_t limit, dropped
    cdef public double sample
    cpdef add(self, record)
    cpdef _flush(self, fd, LineFormatter formatter)

@cython.final
cdef class Operation:
    cdef public Histogram histogram
    cdef public object text, code_text, json, code_json

@cython.final
cdef class LineFormatter:
    cdef public object principal_text, _stamp, _prefix, _hashes, _principals, _micros
    cdef public Py_ssize_t _ms, _second
    @cython.locals(ms=cython.Py_ssize_t, second=cython.Py_ssize_t)
    cpdef stamp(self, double wall)
    cpdef session(self, session_id)
    cpdef tuple principal(self, principal)
    @cython.locals(us=cython.Py_ssize_t)
    cpdef str micros(self, double seconds)
    @cython.locals(operation=Operation)
    cpdef text_line(self, tuple record, double offset)
    @cython.locals(operation=Operation)
    cpdef json_line(self, tuple record, double offset)

cpdef _status(Py_ssize_t status)

