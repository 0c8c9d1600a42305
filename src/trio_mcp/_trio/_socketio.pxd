# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class SocketIO:
    cdef public object sock, _unyielded, _unchecked, _closed, _sent, _eager
    cdef public object _batch, _write_timeout, _held, _unsent, _failure, lane, head
    cpdef hold(self, data)
    cpdef release(self)
    cpdef send_nowait(self, data)

@cython.locals(sio=SocketIO)
cpdef _release_all(list held)
