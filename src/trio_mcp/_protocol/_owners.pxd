# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one another compiled module calls per
# request a C call (it stays callable from Python, as in the .py).
cimport cython
from trio_mcp._http._connection cimport Request

@cython.final
cdef class OwnerHints:
    cdef public object name, prefix, _keys, _random

@cython.final
cdef class PassingOn:
    cdef public object hints, _messages_path, _own, _own_length
    @cython.locals(raw=bytes)
    cpdef owner_to_ask(self, Request request, on_endpoint)
