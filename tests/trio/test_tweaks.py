"""The trio tweaks (``_trio/_tweaks.py``): each stand-in on the installed trio
(FIFO batches, lean instrument checks, reused wake-up values, direct schedule
points); the rules that keep them safe (tested versions only, a changed
layout refused, one setting); and the server running correctly without them."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import random
import signal
import socket
import sys
import types
import weakref
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import outcome
import pytest
import trio

from trio_mcp import Request, Response, ServerConfig, _speedups
from trio_mcp._speedups import WakeupValues
from trio_mcp._trio import _run, _socketio, _tweaks
from trio_mcp._trio._tweaks import (
    direct_schedule_point,
    fifo_batches,
    lean_instruments,
    pooled_wakeups,
)

_TASKS = 6
_ROUNDS = 20

trio_run_module = importlib.import_module("trio._core._run")
trio_traps = importlib.import_module("trio._core._traps")
_direct = direct_schedule_point(trio_traps)
assert _direct is not None


async def schedule_point() -> None:
    """The direct schedule point on the installed trio."""
    assert _direct is not None
    await _direct()


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


@pytest.mark.parametrize("enabled", [True, False])
def test_run_applies_the_setting_for_its_trio_run(enabled: bool) -> None:
    original = trio_run_module._r
    seen: list[tuple[bool, bool, bool, bool]] = []

    @asynccontextmanager
    async def around() -> AsyncIterator[None]:
        registry = trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments
        seen.append(
            (
                trio_run_module._r is not original,
                trio_run_module.Value is not outcome.Value,
                type(registry).__contains__ is dict.__contains__,
                _socketio._schedule_point is not trio.lowlevel.cancel_shielded_checkpoint,
            )
        )
        raise _Seen
        yield  # pragma: no cover

    async def handler(*args: object) -> None:  # pragma: no cover - never called
        raise AssertionError

    assert ServerConfig().trio_tweaks is True
    with pytest.raises(_Seen):
        _run.run(handler, ServerConfig(port=0, trio_tweaks=enabled), around=around())
    assert seen == [(enabled, enabled, enabled, enabled)]
    assert trio_run_module._r is original
    assert trio_run_module.Value is outcome.Value
    assert _socketio._schedule_point is trio.lowlevel.cancel_shielded_checkpoint


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
    monkeypatch.setattr(_tweaks, "_lean_registry_class", lambda: None)

    async def main() -> bool:
        registry = trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments
        done = lean_instruments()
        assert trio_run_module.GLOBAL_RUN_CONTEXT.runner.instruments is registry
        return done

    assert not trio.run(main)


# ---- schedule_point ---------------------------------------------------------------


def test_no_direct_schedule_point_without_the_trap() -> None:
    assert direct_schedule_point(types.SimpleNamespace()) is None
    assert direct_schedule_point(types.SimpleNamespace(CancelShieldedCheckpoint=object())) is None


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


# ---- the rules: tested versions only, a changed layout refused ---------------------


def _untouched() -> bool:
    return (
        isinstance(trio_run_module._r, random.Random)
        and trio_run_module.Value is outcome.Value
        and _socketio._schedule_point is trio.lowlevel.cancel_shielded_checkpoint
    )


def test_the_installed_pair_is_a_tested_one() -> None:
    # CI installs each tested pair (.ci/run); elsewhere this says what to pin
    assert _tweaks.installed_versions() in _tweaks.TESTED_VERSIONS, _tweaks.refusal(
        _tweaks.installed_versions()
    )


def test_every_tested_pair_has_its_ci_constraints() -> None:
    ci = Path(__file__).resolve().parents[2] / ".ci"
    for trio_version, outcome_version in _tweaks.TESTED_VERSIONS:
        pins = (ci / f"trio-{trio_version}-outcome-{outcome_version}.txt").read_text()
        assert f"trio=={trio_version}\n" in pins
        assert f"outcome=={outcome_version}\n" in pins


def test_all_tweaks_are_on_for_a_tested_pair(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "trio_mcp.server")
    with _tweaks.applied(True, next(iter(_tweaks.TESTED_VERSIONS))) as tweaks:
        assert tweaks.names == [
            "fifo_batches",
            "pooled_wakeups",
            "direct_schedule_points",
            "lean_instruments",
        ]
        assert not _untouched()
    assert _untouched()
    assert "trio tweaks on: fifo_batches, pooled_wakeups" in caplog.text


@pytest.mark.parametrize(
    "versions",
    [("0.36.0", "1.3.0.post0"), ("0.35.0", "1.4.0"), ("0.34.0", "1.3.0"), ("0.35.0rc1", "")],
)
def test_no_tweak_on_an_untested_pair(
    versions: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "trio_mcp.server")
    with _tweaks.applied(True, versions) as tweaks:
        assert tweaks == _tweaks.Tweaks()
        assert tweaks.names == []
        assert _untouched()
    assert "is not a tested pair" in caplog.text
    assert "trio tweaks on" not in caplog.text


def test_the_setting_turns_them_all_off() -> None:
    with _tweaks.applied(False, next(iter(_tweaks.TESTED_VERSIONS))) as tweaks:
        assert tweaks.names == []
        assert _untouched()


@pytest.mark.parametrize(
    "layout",
    [
        {"basicsize": _tweaks.VALUE_LAYOUT["basicsize"] + 8},
        {"unwrapped_offset": _tweaks.VALUE_LAYOUT["unwrapped_offset"] + 8},
    ],
    ids=["Value's size", "the used-mark's offset"],
)
def test_reused_wakeups_refuse_a_changed_layout(
    monkeypatch: pytest.MonkeyPatch, layout: dict[str, int]
) -> None:
    monkeypatch.setattr(_tweaks, "VALUE_LAYOUT", {**_tweaks.VALUE_LAYOUT, **layout})
    if "unwrapped_offset" in layout and not _speedups.USING_EXTENSIONS:
        # the twin writes through the descriptor: it has no offset to compare
        with pooled_wakeups() as active:
            assert active
        return
    with pooled_wakeups() as active:
        assert not active
        assert trio_run_module.Value is outcome.Value
    with _tweaks.applied(True, next(iter(_tweaks.TESTED_VERSIONS))) as tweaks:
        assert not tweaks.pooled_wakeups
        assert tweaks.fifo_batches  # the others are checked on their own
        assert trio_run_module.Value is outcome.Value


def test_the_compiled_stand_in_writes_where_the_layout_says() -> None:
    unwrapped = outcome.Outcome.__dict__["_unwrapped"]
    stand_in = WakeupValues(outcome.Value, unwrapped)
    assert outcome.Value.__basicsize__ == _tweaks.VALUE_LAYOUT["basicsize"]
    if _speedups.USING_EXTENSIONS:
        assert stand_in.slot_offset == _tweaks.VALUE_LAYOUT["unwrapped_offset"]
    else:
        assert stand_in.slot_offset is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve_and_ask(config: ServerConfig, during: list[bool]) -> bytes:
    """Run a real server with `config` (trio-mcp's own `run`), ask it one
    request over a socket, then stop it with SIGTERM; the answer's bytes.
    `during` gets whether trio was untouched while it served."""
    port = _free_port()
    replies: list[bytes] = []

    async def handler(request: Request) -> Response:
        await trio.lowlevel.checkpoint()
        return Response(200, [], b"served " + request.body)

    async def client() -> None:
        with trio.fail_after(10):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    break
                except OSError:
                    await trio.sleep(0.01)
            async with stream:
                await stream.send_all(
                    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
                )
                data = b""
                while chunk := await stream.receive_some(4096):
                    data += chunk
        replies.append(data)
        during.append(_untouched())
        os.kill(os.getpid(), signal.SIGTERM)

    @asynccontextmanager
    async def around() -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client)
            yield

    _run.run(handler, dataclasses.replace(config, port=port), around=around())
    return replies[0]


@pytest.mark.parametrize(
    ("why", "versions", "layout"),
    [
        ("an untested trio", ("0.99.0", "1.3.0.post0"), None),
        ("an untested outcome", ("0.35.0", "9.9"), None),
        ("a changed Value layout", None, {"basicsize": 1}),
    ],
)
def test_the_server_runs_correctly_without_them(
    monkeypatch: pytest.MonkeyPatch,
    why: str,
    versions: tuple[str, str] | None,
    layout: dict[str, int] | None,
) -> None:
    if versions is not None:
        monkeypatch.setattr(_tweaks, "installed_versions", lambda: versions)
    if layout is not None:
        monkeypatch.setattr(_tweaks, "VALUE_LAYOUT", {**_tweaks.VALUE_LAYOUT, **layout})
    during: list[bool] = []
    reply = _serve_and_ask(ServerConfig(), during)
    assert reply.startswith(b"HTTP/1.1 200 ")
    assert reply.endswith(b"\r\n\r\nserved hi")
    if layout is None:
        assert during == [True]  # nothing of trio's was stood in for
    else:
        assert trio_run_module.Value is outcome.Value
    assert _untouched()
