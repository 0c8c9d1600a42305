# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._http._connection cimport Request
from trio_mcp._protocol._envelope cimport Envelope
from trio_mcp._protocol._jsonrpc cimport RPCRequest
from trio_mcp._mcp._fanout cimport Broadcaster
from trio_mcp._mcp._handshake cimport Handshake
from trio_mcp._mcp._runner cimport RequestRunner

@cython.final
cdef class ModernTransport:
    cdef public object app, config, bus, observer
    cdef public RequestRunner runner
    cdef public Broadcaster broadcaster
    cdef public Handshake handshake
    @cython.locals(rpc=RPCRequest)
    cpdef post(self, Request request, message, principal, cors)
    @cython.locals(rpc=RPCRequest, envelope=Envelope)
    cpdef checked(self, Request request, message)
    cpdef decorate(self, method, result)
