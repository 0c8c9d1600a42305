# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._trio._connection cimport Connection, DateCache
from trio_mcp._trio._writer cimport ConnectionWriter

@cython.final
cdef class HTTPServer:
    cdef public object handler, _route, _call, config, sockets, _connections
    cdef public object _connections_total, _shutdown, timeout_tick_s
    cdef public Py_ssize_t _requests_total
    cdef public DateCache _dates
    cdef public object _batch, quota, _refused, _limits, _interruptible, tls, observer
    cdef public object _stages, _listener_closed, peer_socket, spread, _doorway, _young
