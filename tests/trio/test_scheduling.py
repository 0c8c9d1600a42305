"""trio's scheduler while trio-mcp owns the trio run: FIFO batches (`fifo_batches`) and
instrument checks at C speed (`lean_instruments`); and `schedule_point`."""

from __future__ import annotations

import importlib
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from trio_mcp import ServerConfig
from trio_mcp._trio import _scheduling, _server
from trio_mcp._trio._scheduling import fifo_batches, lean_instruments, schedule_point

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
