"""FIFO scheduler batches while trio-mcp owns the trio run (`fifo_batches`)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from trio_mcp import ServerConfig
from trio_mcp._trio import _server
from trio_mcp._trio._scheduling import fifo_batches

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
