# The hot class of this module as a C type, in the compiled build only (Cython
# reads this file beside the .py). It declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython
from trio_mcp._protocol._sessions cimport SessionTable

@cython.final
cdef class MemorySessionStore:
    cdef public SessionTable table
    cpdef get_nowait(self, session_id)
    cpdef create_nowait(
        self, principal, protocol_version, client_capabilities, client_info, http_sse=*, owner=*
    )
