# The hot classes of this module as C types, in the compiled build only (Cython
# reads this file beside the .py). Each declares exactly the class's __slots__
# (tests/speedups/test_pxd.py); @cython.final stands for typing's @final.
cimport cython

cdef class Outbox:
    cdef public object _writer, _queue, _rest, _idle, _space, _busy, _last_direct
    cdef public object closed, limit_bytes, _queued, _kept
    cpdef offer(self, frame, now=*)

cdef class Listener:
    cdef public object id, honored, meta, uris
    cdef public Outbox outbox

cdef class PostStream:
    cdef public object _publisher, _writer, session, version, _cors, number
    cdef public object _subscriber, on_broken, cancel_scope, _state, _relay
    cdef public object _messages, _batch

cdef class SSEStream:
    cdef public object session, version, cancel_scope, _outbox

cdef class Waiter:
    cdef public object done, response
