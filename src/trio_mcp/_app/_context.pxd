# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

@cython.final
cdef class Context:
    cdef public object request_id, session_id, principal, headers, protocol_version
    cdef public object client_capabilities, _progress_token, _stream, _log_level
    cdef public object _cancel_scope, _asker, _input_responses, _asked
    cdef public object _mrtr, state, lifespan
