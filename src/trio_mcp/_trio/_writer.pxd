# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself per request a C
# call (the method stays callable from Python, as in the .py).
cimport cython
from trio_mcp._trio._connection cimport Connection, DateCache
from trio_mcp._trio._socketio cimport SocketIO

@cython.final
cdef class ConnectionWriter:
    cdef public object _stream, _write_timeout, _frame, state, broken
    cdef public object outlives_peer, seen, time_limit_s, overdue, watched, _watch, slow
    cdef public Connection _conn
    cdef public DateCache _dates
    @cython.locals(conn=Connection, sio=SocketIO)
    cpdef _respond_now(self, response)
    cpdef respond_nowait(self, response)
    @cython.locals(sio=SocketIO)
    cpdef send_nowait(self, piece)
    cpdef finished(self)
