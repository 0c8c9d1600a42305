# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._http._connection cimport Request
from trio_mcp._protocol._jsonrpc cimport Request as RPCRequest
from trio_mcp._protocol._sessions cimport Session, SessionTable
from trio_mcp._mcp._fanout cimport Broadcaster, Sweeper
from trio_mcp._mcp._handshake cimport Handshake
from trio_mcp._mcp._runner cimport RequestRunner

@cython.final
cdef class SessionsTransport:
    cdef public object config, events
    cdef public SessionTable sessions
    cdef public RequestRunner runner
    cdef public Broadcaster broadcaster
    cdef public Sweeper sweeper
    cdef public Handshake handshake
    @cython.locals(raw=bytes, session=Session, sessions=SessionTable)
    cpdef session_for(self, Request request, principal)
    @cython.locals(runner=RequestRunner)
    cpdef post(self, Request request, messages, batch, cors, principal)
    @cython.locals(sessions=SessionTable)
    cpdef initialize(self, RPCRequest message, principal, batch)
