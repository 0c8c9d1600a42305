# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself per request a C
# call (the method stays callable from Python, as in the .py).
cimport cython
from trio_mcp._protocol._sessions cimport Session, SessionTable
from trio_mcp._mcp._dispatch cimport Dispatcher
from trio_mcp._http._connection cimport Request
from trio_mcp._protocol._jsonrpc cimport Request as RPCRequest
from trio_mcp._protocol._envelope cimport Envelope
from trio_mcp._mcp._streams cimport Listener

cdef class MCPEndpoint:
    cdef public object app, config, authenticate, _accept_cache
    cdef public SessionTable sessions
    cdef public object _host_verdicts, _now, _sweep_interval_s, _swept_at
    cdef public object _server_info_key, _server_info_value
    cdef public object events, _broadcasts, _listeners, _nursery, lifespan_state
    cdef public object _paths, _legacy_paths, _loopback, _origins, _hosts
    cdef public Dispatcher dispatch
    cdef public object sealer
    cpdef respond_now(self, Request request)
    cpdef _admit(self, Request request)
    cpdef _check_origin(self, request)
    cpdef _check_post_head(self, Request request)
    cpdef _post(self, Request request, cors, principal)
    @cython.locals(raw=bytes, session=Session)
    cpdef _session_for(self, request, principal)
    cpdef _decorate(self, method, result)
    cpdef _server_info(self)
    cpdef _initialize(self, request, message, principal, batch)
    cpdef _initialize_result(self, params)
    cpdef _notification(self, message, session)
    @cython.locals(rpc=RPCRequest, envelope=Envelope)
    cpdef _modern_checked(self, Request request, message)
    cpdef _modern_post(self, Request request, message, principal, cors)
    @cython.locals(listener=Listener)
    cpdef _deliver_to_listeners(self, method, params, uri)
