# cython: freethreading_compatible=False
"""Reused wake-up values for trio's scheduler (compiled twin of ``trio_mcp._wakeups_py``).

The twin defines the behaviour; this module must match it exactly, results,
exception types and messages. See the twin for the rules. The differences are
in how, not what: the count of references is read from the object, and the
used-mark slot is written at the offset its member descriptor gives, instead
of calling the descriptor (this class stands in for one trio calls on every
wake-up, so each call matters). For that, it checks one thing more: the slot
must be an object pointer, as every ``__slots__`` slot is (a C type's ``bool``
member is refused with the same TypeError).
"""

from types import MemberDescriptorType

from cpython.list cimport PyList_GET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF

cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(PyObject *o)
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

__all__ = ["RING_SIZE", "WakeupValues"]

RING_SIZE = 256

cdef enum:
    # member types that are an object pointer at the offset (the same numbers
    # as Py_T_OBJECT and Py_T_OBJECT_EX from 3.12 on)
    _T_OBJECT = 6
    _T_OBJECT_EX = 16
    _READONLY = 1

cdef object _FALSE = bool(0)  # (the Python object, for the slot write below)


cdef class WakeupValues:
    """``value_type(value)``, with ``value_type(None)`` taken from a ring of
    unused ones when one is free (see the twin's docstring)."""

    cdef readonly object value_type
    #: The byte offset in the object where the used-mark is written.
    cdef readonly Py_ssize_t slot_offset
    cdef list _ring
    cdef Py_ssize_t _size
    cdef Py_ssize_t _at

    def __init__(self, value_type, unwrapped, size=RING_SIZE):
        cdef PyMemberDef *member
        if not isinstance(value_type, type):
            raise TypeError("value_type must be a class")
        if not (
            isinstance(unwrapped, MemberDescriptorType)
            and issubclass(value_type, unwrapped.__objclass__)
        ):
            raise TypeError("unwrapped must be a slot of value_type")
        if size < 1:
            raise ValueError("size must be at least 1")
        ring = [value_type(None) for _ in range(size)]
        member = (<PyMemberDescrObject *>unwrapped).d_member
        if (
            member.type not in (_T_OBJECT, _T_OBJECT_EX)
            or member.flags & _READONLY
            or type(unwrapped.__get__(ring[0], value_type)) is not bool
        ):
            raise TypeError("unwrapped must be a writable slot holding a bool")
        self.value_type = value_type
        self._ring = ring
        self._size = size
        self._at = 0
        self.slot_offset = member.offset

    def __call__(self, value):
        cdef Py_ssize_t at
        cdef PyObject *pooled
        cdef PyObject **slot
        cdef PyObject *old
        if value is not None:
            return self.value_type(value)
        at = self._at
        self._at = at + 1 if at + 1 < self._size else 0
        pooled = PyList_GET_ITEM(self._ring, at)  # (borrowed)
        if Py_REFCNT(pooled) == 1:  # held by the ring alone
            slot = <PyObject **>(<char *>pooled + self.slot_offset)
            old = slot[0]
            Py_INCREF(_FALSE)
            slot[0] = <PyObject *>_FALSE
            if old is not NULL:
                Py_DECREF(<object>old)
            return <object>pooled
        fresh = self.value_type(None)
        self._ring[at] = fresh
        return fresh

    def __instancecheck__(self, instance):
        return isinstance(instance, self.value_type)
