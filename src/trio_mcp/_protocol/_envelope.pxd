# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

cdef class Envelope:
    cdef public object version, client_capabilities, client_info, log_level

# header values are bytes (or None): decoding them is then a C call
@cython.locals(header=bytes, method_header=bytes)
cpdef check_envelope(method, params, singles)
