"""Reused wake-up values for trio's scheduler (pure-Python twin of ``_wakeups.pyx``).

This module defines the behaviour the compiled module must match.

Each time trio wakes a task with nothing to send it (a schedule point, the
end of a wait for I/O), it builds a fresh ``outcome.Value(None)``, a frozen
attrs class whose ``__init__`` is interpreted. `WakeupValues` stands in for
the class where trio builds these (see ``_trio/_tweaks.py``,
`pooled_wakeups`): ``WakeupValues(Value, unwrapped)(None)``
returns a genuine ``Value(None)``, not yet unwrapped, taken from a ring of
them when nothing but the ring refers to it any more. Nobody can tell a reused
one from a new one: whoever held it before has let go of it. Any other
argument builds a new ``Value`` as before, and ``isinstance(x, factory)`` is
``isinstance(x, Value)``, as trio's code that stands next to the call expects.

`unwrapped` is the member descriptor of the slot that marks a value as used
(``outcome.Outcome._unwrapped``): a reused value gets that slot set back to
False, the state of a new one. The count of references is CPython's, so this is
for CPython with the GIL only (`pooled_wakeups` checks).

The one attribute the builds do not share: `slot_offset`, where in the object
the compiled module writes the used-mark (`pooled_wakeups` compares it with
the layout it was written against); the twin writes through the descriptor,
so its `slot_offset` is None.
"""

from __future__ import annotations

from sys import getrefcount
from types import MemberDescriptorType
from typing import Any

__all__ = ["RING_SIZE", "WakeupValues"]

#: Values kept for reuse. A value is in use from trio's wake-up until its task
#: has run; with more tasks than this woken at once, the rest are built new.
RING_SIZE = 256


class WakeupValues:
    """``value_type(value)``, with ``value_type(None)`` taken from a ring of
    unused ones when one is free (see the module docstring)."""

    __slots__ = ("value_type", "_unwrapped", "_ring", "_at")

    #: Where the used-mark is written in the object; None: through its descriptor.
    slot_offset: Any = None

    def __init__(self, value_type: Any, unwrapped: Any, size: int = RING_SIZE) -> None:
        if not isinstance(value_type, type):
            raise TypeError("value_type must be a class")
        if not (
            isinstance(unwrapped, MemberDescriptorType)
            and issubclass(value_type, unwrapped.__objclass__)
        ):
            raise TypeError("unwrapped must be a slot of value_type")
        if size < 1:
            raise ValueError("size must be at least 1")
        build: Any = value_type  # (a class, of any signature)
        ring = [build(None) for _ in range(size)]
        try:
            mark = unwrapped.__get__(ring[0], value_type)
            unwrapped.__set__(ring[0], mark)  # (read-only members refuse)
        except AttributeError:
            mark = None
        if type(mark) is not bool:
            raise TypeError("unwrapped must be a writable slot holding a bool")
        self.value_type: Any = build
        self._unwrapped = unwrapped
        self._ring = ring
        self._at = 0

    def __call__(self, value: Any) -> Any:
        if value is not None:
            return self.value_type(value)
        ring = self._ring
        at = self._at
        self._at = at + 1 if at + 1 < len(ring) else 0
        pooled = ring[at]
        # held by the ring, by `pooled` and by getrefcount's argument: nobody else
        if getrefcount(pooled) == 3:
            self._unwrapped.__set__(pooled, False)
            return pooled
        fresh = self.value_type(None)
        ring[at] = fresh
        return fresh

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self.value_type)
