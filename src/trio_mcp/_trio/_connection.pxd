# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._http._connection cimport HTTP11Connection

cdef class DateCache:
    cdef public object _second, _value, _tickers
    cpdef get(self)

@cython.final
cdef class Connection:
    cdef public HTTP11Connection http
    cdef public object timer, interruptible, limit, since, answering, holding, overdue
    cdef public object group, hop
