# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py). A cpdef line makes a def method a C call from
# the modules that cimport this one (it stays callable from Python).
cimport cython
from trio_mcp._http._connection cimport Request

cdef class Admission:
    cdef public object _hosts, _origins, _loopback, _host_verdicts, _accept_verdicts
    cpdef check_origin(self, Request request)
    cpdef check_post_head(self, Request request)
    cpdef check_get_head(self, Request request)
