# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._http._connection cimport HTTP11Connection
from trio_mcp._trio._socketio cimport SocketIO

cdef class _DateCache:
    cdef public object _second, _value, _tickers
    cpdef get(self)

@cython.final
cdef class _Connection:
    cdef public HTTP11Connection http
    cdef public object timer, limit, since, waiting_idle

@cython.final
cdef class HTTPServer:
    cdef public object handler, config, sockets, _connections, _connections_total
    cdef public object _requests_total, _shutdown, timeout_tick_s
    cdef public _DateCache _dates
    cdef public object _batch

@cython.final
cdef class ResponseWriter:
    cdef public object _stream, _write_timeout, _frame, state, broken
    cdef public _Connection _conn
    cdef public _DateCache _dates
    @cython.locals(conn=_Connection, sio=SocketIO)
    cpdef _respond_now(self, response)
    cpdef respond_nowait(self, response)
    @cython.locals(sio=SocketIO)
    cpdef send_nowait(self, piece)
