"""`WakeupValues` (both twins): genuine values, reused only once nothing else holds them."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import outcome
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

UNWRAPPED = outcome.Outcome.__dict__["_unwrapped"]
FIXTURE_SETTINGS = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)


class Marked:
    """A value type of our own: one slot for the value, one for the used-mark."""

    __slots__ = ("value", "used")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.used = False


class MarkedWithNumber:
    __slots__ = ("value", "used")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.used = 0  # not a bool


def values(impl: Any, size: int = 4) -> Any:
    return impl.wakeups.WakeupValues(outcome.Value, UNWRAPPED, size)


def test_a_wakeup_value_is_a_genuine_unused_value(impl: Any) -> None:
    value = values(impl)(None)
    assert type(value) is outcome.Value
    assert value.unwrap() is None
    with pytest.raises(outcome.AlreadyUsedError):
        value.unwrap()


def test_a_value_nothing_holds_is_handed_out_again_unused(impl: Any) -> None:
    factory = values(impl, size=1)
    first = factory(None)
    first.unwrap()
    ring_kept = weakref.ref(first)
    del first
    again = factory(None)
    assert again is ring_kept()  # the same object: the ring kept it alive
    assert again.unwrap() is None  # its used-mark was reset


def test_a_value_still_held_is_never_handed_out_again(impl: Any) -> None:
    factory = values(impl, size=4)
    held = [factory(None) for _ in range(12)]
    assert len({id(value) for value in held}) == 12
    assert all(value.unwrap() is None for value in held)


def test_the_ring_lets_go_of_a_value_someone_else_holds(impl: Any) -> None:
    factory = values(impl, size=1)
    held = factory(None)
    fresh = factory(None)  # takes the ring's place of `held`
    assert fresh is not held
    del fresh
    assert factory(None) is not held  # the ring now holds the fresh one
    held.unwrap()


@pytest.mark.parametrize("value", [0, False, "", 5, [], outcome.Value(None)])
def test_any_other_value_is_built_new(impl: Any, value: Any) -> None:
    factory = values(impl, size=1)
    built = [factory(value) for _ in range(3)]
    assert all(type(b) is outcome.Value and b.value is value for b in built)
    assert len({id(b) for b in built}) == 3


def test_instance_checks_ask_the_value_type(impl: Any) -> None:
    factory = values(impl)
    assert isinstance(outcome.Value(1), factory)
    assert isinstance(factory(None), factory)
    assert not isinstance(outcome.Error(ValueError()), factory)
    assert not isinstance(None, factory)
    assert factory.value_type is outcome.Value


def test_any_class_with_a_bool_slot_will_do(impl: Any) -> None:
    used = Marked.__dict__["used"]
    factory = impl.wakeups.WakeupValues(Marked, used, 1)
    value = factory(None)
    assert type(value) is Marked and value.value is None and value.used is False
    value.used = True
    del value
    value = factory(None)
    assert value.used is False


@pytest.mark.parametrize(
    ("value_type", "unwrapped", "size", "error", "message"),
    [
        (lambda value: value, UNWRAPPED, 4, TypeError, "value_type must be a class"),
        (outcome.Value, "_unwrapped", 4, TypeError, "unwrapped must be a slot of value_type"),
        (
            outcome.Value,
            Marked.__dict__["used"],
            4,
            TypeError,
            "unwrapped must be a slot of value_type",
        ),
        (outcome.Value, UNWRAPPED, 0, ValueError, "size must be at least 1"),
        # a read-only member, and a slot that holds something else than a bool
        (
            slice,
            slice.__dict__["start"],
            4,
            TypeError,
            "unwrapped must be a writable slot holding a bool",
        ),
        (
            MarkedWithNumber,
            MarkedWithNumber.__dict__["used"],
            4,
            TypeError,
            "unwrapped must be a writable slot holding a bool",
        ),
    ],
)
def test_what_it_refuses(
    impl: Any, value_type: Any, unwrapped: Any, size: int, error: type, message: str
) -> None:
    with pytest.raises(error, match=f"^{message}$"):
        impl.wakeups.WakeupValues(value_type, unwrapped, size)


# Each step: take a value and keep it (True) or drop it (False), or let go of
# one of the kept values (an int).
_steps = st.lists(st.one_of(st.booleans(), st.integers(min_value=0, max_value=20)), max_size=60)


def takes(steps: list[bool | int], kept: list[Any]) -> Iterator[bool]:
    """Each take's step (keep its value or not); lets go of a kept value at
    each int step in between."""
    for step in steps:
        if type(step) is int:
            if kept:
                kept.pop(step % len(kept))
        else:
            yield bool(step)


def reuse_pattern(impl: Any, size: int, steps: list[bool | int]) -> list[int]:
    """For each value taken, the number of the first take that returned the
    same object (weak references: they do not count as holding it)."""
    factory = values(impl, size)
    taken: list[weakref.ref[Any]] = []
    pattern: list[int] = []
    kept: list[Any] = []
    for keep in takes(steps, kept):
        value = factory(None)
        assert value.unwrap() is None
        number = next((n for n, ref in enumerate(taken) if ref() is value), len(taken))
        if number == len(taken):
            taken.append(weakref.ref(value))
        pattern.append(number)
        if keep:
            kept.append(value)
        del value
    return pattern


def model_pattern(size: int, steps: list[bool | int]) -> list[int]:
    """`reuse_pattern` by the rule: the ring starts with `size` new values and
    takes its places in turn; a take returns the value at its place unless
    someone keeps it, in which case a new value takes the place."""
    ring = list(range(size))  # values, by number
    made = size
    at = 0
    first_take: dict[int, int] = {}
    pattern: list[int] = []
    kept: list[int] = []
    for keep in takes(steps, kept):
        if ring[at] in kept:
            ring[at] = made
            made += 1
        value = ring[at]
        at = (at + 1) % size
        pattern.append(first_take.setdefault(value, len(first_take)))
        if keep:
            kept.append(value)
    return pattern


@FIXTURE_SETTINGS
@given(size=st.integers(min_value=1, max_value=5), steps=_steps)
def test_reuse_follows_the_rule(impl: Any, size: int, steps: list[bool | int]) -> None:
    assert reuse_pattern(impl, size, steps) == model_pattern(size, steps)


@FIXTURE_SETTINGS
@given(size=st.integers(min_value=1, max_value=5), steps=_steps)
def test_compiled_reuses_exactly_as_the_twin(
    py_impl: Any, compiled_impl: Any, size: int, steps: list[bool | int]
) -> None:
    assert reuse_pattern(compiled_impl, size, steps) == reuse_pattern(py_impl, size, steps)
