# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._mcp._runner cimport RequestRunner

@cython.final
cdef class HTTPSSETransport:
    cdef public object config, sessions, bus, sweeper, handshake, nursery, _answering
    cdef public object _running, _open_streams, _draining, _stopping, _quiet
    cdef public object observer
    cdef public RequestRunner runner
