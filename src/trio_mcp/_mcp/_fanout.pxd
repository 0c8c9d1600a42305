# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._mcp._streams cimport Listener

@cython.final
cdef class Broadcaster:
    cdef public object config, sessions, events, bus, _send, _now, keepalives, peers
    @cython.locals(listener=Listener)
    cpdef deliver_to_listeners(self, method, params, uri)
    cpdef close_stream(self, session, number)

@cython.final
cdef class Sweeper:
    cdef public object sessions, events, bus, requests, interval_s, observer
