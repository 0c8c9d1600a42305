# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class _SessionEvents:
    cdef public object tag, sequence, streams, sizes, cost

@cython.final
cdef class MemoryEventStore:
    cdef public object limits, _sessions, _pending
