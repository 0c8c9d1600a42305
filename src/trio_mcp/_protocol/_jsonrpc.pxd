# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class RPCRequest:
    cdef public object id, method, params

@cython.final
cdef class Notification:
    cdef public object method, params

@cython.final
cdef class RPCResponse:
    cdef public object id, result, error

@cython.final
cdef class Invalid:
    cdef public object id, error
