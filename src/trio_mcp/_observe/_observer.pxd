# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one that another compiled module calls per
# request a C call (it stays callable from Python).
cimport cython
from trio_mcp._observe._metrics cimport Metrics
from trio_mcp._observe._access_log cimport AccessLog, Operation
from trio_mcp._observe._metrics cimport Histogram

@cython.final
cdef class Observer:
    cdef public Metrics metrics
    cdef public AccessLog log
    cdef public object server, gauges, peer_broadcast, _operations, _answered, _session_starts, _max_sessions
    @cython.locals(operation=Operation, histogram=Histogram, now=cython.double, seconds=cython.double)
    cpdef answered(
        self, client, method, params, answer, status, version, principal, session_id,
        double started
    )
    cpdef http_answered(self, method, status, started)
    cpdef refused(self, status)
