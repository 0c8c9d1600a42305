"""trio's scheduler while trio-mcp owns the trio run: FIFO batches (`fifo_batches`),
instrument checks at C speed (`lean_instruments`) and reused wake-up values
(`pooled_wakeups`); and `schedule_point`."""

from __future__ import annotations

import importlib
import sys
import types
import weakref
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from typing import Any

import outcome
import pytest
import trio

from trio_mcp import ServerConfig
from trio_mcp._speedups import WakeupValues
from trio_mcp._trio import _scheduling, _server
from trio_mcp._trio._scheduling import (
    fifo_batches,
    lean_instruments,
    pooled_wakeups,
    schedule_point,
)

_TASKS = 6
_ROUNDS = 20

trio_run_module = importlib.import_module("trio._core._run")


@pytest.fixture
def production_scheduling(monkeypatch: pytest.MonkeyPatch) -> None:
    """trio as it schedules outside tests: with Hypothesis installed,
    pytest-trio switches trio to shuffled batches for the whole session."""
    monkeypatch.setattr(trio_run_module, "_ALLOW_DETERMINISTIC_SCHEDULING", False)


def batch_orders() -> list[list[int]]:
    """Run `_TASKS` tasks that each yield `_ROUNDS` times; the order they ran
    in, batch by batch (every task runs once per batch)."""
    ran: list[int] = []

    async def worker(number: int) -> None:
        for _ in range(_ROUNDS):
            ran.append(number)
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for number in range(_TASKS):
                nursery.start_soon(worker, number)

    trio.run(main)
    return [ran[start : start + _TASKS] for start in range(0, len(ran), _TASKS)]


@pytest.mark.usefixtures("production_scheduling")
def test_every_batch_runs_in_the_order_its_tasks_became_runnable() -> None:
    with fifo_batches() as active:
        orders = batch_orders()
    assert active
    assert len(orders) == _ROUNDS
    assert all(sorted(order) == list(range(_TASKS)) for order in orders)
    assert all(order == orders[0] for order in orders)


@pytest.mark.usefixtures("production_scheduling")
def test_without_it_trio_reverses_some_batches() -> None:
    # what the test above would see without fifo_batches (by chance 1 in 2**19)
    orders = batch_orders()
    assert any(order != orders[0] for order in orders)
    assert all(sorted(order) == list(range(_TASKS)) for order in orders)


def test_trio_gets_its_own_generator_back_after_the_last_user() -> None:
    original = trio_run_module._r
    with fifo_batches():
        with fifo_batches() as inner:
            assert inner
        assert trio_run_module._r is not original  # the outer user still holds it
        assert trio_run_module._r.random() == 0.0
        # other draws still come from trio's generator
        assert 10_000 <= trio_run_module._r.uniform(10_000, 200_000) <= 200_000
    assert trio_run_module._r is original


def test_disabled_leaves_trio_alone() -> None:
    original = trio_run_module._r
    with fifo_batches(enabled=False) as active:
        assert not active
        assert trio_run_module._r is original


def test_does_nothing_when_trio_keeps_no_generator_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stand_in = object()
    monkeypatch.setattr(trio_run_module, "_r", stand_in)
    with fifo_batches() as active:
        assert not active
        assert trio_run_module._r is stand_in


class _Seen(Exception):
    pass


@pytest.mark.parametrize("fifo", [True, False])
def test_run_applies_the_setting_for_its_trio_run(fifo: bool) -> None:
    original = trio_run_module._r
    seen: list[bool] = []

    @asynccontextmanager
    async def around() -> AsyncIterator[None]:
        seen.append(trio_run_module._r is not original)
        raise _Seen
        yield  # pragma: no cover

    async def handler(*args: object) -> None:  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(_Seen):
        _server.run(handler, ServerConfig(port=0, fifo_scheduling=fifo), around=around())
    assert seen == [fifo]
    assert trio_run_module._r is original


class _StepCounter(trio.abc.Instrument):
    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


def test_lean_instruments_keeps_the_registry_and_answers_in_c() -> None:
    early = _StepCounter()

    async def main() -> tuple[bool, int, int]:
        assert lean_instruments()
        assert lean_instruments()  # twice is harmless
        registry = trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments
        # `in` is dict's own: no interpreted __contains__ per task step
        assert type(registry).__contains__ is dict.__contains__
        assert "before_task_step" in registry  # the instrument given to trio.run
        await trio.lowlevel.checkpoint()
        steps_then = early.steps
        late = _StepCounter()
        trio.lowlevel.add_instrument(late)  # trio's API still works on it
        for _ in range(5):
            await trio.lowlevel.checkpoint()
        trio.lowlevel.remove_instrument(late)
        trio.lowlevel.remove_instrument(early)
        assert "before_task_step" not in registry
        for _ in range(5):
            await trio.lowlevel.checkpoint()
        return True, early.steps - steps_then, late.steps

    swapped, early_steps, late_steps = trio.run(main, instruments=[early])
    assert swapped
    assert early_steps >= 5
    assert late_steps == 5


def test_lean_instruments_leaves_an_unknown_registry_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_scheduling, "_lean_registry_class", lambda: None)

    async def main() -> bool:
        registry = trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments
        done = lean_instruments()
        assert trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments is registry
        return done

    assert not trio.run(main)


def test_run_serves_with_lean_instruments() -> None:
    seen: list[bool] = []

    @asynccontextmanager
    async def around() -> AsyncIterator[None]:
        registry = trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments
        seen.append(type(registry).__contains__ is dict.__contains__)
        raise _Seen
        yield  # pragma: no cover

    async def handler(*args: object) -> None:  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(_Seen):
        _server.run(handler, ServerConfig(port=0), around=around())
    assert seen == [True]


# ---- schedule_point ---------------------------------------------------------------


def test_schedule_point_yields_trios_trap_on_the_installed_trio() -> None:
    assert schedule_point is not trio.lowlevel.cancel_shielded_checkpoint


def test_schedule_point_is_trios_function_without_the_trap() -> None:
    without = _scheduling._schedule_point_for(types.SimpleNamespace())
    assert without is trio.lowlevel.cancel_shielded_checkpoint


async def test_schedule_point_lets_the_other_runnable_tasks_run() -> None:
    steps: list[str] = []

    async def step(name: str) -> None:
        for number in range(3):
            steps.append(f"{name}{number}")
            assert await schedule_point() is None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(step, "a")
        nursery.start_soon(step, "b")
    # each task ran one step per batch: the two alternate
    assert sorted(steps[0:2]) == ["a0", "b0"]
    assert sorted(steps[2:4]) == ["a1", "b1"]
    assert sorted(steps[4:6]) == ["a2", "b2"]


async def test_schedule_point_is_not_a_cancel_point() -> None:
    reached: list[str] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await schedule_point()  # the cancellation is not delivered here...
        reached.append("after the schedule point")
        await trio.lowlevel.checkpoint()  # ...but at the next cancel point
        reached.append("after the checkpoint")
    assert reached == ["after the schedule point"]
    assert scope.cancelled_caught


# ---- pooled_wakeups -----------------------------------------------------------------


@types.coroutine
def woken_with() -> Generator[Any, Any, Any]:
    """A schedule point that returns what trio wakes the task with."""
    return (yield trio_run_module.CancelShieldedCheckpoint)


def test_pooled_wakeups_stands_in_for_trios_value_class_while_used() -> None:
    assert trio_run_module.Value is outcome.Value
    with pooled_wakeups() as active:
        assert active
        stand_in = trio_run_module.Value
        assert isinstance(stand_in, WakeupValues)
        with pooled_wakeups() as inner:
            assert inner
            assert trio_run_module.Value is stand_in
        assert trio_run_module.Value is stand_in  # the outer user still holds it
    assert trio_run_module.Value is outcome.Value


def test_pooled_wakeups_disabled_leaves_trio_alone() -> None:
    with pooled_wakeups(enabled=False) as active:
        assert not active
        assert trio_run_module.Value is outcome.Value


@pytest.mark.parametrize("stand_in", [object(), int])
def test_pooled_wakeups_leaves_another_value_class_alone(
    monkeypatch: pytest.MonkeyPatch, stand_in: object
) -> None:
    monkeypatch.setattr(trio_run_module, "Value", stand_in)
    with pooled_wakeups() as active:
        assert not active
        assert trio_run_module.Value is stand_in


def test_pooled_wakeups_does_nothing_without_a_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    with pooled_wakeups() as active:
        assert not active
        assert trio_run_module.Value is outcome.Value


def test_a_trio_run_reuses_its_wakeup_values() -> None:
    async def main() -> list[Any]:
        refs = []
        for _ in range(600):  # more than the ring holds: each place comes round
            value = await woken_with()
            assert type(value) is outcome.Value
            assert value.unwrap() is None  # unwrapped here, and unused when it comes again
            refs.append(weakref.ref(value))
            del value
        return [ref() for ref in refs]

    with pooled_wakeups():
        woken = trio.run(main)
    alive = [value for value in woken if value is not None]
    assert alive, "the ring keeps the values it hands out"
    assert len({id(value) for value in alive}) < len(alive), "some value came round again"
    # without it, every wake-up is a new value that dies once used (but the
    # last, which trio's run loop may still hold when the run ends)
    assert len([value for value in trio.run(main) if value is not None]) <= 1


def test_trio_works_as_before_with_pooled_wakeups() -> None:
    class Boom(Exception):
        pass

    async def sleeper(done: list[str], name: str) -> None:
        for _ in range(50):
            await trio.lowlevel.checkpoint()
            await trio.sleep(0.0001)
        done.append(name)

    async def main() -> str:
        done: list[str] = []
        async with trio.open_nursery() as nursery:
            for name in "abcdefgh":
                nursery.start_soon(sleeper, done, name)
        assert sorted(done) == list("abcdefgh")
        event = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(event.wait)
            await trio.sleep(0.01)
            event.set()
        with trio.move_on_after(0.01) as scope:
            await trio.sleep_forever()
        assert scope.cancelled_caught
        with pytest.RaisesGroup(Boom):
            await fails_in_a_nursery(done)
        return "result"

    async def fails_in_a_nursery(done: list[str]) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper, done, "x")
            await trio.lowlevel.checkpoint()
            raise Boom

    async def failing() -> None:
        await trio.lowlevel.checkpoint()
        raise Boom

    with pooled_wakeups() as active:
        assert active
        assert trio.run(main) == "result"  # (trio checks the main task's outcome's class)
        with pytest.raises(Boom):
            trio.run(failing)


@pytest.mark.parametrize("pooled", [True, False])
def test_run_applies_the_pooled_wakeups_setting(pooled: bool) -> None:
    seen: list[bool] = []

    @asynccontextmanager
    async def around() -> AsyncIterator[None]:
        seen.append(trio_run_module.Value is not outcome.Value)
        raise _Seen
        yield  # pragma: no cover

    async def handler(*args: object) -> None:  # pragma: no cover - never called
        raise AssertionError

    assert ServerConfig().pooled_wakeups is True
    with pytest.raises(_Seen):
        _server.run(handler, ServerConfig(port=0, pooled_wakeups=pooled), around=around())
    assert seen == [pooled]
    assert trio_run_module.Value is outcome.Value
