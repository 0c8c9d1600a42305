"""The server `soak.py` runs: the suite's tools, a tool that hangs, a
broadcast every 50 ms, and a line of statistics (JSON) on stdout every second.

    PYTHONPATH=src python benchmarks/_soak_server.py --port P [--idle-timeout 60]
        [--no-gc-freeze] [--no-malloc-trim] [--sched-slice-us N]
        [--batches | --batch-kinds] [--tracemalloc]

The configuration is the default one but for the session idle timeout (60 s,
so that a flood of abandoned sessions ends within the run), and the process
runs as ``run`` would: the trio tweaks, the paced full collections, the
young ones in turns, the freezing of what survives them (``--no-gc-freeze``:
not), the trimming of glibc's heap at the same pace (``--no-malloc-trim``:
not) and, with ``--sched-slice-us``, the kernel's scheduling slice
(``sched_slice_us``).

``--batches`` adds the CPU time of trio's scheduler batches to each line
(`_batches.BatchTimes`); ``--batch-kinds`` also counts the steps of long
batches by where their tasks were suspended. ``--tracemalloc`` adds the
ten source lines holding the most memory that grew since the previous
snapshot, every 30 s (slow: for finding growth, not for timing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _batches import BatchTimes
from _suite_server import server as app

from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp
from trio_mcp._trio._collector import (
    YoungCollections,
    collect_fully,
    freeze_survivors,
    frozen_survivors,
    heap_trimmer,
    paced_full_collections,
    young_collections_in_turns,
)
from trio_mcp._trio._slice import scheduling_slice
from trio_mcp._trio._tweaks import applied as trio_tweaks
from trio_mcp._trio._tweaks import lean_instruments

BROADCAST_S = 0.05


@app.tool()
async def hang(seconds: float = 30.0) -> str:
    """Sleep, then answer: the call a vanishing client leaves behind."""
    await trio.sleep(seconds)
    return "woke"


async def tasks() -> int:
    """Every task of this trio run, counted 256 a step: one walk of the
    thousands an attack keeps took up to 9 ms, a pause every request behind
    it would have counted against the server."""
    count = 0
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        count += 1
        if count % 256 == 0:
            await trio.lowlevel.checkpoint()
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def usage() -> dict[str, Any]:
    """RSS, and the open descriptors (listed in a thread: thousands of them)."""
    fds = await trio.to_thread.run_sync(lambda: len(os.listdir("/proc/self/fd")))
    return {"rss_mb": rss_mb(), "fds": fds}


async def report(server: HTTPServer, batches: BatchTimes | None, tracing: bool) -> None:
    started = trio.current_time()
    previous = None
    while True:
        http = server.statistics()
        endpoint = server.handler.statistics()  # type: ignore[attr-defined]
        line = {
            "t": round(trio.current_time() - started, 1),
            "compiled": http.extensions_in_use,
            **await usage(),
            "tasks": await tasks(),
            "connections": http.connections_open,
            "refused": http.connections_refused,
            "heads_waiting": http.heads_waiting,
            "sessions": endpoint.sessions,
            "streams": endpoint.streams,
            "buffered_bytes": endpoint.buffered_bytes,
            "requests_running": endpoint.requests_running,
        }
        if batches is not None:
            line["batches"] = batches.snapshot()
        if tracing and int(line["t"]) % 30 == 0:
            import tracemalloc

            shot = tracemalloc.take_snapshot()
            if previous is not None:
                grew = shot.compare_to(previous, "lineno")[:10]
                line["grew"] = [f"{stat.traceback[0]} {stat.size_diff:+d}" for stat in grew]
            previous = shot
        print(json.dumps(line), flush=True)
        await trio.sleep(1.0)


async def broadcast() -> None:
    while True:
        await trio.sleep(BROADCAST_S)
        app.notify_tools_changed()


async def main(
    config: MCPConfig,
    lean: bool,
    pacing: float | None,
    young: YoungCollections | None,
    freezing: bool,
    batches: BatchTimes | None,
    tracing: bool,
) -> None:
    # What `run` does around the server (a script's run has no statistics
    # to print): the lean instrument checks, the paced full collections, the
    # young ones in turns, the freezing of what survives them and the heap's
    # trimming.
    if batches is not None:
        trio.lowlevel.add_instrument(batches)
    if lean:
        lean_instruments()
    async with trio.open_nursery() as nursery:
        if freezing:
            freeze_survivors()
        server: HTTPServer = await nursery.start(
            lambda task_status: serve_mcp(app, config, task_status=task_status)
        )
        if pacing is not None:
            trim = heap_trimmer(config.http.malloc_trim)
            await nursery.start(partial(collect_fully, pacing, freezing, trim))
        if young is not None:
            await nursery.start(young.collect)
        nursery.start_soon(report, server, batches, tracing)
        nursery.start_soon(broadcast)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle-timeout", type=float, default=60.0)
    parser.add_argument("--no-gc-freeze", action="store_true")
    parser.add_argument("--no-malloc-trim", action="store_true")
    parser.add_argument("--sched-slice-us", type=int)
    parser.add_argument("--batches", action="store_true")
    parser.add_argument("--batch-kinds", action="store_true")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    batches = BatchTimes(kinds=True) if args.batch_kinds else BatchTimes() if args.batches else None
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    http = ServerConfig(
        port=args.port,
        gc_freeze=not args.no_gc_freeze,
        malloc_trim=not args.no_malloc_trim,
        sched_slice_us=args.sched_slice_us,
    )
    config = MCPConfig(http=http, session_idle_timeout_s=args.idle_timeout)
    with (
        trio_tweaks(config.http.trio_tweaks) as tweaks,
        paced_full_collections(config.http.gc_full_interval_s) as pacing,
        young_collections_in_turns(pacing is not None) as young,
        frozen_survivors(config.http.gc_freeze) as freezing,
        scheduling_slice(config.http.sched_slice_us) as sliced,
    ):
        if http.sched_slice_us is not None and not sliced:
            raise SystemExit("--sched-slice-us: this kernel takes no slice of a thread's own")
        try:
            trio.run(
                main,
                config,
                tweaks.lean_instruments,
                pacing,
                young,
                freezing,
                batches,
                args.tracemalloc,
            )
        except KeyboardInterrupt:
            pass
