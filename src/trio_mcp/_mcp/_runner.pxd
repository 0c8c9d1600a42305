# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._protocol._envelope cimport Envelope
from trio_mcp._protocol._jsonrpc cimport RPCRequest
from trio_mcp._protocol._sessions cimport Session
from trio_mcp._mcp._dispatch cimport Dispatcher

@cython.final
cdef class RequestRunner:
    cdef public object app, config, requests, sealer, principal_key, lifespan_state, stopping
    cdef public object tracing, asks_clients
    cdef public Dispatcher dispatch
    @cython.locals(session=Session)
    cpdef _context(
        self, RPCRequest message, stream, scope, headers, principal, Envelope envelope, mrtr,
        input_responses, state
    )
    cpdef notify(self, message, session)
    cpdef resolve(self, message, session)
