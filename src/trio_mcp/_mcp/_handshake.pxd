# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._protocol._jsonrpc cimport RPCRequest

@cython.final
cdef class Handshake:
    cdef public object app, config, sessions, _server_info_key, _server_info, observer
    cpdef server_info(self)
    cpdef initialize_result(self, params)
    cpdef initialize_nowait(self, RPCRequest message, principal, batch, owner)
