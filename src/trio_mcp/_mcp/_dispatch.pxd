# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

cdef class Dispatcher:
    cdef public object app, sessions, methods, _modern_for, _modern_methods
    cpdef modern_methods(self)
