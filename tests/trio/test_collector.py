"""Full garbage collections at a pace while trio-mcp runs trio itself: the
automatic ones are off, one runs every interval, and all is as it was after;
the young and middle ones run in a task of their own, in a turn, when a
server's look finds one due;
with freezing, what survives start-up and each paced collection is frozen;
with trimming, glibc's free heap pages go back to the system each interval."""

from __future__ import annotations

import gc
import platform
import socket
import subprocess
import sys
import time
import weakref
from functools import partial

import pytest
import trio
from _support import connect, free_port, post, settled

from trio_mcp import Request, Response, ServerConfig, serve
from trio_mcp._trio import _collector
from trio_mcp._trio._collector import (
    collect_fully,
    freeze_survivors,
    frozen_survivors,
    generational,
    heap_trimmer,
    paced_full_collections,
    young_collections,
    young_collections_in_turns,
)
from trio_mcp._trio._turns import keep_turns

#: (on the incremental collector, 3.14's, pacing rightly does not apply)
generational_only = pytest.mark.skipif(
    not generational(), reason="pacing applies to the generational collector only"
)


class Node:
    """An object in a reference cycle of its own."""

    def __init__(self) -> None:
        self.me = self


def old_cyclic_garbage() -> weakref.ref[Node]:
    """A cycle promoted to the oldest generation, then dropped: only a full
    collection frees it."""
    node = Node()
    gc.collect(1)  # (what survives a middle-generation collection moves up)
    gc.collect(1)
    return weakref.ref(node)


@generational_only
def test_pacing_turns_automatic_full_collections_off_until_it_ends() -> None:
    before = gc.get_threshold()
    with paced_full_collections(60.0) as pacing:
        assert pacing == 60.0
        assert gc.get_threshold() == (before[0], _collector._MIDDLE_EVERY, _collector._NEVER)
        dropped = old_cyclic_garbage()
        for _ in range(50):
            gc.collect(1)  # (the middle generation's collections, many: none goes further)
        assert dropped() is not None
        gc.collect()
        assert dropped() is None
    assert gc.get_threshold() == before


def test_none_a_disabled_or_an_incremental_collector_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = gc.get_threshold()
    with paced_full_collections(None) as pacing:
        assert pacing is None and gc.get_threshold() == before
    gc.disable()
    try:
        with paced_full_collections(60.0) as pacing:
            assert pacing is None and gc.get_threshold() == before
    finally:
        gc.enable()
    monkeypatch.setattr(gc, "get_threshold", lambda: (2000, 10, 0))  # (how 3.14's reads)
    with paced_full_collections(60.0) as pacing:
        assert pacing is None


@generational_only
async def test_the_paced_collection_frees_old_cycles_within_an_interval() -> None:
    with paced_full_collections(0.05):
        dropped = old_cyclic_garbage()
        gc.collect(1)  # (something was promoted since the last full collection)
        async with trio.open_nursery() as nursery:
            collections = await nursery.start(collect_fully, 0.05)
            with trio.fail_after(5):
                while dropped() is not None:
                    await trio.sleep(0.01)
            collections.cancel()


SERVE_AND_REPORT_THRESHOLD = """
import gc, sys
from trio_mcp import Response, ServerConfig, run

async def threshold(request):
    return Response(200, [], repr((*gc.get_threshold(), gc.get_freeze_count())).encode())

config = ServerConfig(
    port=int(sys.argv[1]),
    gc_full_interval_s=float(sys.argv[2]) or None,
    gc_freeze=sys.argv[3] == "freeze",
)
run(threshold, config)
"""


def served_tuple(script: str, *args: str) -> list[int]:
    """Run `script` (a server on the port it is given first, then `args`),
    GET / once, and return the tuple of integers its handler answered."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", script, str(port), *args])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        with sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
    finally:
        server.terminate()
        server.wait(timeout=20)
    return [int(value) for value in reply.rsplit(b"\r\n\r\n", 1)[1].strip(b"()").split(b",")]


def serve_and_report(interval: float, freeze: bool) -> tuple[int, int, int]:
    """The first and third thresholds and the number of frozen objects, as
    a server's handler sees them under `run` with these settings."""
    values = served_tuple(
        SERVE_AND_REPORT_THRESHOLD, str(interval), "freeze" if freeze else "no-freeze"
    )
    return values[0], values[2], values[3]


@generational_only
@pytest.mark.parametrize("interval", [60.0, 0.0])
def test_run_paces_full_collections_unless_told_not_to(interval: float) -> None:
    first, third, _ = serve_and_report(interval, freeze=False)
    if interval:
        assert third == _collector._NEVER
        # (the young ones in turns: the automatic threshold is a backstop)
        assert first == gc.get_threshold()[0] * _collector.BACKSTOP
    else:
        assert third == gc.get_threshold()[2] != _collector._NEVER
        assert first == gc.get_threshold()[0]


@generational_only
def test_young_collections_in_turns_keep_the_automatic_threshold_as_a_backstop() -> None:
    before = gc.get_threshold()
    assert young_collections() is None
    with young_collections_in_turns(True) as young:
        assert young is not None and young.threshold == before[0]
        assert young_collections() is young
        assert gc.get_threshold() == (before[0] * _collector.BACKSTOP, *before[1:])
        with young_collections_in_turns(True) as nested:  # (one per process)
            assert nested is None
        assert gc.get_threshold()[0] == before[0] * _collector.BACKSTOP
    assert gc.get_threshold() == before and young_collections() is None
    with young_collections_in_turns(False) as young:
        assert young is None and gc.get_threshold() == before
    gc.disable()
    try:
        with young_collections_in_turns(True) as young:
            assert young is None and gc.get_threshold() == before
    finally:
        gc.enable()


class Collections:
    """The collections that run while entered: (generation, the name of the
    trio task they ran in); each also appends "collected" to `log`, if given."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.seen: list[tuple[int, str]] = []
        self.log = log

    def __enter__(self) -> list[tuple[int, str]]:
        gc.callbacks.append(self._record)
        return self.seen

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._record)

    def _record(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.seen.append((info["generation"], trio.lowlevel.current_task().name))
            if self.log is not None:
                self.log.append("collected")


def is_collector(task_name: str) -> bool:
    return task_name.endswith("YoungCollections.collect")


@generational_only
async def test_a_look_wakes_the_collector_only_when_a_collection_is_due() -> None:
    kept: list[list[int]] = []
    with young_collections_in_turns(True) as young, Collections() as seen:
        assert young is not None
        async with trio.open_nursery() as nursery:
            collector = await nursery.start(young.collect)
            gc.collect()  # (the young count starts from zero)
            young.look()
            await settled()
            assert seen == [(2, trio.lowlevel.current_task().name)]  # (that one)
            kept.extend([] for _ in range(young.threshold + 100))
            young.look()
            await settled()
            assert len(seen) == 2 and seen[1][0] == 0 and is_collector(seen[1][1])
            young.look()  # (nothing new is due)
            await settled()
            assert len(seen) == 2
            collector.cancel()


@generational_only
async def test_the_middle_generation_is_collected_when_it_is_due_as_cpython_would() -> None:
    kept: list[list[int]] = []
    with young_collections_in_turns(True) as young, Collections() as seen:
        assert young is not None
        async with trio.open_nursery() as nursery:
            collector = await nursery.start(young.collect)
            gc.collect()
            for _ in range(gc.get_threshold()[1]):
                gc.collect(0)  # (as many young collections as the middle threshold)
            kept.extend([] for _ in range(young.threshold + 100))
            young.look()
            await settled()
            assert seen[-1][0] == 0 and is_collector(seen[-1][1])  # (not yet past it)
            kept.extend([] for _ in range(young.threshold + 100))
            young.look()
            await settled()
            assert seen[-1][0] == 1 and is_collector(seen[-1][1])
            collector.cancel()


@generational_only
async def test_a_collection_waits_for_a_turn(mock_clock: trio.testing.MockClock) -> None:
    # (the clock stands still: the turn comes only when nothing else is runnable)
    log: list[str] = []
    kept: list[list[int]] = []

    async def busy() -> None:
        for _ in range(50):
            await trio.lowlevel.checkpoint()
        log.append("busy done")

    with young_collections_in_turns(True) as young:
        assert young is not None
        async with trio.open_nursery() as nursery:
            await nursery.start(keep_turns)
            collector = await nursery.start(young.collect)
            gc.collect()
            kept.extend([] for _ in range(young.threshold + 100))
            with Collections(log) as seen:
                young.look()
                nursery.start_soon(busy)
                await settled()
            assert len(seen) == 1 and is_collector(seen[0][1])
            collector.cancel()
            nursery.cancel_scope.cancel()
    assert log == ["busy done", "collected"]


@generational_only
async def test_a_server_looks_every_few_requests_and_the_collector_collects() -> None:
    kept: list[list[int]] = []
    per_request = 0

    async def allocating(request: Request) -> Response:
        kept.extend([] for _ in range(per_request))
        return Response(200, [], b"ok")

    with young_collections_in_turns(True) as young, Collections() as seen:
        assert young is not None
        # (due by the first look, and far from the backstop)
        per_request = 2 * young.threshold // _collector.LOOK_EVERY
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve, allocating, ServerConfig(port=0))
            collector = await nursery.start(young.collect)
            client = await connect(server.ports[0])
            gc.collect()
            del seen[:]
            for _ in range(_collector.LOOK_EVERY):
                await client.send(post())
                assert (await client.read_reply()).status == 200
            await settled()
            assert seen and all(is_collector(task) for _, task in seen), seen
            await client.stream.aclose()
            collector.cancel()
            server.shutdown()


def test_the_interval_is_validated() -> None:
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="gc_full_interval_s"):
            ServerConfig(gc_full_interval_s=bad)
    assert ServerConfig(gc_full_interval_s=None).gc_full_interval_s is None


@generational_only
def test_freezing_moves_the_survivors_out_of_the_collectors_walk_until_it_ends() -> None:
    assert gc.get_freeze_count() == 0
    with frozen_survivors(True) as freezing:
        assert freezing is True
        kept = Node()
        dropped = old_cyclic_garbage()
        freeze_survivors()
        assert dropped() is None  # (collected first: garbage is not frozen)
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # (frozen: no collection walks it)
    assert gc.get_freeze_count() == 0
    assert any(o is kept for o in gc.get_objects())


def test_freezing_off_or_on_a_disabled_collector_freezes_nothing() -> None:
    with frozen_survivors(False) as freezing:
        assert freezing is False
    gc.disable()
    try:
        with frozen_survivors(True) as freezing:
            assert freezing is False
    finally:
        gc.enable()


@generational_only
async def test_a_paced_collection_freezes_what_survived_it_when_told_to() -> None:
    with paced_full_collections(0.05), frozen_survivors(True):
        kept = Node()
        gc.collect(1)  # (something was promoted since the last full collection)
        async with trio.open_nursery() as nursery:
            collections = await nursery.start(partial(collect_fully, 0.05, freeze=True))
            with trio.fail_after(5):
                while gc.get_freeze_count() == 0:
                    await trio.sleep(0.01)
            collections.cancel()
        assert not any(o is kept for o in gc.get_objects())
    assert gc.get_freeze_count() == 0


@generational_only
@pytest.mark.parametrize("freeze", [True, False])
def test_run_freezes_what_start_up_built_unless_told_not_to(freeze: bool) -> None:
    _, _, frozen = serve_and_report(60.0, freeze)
    if freeze:
        assert frozen > 1000  # (the interpreter's modules, trio, the server)
    else:
        assert frozen == 0


def test_freezing_is_on_by_default() -> None:
    assert ServerConfig().gc_freeze is True


FRAGMENT_AND_REPORT_RSS = """
import sys, time
import trio
from trio_mcp import Response, ServerConfig, run

def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

async def fragment(request):
    # 80 MB of glibc's heap (objects over pymalloc's 512 bytes), then all but
    # one in 64 dropped: the pages between the kept ones are free, but glibc
    # keeps them (only the heap's top is given back by free itself)
    blocks = [bytes(1000) for _ in range(80_000)]
    kept = blocks[::64]
    del blocks
    before = rss_kib()
    await trio.sleep(1.0)  # (several of the paced intervals)
    return Response(200, [], repr((before, rss_kib(), len(kept))).encode())

run(fragment, ServerConfig(
    port=int(sys.argv[1]), gc_full_interval_s=0.1, malloc_trim=sys.argv[2] == "trim"
))
"""


def fragmented_rss(trim: bool) -> tuple[int, int]:
    """A server's RSS (KiB) right after its handler fragmented glibc's heap,
    and a second later, under `run` with `malloc_trim` as given."""
    before, after, _ = served_tuple(FRAGMENT_AND_REPORT_RSS, "trim" if trim else "keep")
    return before, after


GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_run_hands_the_heaps_free_pages_back_unless_told_not_to() -> None:
    before, after = fragmented_rss(trim=True)
    assert before - after > 40_000  # (of about 78 MB freed, in KiB)
    before, after = fragmented_rss(trim=False)
    assert abs(before - after) < 10_000


def test_the_trimmer_is_glibcs_malloc_trim_or_none() -> None:
    assert heap_trimmer(False) is None
    trimmer = heap_trimmer(True)
    if GLIBC:
        assert trimmer is not None
        assert trimmer() in (0, 1)  # (1: memory was given back)
    else:
        assert trimmer is None or callable(trimmer)


async def test_each_paced_interval_trims_when_told_to() -> None:
    trims: list[float] = []
    async with trio.open_nursery() as nursery:
        collections = await nursery.start(
            partial(collect_fully, 0.02, trim=lambda: trims.append(trio.current_time()))
        )
        with trio.fail_after(5):
            while len(trims) < 3:
                await trio.sleep(0.01)
        collections.cancel()
    assert trims == sorted(trims)
    assert trims[2] - trims[0] >= 0.03  # (one an interval, not all at once)


def test_trimming_is_on_by_default() -> None:
    assert ServerConfig().malloc_trim is True
