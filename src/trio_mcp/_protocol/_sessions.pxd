# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final. A
# cpdef line makes a def method one the class calls on itself per request a C
# call (the method stays callable from Python, as in the .py).
cimport cython

@cython.final
cdef class SessionIds:
    cdef public object _pool, _next

@cython.final
cdef class Session:
    cdef public object id, principal, protocol_version, client_capabilities
    cdef public object client_info, log_level, subscriptions, last_active, http_sse, owner

@cython.final
cdef class SessionTable:
    cdef public object _sessions, max_sessions, max_per_owner, _owned, idle_timeout_s, grace_s
    cdef public object _new_id, _ended, _next_expiry, now
    @cython.locals(session=Session)
    cpdef get(self, session_id, now)
