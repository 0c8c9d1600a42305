"""The trio tweaks: trio internals trio-mcp stands in for while it runs trio
itself, and the rules that keep doing so safe.

What each changes (the gains are measured in benchmarks/README.md):

- FIFO batches (`fifo_batches`): trio runs each scheduler batch in the order
  its tasks became runnable or in the reverse, by a coin toss, on purpose
  (to keep programs from depending on an order; strict FIFO is an option its
  design keeps open). The stand-in for the coin, trio's private generator
  ``trio._core._run._r``, always picks arrival order: under load a request
  then waits one batch, not anything from none to two, which lowers p99.
- Reused wake-up values (`pooled_wakeups`): trio wakes a task with nothing to
  send by building an ``outcome.Value(None)``, an attrs class with an
  interpreted ``__init__``. The stand-in for the name ``Value`` in trio's run
  module (`WakeupValues`) hands out a genuine ``Value(None)`` that nothing
  else refers to any more, its used-mark reset; every other value is built
  as before.
- Lean instrument checks (`lean_instruments`): trio asks its instrument
  registry, a ``UserDict``, whether a hook is installed three times per task
  step; the current run's registry becomes a ``dict`` subclass with trio's
  own methods, so the question is answered in C.
- Direct schedule points (`direct_schedule_point`): trio's
  ``cancel_shielded_checkpoint`` is two coroutines around one private trap;
  the connection's schedule point after an answer yields that trap itself.

The rules that make them safe by construction:

- Tested versions only. They are in effect only on a (trio, outcome) pair in
  `TESTED_VERSIONS`, each of which CI runs the whole suite on with them in
  effect (``.ci/run`` pins the pair). On any other pair every tweak is off
  and trio-mcp runs on trio's public behaviour alone; a debug log line says
  why.
- Checked before use. Each stand-in first checks that what it replaces is
  still what it was written against, and stays off otherwise: the generator
  is a ``random.Random``; ``Value`` is outcome's class, its size and the
  offset of its used-mark slot are what the compiled `WakeupValues` writes
  (`VALUE_LAYOUT`), and the interpreter counts references with a GIL; the
  registry is a ``UserDict`` with trio's three methods; the trap exists.
- Only while trio-mcp owns the run. `applied` is entered by trio-mcp's
  ``run`` (``run_mcp``, ``trio-mcp run``) around its ``trio.run``; the
  stand-ins are process-wide while it lasts and undone after. A server
  started with ``serve`` inside someone else's trio run gets none of them.
- One setting. ``ServerConfig.trio_tweaks`` (``--no-trio-tweaks``) turns them
  all off; when they are on, one INFO line says so and names them.

Correct trio code cannot tell the difference: trio promises no scheduling
order, a reused ``Value`` is one nobody holds, the registry keeps its contents
and methods, and the trap is the one trio's function yields.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import random
import struct
import sys
import threading
import types
from collections import UserDict
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Final

import trio
from outcome import Value

from .._speedups import WakeupValues
from . import _socketio

logger = logging.getLogger("trio_mcp.server")

#: The (trio, outcome) versions the tweaks are written against and CI runs the
#: whole suite on with them in effect; one constraints file under .ci/ each.
TESTED_VERSIONS: Final = frozenset({("0.35.0", "1.3.0.post0")})

_POINTER: Final = struct.calcsize("P")
#: outcome's ``Value`` as the compiled `WakeupValues` writes it: an object
#: header of two pointers, then Outcome's slots ``_unwrapped`` (the used-mark
#: it rewrites) and ``__weakref__``, then Value's ``value``.
VALUE_LAYOUT: Final = {"basicsize": 5 * _POINTER, "unwrapped_offset": 2 * _POINTER}

_lock = threading.Lock()


def installed_versions() -> tuple[str, str]:
    """The (trio, outcome) versions installed."""
    return importlib.metadata.version("trio"), importlib.metadata.version("outcome")


def refusal(versions: tuple[str, str]) -> str | None:
    """Why the tweaks stay off on these (trio, outcome) versions; None if they may run."""
    if versions in TESTED_VERSIONS:
        return None
    tested = ", ".join(f"trio {t} with outcome {o}" for t, o in sorted(TESTED_VERSIONS))
    return f"trio {versions[0]} with outcome {versions[1]} is not a tested pair ({tested})"


class _StandIn:
    """One attribute of trio's run module (``trio._core._run``), replaced
    process-wide while at least one user is inside `applied`."""

    def __init__(self, attribute: str, make: Callable[[Any], object | None]) -> None:
        self._attribute = attribute
        #: The stand-in for trio's object; None when that object is not what
        #: the stand-in was written against (then trio is left alone).
        self._make = make
        self._users = 0
        self._saved: object | None = None  # trio's own, while replaced

    @contextmanager
    def applied(self, enabled: bool) -> Iterator[bool]:
        """Yields whether the stand-in is in place."""
        if not enabled:
            yield False
            return
        module: Any = importlib.import_module("trio._core._run")
        with _lock:
            if self._users == 0:
                original = getattr(module, self._attribute, None)
                stand_in = None if original is None else self._make(original)
                if stand_in is not None:
                    self._saved = original
                    setattr(module, self._attribute, stand_in)
            active = self._saved is not None
            if active:
                self._users += 1
        if not active:
            yield False
            return
        try:
            yield True
        finally:
            with _lock:
                self._users -= 1
                if self._users == 0:
                    setattr(module, self._attribute, self._saved)
                    self._saved = None


# ---- FIFO batches ------------------------------------------------------------


class _ArrivalOrderCoin:
    """trio's batch-order coin, fixed on "reverse" (which trio runs as FIFO:
    it takes tasks from the end of the list); every other draw goes to the
    generator it stands in for."""

    __slots__ = ("_rng",)

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def random(self) -> float:
        return 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)


def _arrival_order_coin(original: object) -> _ArrivalOrderCoin | None:
    return _ArrivalOrderCoin(original) if isinstance(original, random.Random) else None


_coin = _StandIn("_r", _arrival_order_coin)


def fifo_batches(enabled: bool = True) -> AbstractContextManager[bool]:
    """While inside, every trio scheduler batch in this process runs in the
    order its tasks became runnable. Yields whether that is in effect."""
    return _coin.applied(enabled)


# ---- reused wake-up values -----------------------------------------------------


def _wakeup_values(original: object) -> WakeupValues | None:
    """The stand-in for the ``Value`` class trio's run module builds its
    wake-ups with; None unless that is outcome's ``Value`` with the layout the
    compiled stand-in writes, and references are counted as CPython with the
    GIL counts them."""
    if original is not Value or sys.implementation.name != "cpython":
        return None
    gil_enabled: Callable[[], bool] = getattr(sys, "_is_gil_enabled", lambda: True)
    if not gil_enabled():
        return None
    if Value.__basicsize__ != VALUE_LAYOUT["basicsize"]:
        return None
    unwrapped = next(
        (cls.__dict__["_unwrapped"] for cls in Value.__mro__ if "_unwrapped" in cls.__dict__),
        None,
    )
    try:
        stand_in = WakeupValues(Value, unwrapped)
    except TypeError:
        return None
    # (the twin writes through the descriptor and has no offset of its own)
    if stand_in.slot_offset not in (None, VALUE_LAYOUT["unwrapped_offset"]):
        return None
    return stand_in


_wakeups = _StandIn("Value", _wakeup_values)


def pooled_wakeups(enabled: bool = True) -> AbstractContextManager[bool]:
    """While inside, trio's wake-ups in this process reuse their
    ``Value(None)`` objects (`WakeupValues`). Yields whether that is in effect."""
    return _wakeups.applied(enabled)


# ---- lean instrument checks ----------------------------------------------------


@functools.cache
def _lean_registry_class() -> type | None:
    """trio's registry methods on a dict that is its own ``data``; None when
    trio's registry is not the ``UserDict`` this was written against."""
    module: Any = importlib.import_module("trio._core._instrumentation")
    instruments = getattr(module, "Instruments", None)
    if not (isinstance(instruments, type) and issubclass(instruments, UserDict)):
        return None
    methods = {}
    for name in ("add_instrument", "remove_instrument", "call"):
        method = instruments.__dict__.get(name)
        if method is None:
            return None
        methods[name] = method

    class LeanInstruments(dict[str, Any]):
        """trio's instrument registry, with ``in`` answered by ``dict``."""

        __slots__ = ()

        @property
        def data(self) -> dict[str, Any]:
            return self

    for name, method in methods.items():
        setattr(LeanInstruments, name, method)
    return LeanInstruments


def lean_instruments() -> bool:
    """Swap the current trio run's instrument registry for `LeanInstruments`
    (same contents, same methods); whether that was done."""
    trio.lowlevel.current_task()  # (inside a trio run, or RuntimeError)
    runner: Any = importlib.import_module("trio._core._run").GLOBAL_RUN_CONTEXT.runner
    registry = runner.instruments
    cls = _lean_registry_class()
    if cls is not None and type(registry) is cls:
        return True
    if cls is None or not isinstance(registry, UserDict):
        return False
    runner.instruments = cls(registry.data)
    return True


# ---- direct schedule points ------------------------------------------------------


def direct_schedule_point(traps: Any) -> Callable[[], Awaitable[None]] | None:
    """A schedule point yielding trio's ``CancelShieldedCheckpoint`` trap of
    `traps` (trio's ``_traps`` module) itself; None when it has no such trap."""
    trap = getattr(traps, "CancelShieldedCheckpoint", None)
    if not isinstance(trap, type):
        return None

    @types.coroutine
    def schedule_point() -> Generator[Any, Any, None]:
        # trio answers this trap by rescheduling the task with Value(None):
        # there is nothing to unwrap (it is a schedule point, never a cancel point)
        yield trap

    return schedule_point


@contextmanager
def _direct_schedule_points(enabled: bool) -> Iterator[bool]:
    """While inside, connections' schedule points yield trio's trap directly."""
    point = direct_schedule_point(importlib.import_module("trio._core._traps")) if enabled else None
    if point is None:
        yield False
        return
    previous = _socketio.use_schedule_point(point)
    try:
        yield True
    finally:
        _socketio.use_schedule_point(previous)


# ---- all of them, under one setting ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Tweaks:
    """Which tweaks are in effect (inside `applied`)."""

    fifo_batches: bool = False
    pooled_wakeups: bool = False
    direct_schedule_points: bool = False
    #: Whether `lean_instruments` may be applied to the run (it acts on a
    #: running trio: the caller applies it first thing inside its run).
    lean_instruments: bool = False

    @property
    def names(self) -> list[str]:
        return [name for name in Tweaks.__slots__ if getattr(self, name)]


@contextmanager
def applied(enabled: bool, versions: tuple[str, str] | None = None) -> Iterator[Tweaks]:
    """The tweaks, for a trio run trio-mcp owns: every one whose check passes
    when `enabled` and the installed (trio, outcome) pair (`versions`, for
    tests) is a tested one; none otherwise."""
    if not enabled:
        yield Tweaks()
        return
    reason = refusal(versions if versions is not None else installed_versions())
    if reason is not None:
        logger.debug("trio tweaks off: %s", reason)
        yield Tweaks()
        return
    with (
        fifo_batches() as fifo,
        pooled_wakeups() as wakeups,
        _direct_schedule_points(True) as direct,
    ):
        tweaks = Tweaks(fifo, wakeups, direct, _lean_registry_class() is not None)
        logger.info("trio tweaks on: %s", ", ".join(tweaks.names))
        yield tweaks
