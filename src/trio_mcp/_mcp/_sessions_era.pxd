# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._http._connection cimport Request
from trio_mcp._protocol._jsonrpc cimport RPCRequest
from trio_mcp._protocol._sessions cimport Session
from trio_mcp._observe._observer cimport Observer as CObserver
from trio_mcp._mcp._streams cimport PostStream
from trio_mcp._mcp._fanout cimport Broadcaster, Sweeper
from trio_mcp._mcp._handshake cimport Handshake
from trio_mcp._mcp._runner cimport RequestRunner

@cython.final
cdef class SessionsTransport:
    cdef public object config, sessions, events, bus, observer
    cdef public RequestRunner runner
    cdef public Broadcaster broadcaster
    cdef public Sweeper sweeper
    cdef public Handshake handshake
    cpdef check_session(self, Session session, Request request, principal)
    cpdef post(self, Request request, messages, batch, cors, principal)
    cpdef _deferred(self, Request request, session, version, messages, batch, principal, cors)
    @cython.locals(runner=RequestRunner)
    cpdef _accepted(self, messages, batch, version, session)

@cython.locals(rpc=RPCRequest, session=Session, answered=cython.Py_ssize_t)
cpdef _observe(
    CObserver observer, Request request, PostStream stream, list messages, batch, list answers,
    principal, started
)
