# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method a C call where the class calls it on itself.
cimport cython

@cython.final
cdef class _SessionRequests:
    cdef public object running, waiting, last_id

@cython.final
cdef class MemoryRequestRegistry:
    cdef public object _sessions, max_running, max_waiting
    cpdef _of(self, session_id)
