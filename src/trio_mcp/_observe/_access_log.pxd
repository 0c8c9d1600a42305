# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class AccessLog:
    cdef public object lines, json, path, principal_text, _stop, _thread
    cdef public Py_ssize_t limit, dropped
    cdef public double sample
    cpdef add(self, record)

@cython.final
cdef class LineFormatter:
    cdef public object principal_text, _ms, _stamp, _second, _prefix, _hashes, _texts, _jsons
    cpdef stamp(self, wall)
    cpdef session(self, session_id)
    cpdef text_line(self, record, offset)
    cpdef json_line(self, record, offset)
