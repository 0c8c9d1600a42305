"""Guarded tasks: a task started on a client's behalf ends alone when it fails,
and `spawn` is the only way such a task is started."""

from __future__ import annotations

import ast
import inspect
import logging
from pathlib import Path

import pytest
import trio

from trio_mcp._trio._tasks import guarded, spawn

SOURCE = Path(__file__).resolve().parents[1] / "src" / "trio_mcp"

#: The tasks started directly, each a loop the server or the endpoint owns for
#: its whole run (not a client's), whose every step is guarded or cannot fail
#: on a client's input: (module, what it starts).
DIRECT_STARTS = {
    ("_trio/_limits.py", "sweep"),  # the clock: time limits only
    ("_trio/_limits.py", "limits.lane.run"),  # the clock: the slow lane's wakes
    ("_trio/_limits.py", "keep_turns"),  # the clock: the turn keeper
    ("_trio/_server.py", "_accept_loop"),  # accept(); a connection is spawned or arrives, guarded
    ("_mcp/_endpoint.py", "broadcaster.run"),  # each broadcast is guarded
    ("_mcp/_endpoint.py", "self.sweeper.run"),  # each sweep is guarded
    ("_mcp/_endpoint.py", "keepalives"),  # each keepalive is guarded
    # the group's broadcasts: accept() on the group's private socket; each
    # connection and each peer's writing is spawned
    ("_mcp/_endpoint.py", "self.peer_broadcast.run"),
    ("_trio/_run.py", "serving"),  # run(): the server itself, in trio.run's nursery
    ("_trio/_server.py", "_stop_at"),  # the shutdown deadline, once; no client input
    ("_trio/_run.py", "collect_fully"),  # run(): paced garbage collections, no client input
    ("_trio/_run.py", "young.collect"),  # run(): young collections in turns, no client input
    ("_trio/_tasks.py", "_guard"),  # spawn itself
    # --workers: the supervisor's own tasks (no client input; a worker's
    # messages that do not parse end its reader only) ...
    ("_workers.py", "self._signals"),
    ("_workers.py", "self._life"),
    ("_workers.py", "self._read"),
    ("_workers.py", "self._watch"),
    ("_workers.py", "self._replace"),
    ("_workers.py", "self._roll"),
    ("_workers.py", "self._kill_late"),
    # ... and a worker's end of its control channel (the supervisor's input)
    ("_worker.py", "self._answer"),
    ("_worker.py", "self._report_ready"),
    # the Redis link, for the endpoint's whole run: the client, and the
    # subscription whose every message is handled under a try that logs
    ("_stores/_redis.py", "self._hold"),
    ("_stores/_redis.py", "self.listen"),
    ("_stores/_redis.py", "chore"),  # the stores' loops (leases, forwarding): each step in a try
    # the test client's own tasks, in a nursery of its own: a failure there is
    # the test's to see (its connections to the server are spawned)
    ("testing.py", "http.enforce_timeouts"),
    ("testing.py", "self._talk.session_stream"),
    ("testing.py", "self._talk.listen"),
}


def direct_starts(root: Path) -> set[tuple[str, str]]:
    """(module, the callable) of every ``start_soon``/``nursery.start`` call under `root`."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("start_soon", "start")
                and node.args
                and _is_nursery(node.func.value)
            ):
                found.add((path.relative_to(root).as_posix(), ast.unparse(started(node))))
    return found


def started(call: ast.Call) -> ast.expr:
    """What a start call runs (through `in_python`, what that runs)."""
    first = call.args[0]
    if isinstance(first, ast.Name) and first.id == "in_python":
        return call.args[1]
    return first


def compiled_starts_outside_python(root: Path) -> set[tuple[str, str]]:
    """(module, the callable) of every direct start in a compiled module (one
    with a ``.pxd``) whose task's root would not be a Python coroutine."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        if not path.with_suffix(".pxd").exists():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("start_soon", "start")
                and node.args
                and _is_nursery(node.func.value)
                and started(node) is node.args[0]
            ):
                found.add((path.relative_to(root).as_posix(), ast.unparse(node.args[0])))
    return found


def _is_nursery(owner: ast.expr) -> bool:
    # ``writer.start(200, ...)`` starts a response, not a task: only names that
    # say nursery, or the nurseries the server names by what they hold.
    name = ast.unparse(owner)
    return "nursery" in name or name in ("clock", "acceptors", "connections")


def test_every_task_on_a_shared_nursery_is_spawned() -> None:
    assert direct_starts(SOURCE) == DIRECT_STARTS


def test_the_compiled_modules_start_their_tasks_under_a_python_coroutine() -> None:
    # (trio's Lock reads its owner's root coroutine with inspect, which a
    # Cython coroutine fails: see _trio/_tasks.py)
    assert compiled_starts_outside_python(SOURCE) == set()
    assert not (SOURCE / "_trio" / "_tasks.pxd").exists()


async def test_every_task_of_a_running_endpoint_has_a_python_root() -> None:
    """In the compiled build too: every task's root coroutine has the state
    trio's Lock reads, and a lock taken in the endpoint's own tasks works."""
    from trio_mcp import MCPConfig, Server, ServerConfig, serve_mcp

    app = Server("tasks")
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_mcp(
                app, MCPConfig(http=ServerConfig(port=0)), task_status=task_status
            )
        )
        tasks = []
        pending = [trio.lowlevel.current_root_task()]
        while pending:
            task = pending.pop()
            tasks.append(task)
            for child in task.child_nurseries:
                pending.extend(child.child_tasks)
        names = {task.name for task in tasks}
        assert any("Sweeper.run" in name for name in names), names
        for task in tasks:
            assert inspect.getcoroutinestate(task.coro) in (
                inspect.CORO_CREATED,
                inspect.CORO_RUNNING,
                inspect.CORO_SUSPENDED,
            ), task.name
        nursery.cancel_scope.cancel()


def test_the_scan_finds_a_direct_start(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "async def f(nursery, writer):\n"
        "    nursery.start_soon(g, 1)\n"
        "    await self.nursery.start(h)\n"
        "    await writer.start(200, [])\n"
    )
    assert direct_starts(tmp_path) == {("m.py", "g"), ("m.py", "h")}


async def test_a_spawned_task_that_fails_ends_alone(caplog: pytest.LogCaptureFixture) -> None:
    finished = trio.Event()

    async def fails(value: int) -> None:
        raise ValueError(value)

    async def sibling() -> None:
        await trio.sleep(0.01)
        finished.set()

    with caplog.at_level(logging.ERROR, logger="trio_mcp.tasks"):
        async with trio.open_nursery() as nursery:
            spawn(nursery, "a request", fails, 7)
            spawn(nursery, "its neighbour", sibling)
    assert finished.is_set()
    assert "a request failed; it ended alone" in caplog.text
    assert "ValueError: 7" in caplog.text


async def test_cancellation_passes_through_a_spawned_task() -> None:
    started = trio.Event()

    async def waits() -> None:
        started.set()
        await trio.sleep_forever()

    with trio.move_on_after(5) as scope:
        async with trio.open_nursery() as nursery:
            spawn(nursery, "a stream", waits)
            await started.wait()
            nursery.cancel_scope.cancel()
    assert not scope.cancelled_caught


async def test_a_guarded_step_that_fails_lets_the_loop_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done = []
    with caplog.at_level(logging.ERROR, logger="trio_mcp.tasks"):
        for step in range(3):
            with guarded(f"step {step}"):
                await trio.lowlevel.checkpoint()
                if step == 1:
                    raise KeyError(step)
                done.append(step)
    assert done == [0, 2]
    assert "step 1 failed; going on" in caplog.text


async def test_a_guarded_step_is_still_cancellable() -> None:
    with trio.move_on_after(0.01) as scope:
        with guarded("a sleep"):
            await trio.sleep_forever()
    assert scope.cancelled_caught
