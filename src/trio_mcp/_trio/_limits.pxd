# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class TimeLimits:
    cdef public object connections, quota, watchers, head_limit_s, heads_waiting
    cdef public object _slow_heads, _head_timeout_s, tick_s, lane
