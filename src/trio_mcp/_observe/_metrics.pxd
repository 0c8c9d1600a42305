# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class Histogram:
    cdef public tuple bounds
    cdef public list counts
    cdef public double total
    @cython.locals(i=cython.Py_ssize_t, bound=cython.double)
    cpdef observe(self, double value)

@cython.final
cdef class Metrics:
    cdef public object methods, tools, prompts, versions, operations, requests, refusals
    cdef public object _error_types, _by_method
    cdef public Histogram sessions
    @cython.locals(histogram=Histogram)
    cpdef request(self, method, status, seconds)
    cpdef refused(self, status)
