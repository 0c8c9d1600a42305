# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself, or another
# compiled module calls, per request a C call (it stays callable from Python).
cimport cython
from trio_mcp._http._connection cimport Request
from trio_mcp._protocol._admission cimport Admission
from trio_mcp._mcp._fanout cimport Broadcaster, Sweeper
from trio_mcp._mcp._handshake cimport Handshake
from trio_mcp._mcp._http_sse cimport HTTPSSETransport
from trio_mcp._mcp._modern_era cimport ModernTransport
from trio_mcp._mcp._runner cimport RequestRunner
from trio_mcp._mcp._sessions_era cimport SessionsTransport

cdef class MCPEndpoint:
    cdef public object app, config, authenticate, stores, _paths, _sse_paths
    cdef public object _health_path, _ready_path, ready
    cdef public object observer, _metrics_path, _exposition, peer_socket, router, passing, _via
    cdef public object peer_broadcast
    cdef public Admission admission
    cdef public RequestRunner runner
    cdef public Broadcaster broadcaster
    cdef public Sweeper sweeper
    cdef public Handshake handshake
    cdef public SessionsTransport streamable
    cdef public ModernTransport modern
    cdef public HTTPSSETransport http_sse
    cpdef route(self, Request request)
    cpdef _route_endpoint(self, Request request, cors)
    cpdef _post(self, Request request, cors, principal)
