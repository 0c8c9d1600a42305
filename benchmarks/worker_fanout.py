"""One notification to N GET streams spread over the workers of ``--workers W``.

Run from a checkout with the dev interpreter::

    PYTHONPATH=src python benchmarks/worker_fanout.py [--count 10000] [--workers 2]
        [--batch 200] [--rounds 6] [--timeout 600] [--json PATH]

The server is ``trio-mcp run benchmarks/_notify_server.py --workers W`` (the
``examples/everything.py`` app plus a ``broadcast`` tool that calls
``server.notify_tools_changed()``) on a free 127.0.0.1 port, without Redis,
with the default configuration except what one client holding every session
needs, raised for the run: ``--max-sessions`` and ``--max-sessions-per-client``
to the count plus a margin (per worker: each holds its own sessions),
``--max-connections-per-address`` to 2**20 and ``--backlog 4096``. The
open-files limit is raised to its hard limit first (the workers inherit it).

The client (memory_streams.py's: HTTP/1.1 by hand, one epoll thread reading
every stream) creates N sessions over ``--batch`` keep-alive connections (the
kernel spreads them over the workers; each session belongs to the worker that
answered its initialize, as its id says), opens one GET stream per session on
a new connection each (one that lands on another worker is passed on to the
owner and relayed, as any request is), then ``--rounds`` times sends
``tools/call broadcast`` on a session of worker 1, 2, ... in turn, and times
from its clock how long until the last of the N streams has received
``notifications/tools/list_changed``. The owner of the trigger's session
fans out to its own streams and sends the notification once to each other
worker, which fans out to its own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import (
    BenchmarkError,
    ServerProcess,
    compiled_extensions_present,
    free_port,
    loadavg_now,
    machine_info,
)
from memory_streams import (
    INITIALIZE,
    INITIALIZED,
    POST_HEADERS,
    FanOut,
    HTTPConn,
    Streams,
    broadcast,
    create_sessions,
    fd_count,
    raise_nofile,
)

HERE = Path(__file__).resolve().parent
APP = HERE / "_notify_server.py"
SESSION_MARGIN = 1000  # sessions beyond the count: the warm-up's and the triggers'


def children_of(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="latin-1") as file:
                fields = file.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(entry))
    return sorted(found)


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Group(ServerProcess):
    """The ``trio-mcp run --workers W`` process; its CPU is its workers'."""

    def workers(self) -> list[int]:
        return children_of(self.proc.pid)

    def cpu_seconds(self) -> float | None:
        try:
            return sum(cpu_of(pid) for pid in self.workers())
        except OSError:
            return None

    def wait_announced(self, workers: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while f"{workers} processes" not in self.output():
            if self.proc.poll() is not None:
                raise self.fail(f"exited with {self.proc.returncode} before serving")
            if time.monotonic() > deadline:
                raise self.fail(f"not serving after {timeout:g} s")
            time.sleep(0.1)


def group_command(workers: int, port: int, sessions: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trio_mcp",
        "run",
        str(APP),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--backlog",
        "4096",
        "--max-sessions",
        str(sessions),
        "--max-sessions-per-client",
        str(sessions),
        "--max-connections-per-address",
        str(1 << 20),
    ]


class GroupStreams(Streams):
    """The N GET streams, each counted as relayed when another worker than
    its session's owner took its connection (its answer has a Via header).
    With `same_connection`, each stream's session is initialized on the
    stream's own connection first, so the worker the kernel gave that
    connection owns the session and holds the stream: nothing is relayed."""

    def __init__(self, *args: Any, same_connection: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.same_connection = same_connection
        self.relayed = 0
        self.owners: dict[str, int] = {}

    def opened_on(self, index: int, headers: dict[bytes, bytes]) -> None:
        if b"via" in headers:
            self.relayed += 1

    async def _open(self, conn: HTTPConn, index: int, sid: str) -> int:
        if self.same_connection:
            status, headers, body = await conn.request("POST", POST_HEADERS, INITIALIZE)
            if status != 200 or b"mcp-session-id" not in headers:
                raise BenchmarkError(f"initialize answered {status}: {body[:300]!r}")
            sid = headers[b"mcp-session-id"].decode()
            status, _, body = await conn.request(
                "POST", {**POST_HEADERS, "Mcp-Session-Id": sid}, INITIALIZED
            )
            if status != 202:
                raise BenchmarkError(f"notifications/initialized answered {status}: {body!r}")
        owner = sid.partition(".")[0]
        self.owners[owner] = self.owners.get(owner, 0) + 1
        return await super()._open(conn, index, sid)


@dataclass
class Result:
    count: int
    workers: int
    connections: str
    sessions_per_worker: dict[str, int] = field(default_factory=dict)
    relayed_streams: int = 0
    fds_per_worker: list[int] = field(default_factory=list)
    fanouts: list[dict[str, object]] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


async def run_client(args: argparse.Namespace, server: Group, result: Result) -> None:
    port, count, batch = server.port, result.count, args.batch
    # the warm-up: every path once (sessions, streams, a broadcast from each worker)
    warm_ids = await create_sessions(port, args.warmup_sessions, batch)
    triggers: dict[str, str] = {}
    for _ in range(200):
        (sid,) = await create_sessions(port, 1, 1)
        triggers.setdefault(sid.partition(".")[0], sid)
        if len(triggers) == args.workers:
            break
    owners = sorted(triggers)
    if len(owners) != args.workers:
        raise BenchmarkError(f"initialize reached only {owners} in 200 tries")
    warm = Streams(port, warm_ids, len(owners), batch)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(warm.run)
        await warm.all_open.wait()
        for round_no, owner in enumerate(owners):
            fan = await broadcast(port, triggers[owner], warm, round_no, server, 30)
            if fan.last_ms is None:
                raise BenchmarkError(
                    f"warm-up broadcast from {owner} reached {fan.delivered}/{len(warm_ids)}"
                )
        nursery.cancel_scope.cancel()

    same = args.connections == "same"
    if same:
        ids = [""] * count  # (each stream initializes its own session)
    else:
        t = time.perf_counter()
        ids = await create_sessions(port, count, batch)
        result.timings_s["create_sessions"] = round(time.perf_counter() - t, 3)
        print(f"  created {count} sessions in {result.timings_s['create_sessions']:.1f} s")

    streams = GroupStreams(port, ids, args.rounds, batch, same_connection=same)
    lost: list[int] = []
    streams.on_end = lambda: lost.append(streams.ended)
    async with trio.open_nursery() as nursery:
        t = time.perf_counter()
        nursery.start_soon(streams.run)
        await streams.all_open.wait()
        result.timings_s["open_streams"] = round(time.perf_counter() - t, 3)
        result.fds_per_worker = [fd_count(pid) for pid in server.workers()]
        result.sessions_per_worker = dict(sorted(streams.owners.items()))
        result.relayed_streams = streams.relayed
        print(
            f"  opened {count} GET streams in {result.timings_s['open_streams']:.1f} s; held "
            f"by {result.sessions_per_worker}, {streams.relayed} of them relayed by another "
            f"worker; descriptors per worker {result.fds_per_worker}",
            flush=True,
        )
        for round_no in range(args.rounds):
            await trio.sleep(1.0)
            owner = owners[round_no % len(owners)]
            fan: FanOut = await broadcast(
                port, triggers[owner], streams, round_no, server, args.round_timeout
            )
            record = {"from": owner, **asdict(fan)}
            result.fanouts.append(record)
            last = "INCOMPLETE" if fan.last_ms is None else f"{fan.last_ms:7.1f} ms"
            print(
                f"  round {fan.round} from {owner}: last {last} (first {fan.first_ms:.1f}, "
                f"median {fan.median_ms:.1f}, p99 {fan.p99_ms:.1f} ms; "
                f"{fan.delivered}/{count}; call answered {fan.call_answered_ms:.1f} ms; "
                f"workers' CPU {fan.server_cpu_ms:.0f} ms)",
                flush=True,
            )
        if lost:
            result.notes.append(f"{len(lost)} GET streams ended during the run")
        if streams.extra_events:
            result.notes.append(f"{streams.extra_events} extra list_changed events (duplicates)")
        nursery.cancel_scope.cancel()


def stop(server: Group) -> None:
    proc = server.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for pid in server.workers():
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()
    server.log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="sessions and GET streams")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=200, help="connections opening at once")
    parser.add_argument("--rounds", type=int, default=6, help="broadcasts timed")
    parser.add_argument("--warmup-sessions", type=int, default=200)
    parser.add_argument("--round-timeout", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="global time limit, s")
    parser.add_argument(
        "--connections",
        choices=("same", "new"),
        default="same",
        help="same: each stream's session is initialized on the stream's connection, so "
        "its owner holds it; new: sessions first, each GET on a new connection (about "
        "half are relayed to their owner by the other worker)",
    )
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args(argv)
    nofile = raise_nofile()
    if nofile[0] < args.count + 1024:
        raise SystemExit(f"RLIMIT_NOFILE {nofile[0]} is too low for {args.count} streams")
    port = free_port()
    sessions = args.count + args.warmup_sessions + SESSION_MARGIN
    command = group_command(args.workers, port, sessions)
    print(f"$ {' '.join(command)}\n  (load average {loadavg_now()})", flush=True)
    server = Group(f"--workers {args.workers}", command, {}, port)
    result = Result(args.count, args.workers, args.connections)
    started = time.perf_counter()
    try:
        server.wait_announced(args.workers, 60)

        async def bounded() -> None:
            with trio.fail_after(args.timeout):
                await run_client(args, server, result)

        trio.run(bounded)
    finally:
        result.timings_s["total"] = round(time.perf_counter() - started, 1)
        stop(server)
    lasts = [f["last_ms"] for f in result.fanouts if f["last_ms"] is not None]
    if lasts:
        print(
            f"last stream reached: median {statistics.median(lasts):.1f} ms, "
            f"max {max(lasts):.1f} ms over {len(lasts)} rounds"
        )
    for note in result.notes:
        print(f"  NOTE: {note}")
    if args.json is not None:
        report = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(compiled_extensions_present(), False),
            "command": " ".join(command),
            **asdict(result),
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if len(lasts) == args.rounds and not result.notes else 1


if __name__ == "__main__":
    sys.exit(main())
