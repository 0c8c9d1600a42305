# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class MemoryBus:
    cdef public object _streams, _streamed, _producers, _listeners, _by_uri
