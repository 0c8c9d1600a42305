"""Three adjustments to trio's scheduler, for a trio run the server owns, and a
cheaper schedule point.

First-in, first-out batches (`fifo_batches`):

trio runs its runnable tasks in batches and, for each batch, tosses a coin
between two orders: the order the tasks became runnable, or its reverse. It
does so on purpose, to keep programs from depending on an order, and leaves
strict FIFO open as a future choice. Under load the coin costs tail latency: a
connection that answered first in one batch may be read last in the next, so a
request waits anything from no batch to two instead of one. With 64 busy
connections that took p99 from 1.9 ms (every batch FIFO) to 2.7 ms.

`fifo_batches` makes the coin always pick the FIFO order while a server that
trio-mcp runs itself is up (`run`, `run_mcp`, ``trio-mcp run``). It replaces
the generator trio keeps in a private module attribute with one whose
``random()`` always says "reverse", the draw after which trio runs the batch
in arrival order (it takes tasks from the end of the list); every other draw
goes to trio's own generator. It is process-wide while it lasts, is undone when
the last user exits, and does nothing (returning False) if trio no longer has
that attribute. Correct trio code cannot tell: trio promises no order.
tests/trio/test_scheduling.py pins the behaviour on the installed trio.

Instrument checks at C speed (`lean_instruments`): each task step asks trio's
instrument registry three times whether a hook is installed (``"name" in
runner.instruments``). The registry is a ``collections.UserDict``, so each
ask is an interpreted ``__contains__`` call: 1.3% of the instructions of a
``tools/call``. `lean_instruments` puts the same registry, as a ``dict``
subclass that keeps trio's own ``add_instrument``, ``remove_instrument`` and
``call``, on the current run's runner; instruments work as before. It does
nothing (returning False) unless trio's registry is still that ``UserDict``.

Reused wake-up values (`pooled_wakeups`): whenever trio wakes a task with
nothing to send it (a schedule point, a wait for I/O that ends), it builds an
``outcome.Value(None)``, a frozen attrs class whose interpreted ``__init__``
made building and freeing one about 3,000 instructions. `pooled_wakeups`
puts `WakeupValues` (``_wakeups.pyx``, with its twin) where trio's run module
looks that class up: ``Value(None)`` then hands out a genuine ``Value`` that
nothing else refers to any more, its used-mark reset, from a ring of 256; any
other value is built as before. That took 4.5% off the instructions of a
2026-07-28 call. Like `fifo_batches` it is process-wide while it lasts, and it
does nothing (returning False) unless trio still uses outcome's ``Value``
and the interpreter is CPython with the GIL (it counts references).

A schedule point without the wrappers (`schedule_point`): trio's
``cancel_shielded_checkpoint`` is an ``async def`` that awaits a generator
yielding trio's ``CancelShieldedCheckpoint`` trap and then unwraps the
``Value(None)`` the scheduler sends back. `schedule_point` is one generator
yielding the same trap: the same schedule point (the scheduler reschedules
the task at once; it is no cancel point), one coroutine and one unwrap less.
Each answered request passes one, and it took 3.2% off the instructions of a
``tools/call`` (3.4% off a 2026-07-28 call). It is trio's own function when
trio no longer has the trap.
"""

from __future__ import annotations

import functools
import importlib
import random
import sys
import threading
import types
from collections import UserDict
from collections.abc import Awaitable, Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import trio
from outcome import Value

from .._speedups import WakeupValues

_lock = threading.Lock()


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


class _ArrivalOrderCoin:
    """trio's batch-order coin, fixed on "reverse" (which trio runs as FIFO);
    every other draw goes to the generator it stands in for."""

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


def _wakeup_values(original: object) -> WakeupValues | None:
    """The stand-in for the ``Value`` class trio's run module builds its
    wake-ups with; None unless that is outcome's ``Value`` (with its used-mark
    slot) and references are counted as CPython with the GIL counts them."""
    if original is not Value or sys.implementation.name != "cpython":
        return None
    gil_enabled: Callable[[], bool] = getattr(sys, "_is_gil_enabled", lambda: True)
    if not gil_enabled():
        return None
    unwrapped = next(
        (cls.__dict__["_unwrapped"] for cls in Value.__mro__ if "_unwrapped" in cls.__dict__),
        None,
    )
    try:
        return WakeupValues(Value, unwrapped)
    except TypeError:
        return None


_wakeups = _StandIn("Value", _wakeup_values)


def pooled_wakeups(enabled: bool = True) -> AbstractContextManager[bool]:
    """While inside, trio's wake-ups in this process reuse their
    ``Value(None)`` objects (`WakeupValues`). Yields whether that is in effect."""
    return _wakeups.applied(enabled)


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


def _schedule_point_for(traps: Any) -> Callable[[], Awaitable[None]]:
    """A schedule point yielding the trap of `traps` (trio's ``_traps`` module);
    trio's ``cancel_shielded_checkpoint`` when that module has no such trap."""
    trap = getattr(traps, "CancelShieldedCheckpoint", None)
    if trap is None:
        return trio.lowlevel.cancel_shielded_checkpoint

    @types.coroutine
    def schedule_point() -> Generator[Any, Any, None]:
        # trio answers this trap by rescheduling the task with Value(None):
        # there is nothing to unwrap
        yield trap

    return schedule_point


#: ``await schedule_point()``: ``trio.lowlevel.cancel_shielded_checkpoint``, cheaper.
schedule_point: Callable[[], Awaitable[None]] = _schedule_point_for(
    importlib.import_module("trio._core._traps")
)
