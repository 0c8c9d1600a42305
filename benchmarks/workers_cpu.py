"""``--workers 2`` against one process: CPU time per request, and how the
kernel spreads connections over the workers.

Run from a checkout with the dev interpreter (wrk must be installed)::

    PYTHONPATH=src python benchmarks/workers_cpu.py [--duration 10] [--rounds 3]
        [--connections 64] [--threads 2] [--json PATH]

Each round starts ``trio-mcp run benchmarks/_suite_server.py --workers W``
for W = 1, then 2 (default configuration; with 1 there is no supervisor),
on a free 127.0.0.1 port, and loads it with wrk for ``--duration`` seconds:
``benchmarks/suite.lua``'s ``call2026`` scenario, a 2026-07-28 tools/call
echo("hello") with no session, which any worker answers itself (a 2025
session's request would go to its owner: ``passing_on.py`` measures that).
The CPU time is read from ``/proc`` before and after: every process of the
server (the workers and the supervisor), divided by the requests wrk
completed. Halfway through, the connections each worker holds are counted
(its established TCP sockets on the port, matched through ``/proc/net/tcp``),
and their max/min ratio reported. Nothing is pinned: the workers need every
core, and wrk runs beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import ROOT, BenchmarkError, ServerProcess, free_port, loadavg_now, run_wrk
from load_echo import wrk_command as wrk_for
from load_mcp import LUA
from worker_fanout import children_of, cpu_of

APP = ROOT / "benchmarks" / "_suite_server.py"
MODERN = "2026-07-28"


def established_on(port: int) -> set[int]:
    """The inodes of the established TCP sockets whose local port is `port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01":  # ESTABLISHED
                inodes.add(int(fields[9]))
    return inodes


def sockets_of(pid: int, inodes: set[int]) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and int(target[8:-1]) in inodes:
            count += 1
    return count


def one_run(workers: int, args: argparse.Namespace) -> dict[str, object]:
    port = free_port()
    cmd = [sys.executable, "-m", "trio_mcp", "run", str(APP), "--port", str(port)]
    cmd += ["--workers", str(workers)]
    env = {"PYTHONPATH": str(ROOT / "src"), "TRIO_MCP_REQUIRE_EXTENSIONS": "1"}
    server = ServerProcess(f"--workers {workers}", cmd, env, port)
    try:
        deadline = time.monotonic() + 60
        while "serving MCP on" not in server.output():
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise server.fail("did not start")
            time.sleep(0.1)
        server.wait_ready()
        time.sleep(1.0)  # (every worker imported and listening, as the line says)
        pids = [server.proc.pid, *children_of(server.proc.pid)]
        serving = pids[1:] if workers > 1 else pids
        spread: list[int] = []

        def count_connections() -> None:
            time.sleep(args.duration / 2)
            inodes = established_on(port)
            spread.extend(sockets_of(pid, inodes) for pid in serving)

        counter = threading.Thread(target=count_connections)
        cpu_before = sum(cpu_of(pid) for pid in pids)
        counter.start()
        cmd_wrk = wrk_for(
            port,
            threads=args.threads,
            connections=args.connections,
            duration=args.duration,
            pin=False,
            lua=LUA,
            script_args=["call2026", MODERN],
        )
        result, _ = run_wrk(cmd_wrk, args.duration)
        cpu_after = sum(cpu_of(pid) for pid in pids)
        counter.join()
    finally:
        server.stop()
    errors = sum(result["errors"].values()) + result["non2xx"] + result["mismatches"]
    if errors:
        raise BenchmarkError(f"--workers {workers}: {errors} errors: {result}")
    requests = result["requests"]
    cpu_s = cpu_after - cpu_before
    return {
        "workers": workers,
        "requests": requests,
        "requests_per_s": round(requests / (result["duration_us"] / 1e6)),
        "cpu_s": round(cpu_s, 2),
        "cpu_us_per_request": round(cpu_s / requests * 1e6, 2),
        "connections_per_worker": spread,
        "spread_max_min": round(max(spread) / min(spread), 2) if spread and min(spread) else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(f"load average {loadavg_now()}", flush=True)
    runs: list[dict[str, object]] = []
    for round_no in range(1, args.rounds + 1):
        for workers in (1, 2):
            run = one_run(workers, args)
            runs.append({"round": round_no, **run})
            print(
                f"  round {round_no} --workers {workers}: {run['requests_per_s']:>7,} calls/s, "
                f"CPU {run['cpu_us_per_request']:6.2f} µs per call, connections per worker "
                f"{run['connections_per_worker']} (max/min {run['spread_max_min']})",
                flush=True,
            )
    summary = {}
    for workers in (1, 2):
        mine = [r for r in runs if r["workers"] == workers]
        summary[workers] = {
            "cpu_us_per_request": statistics.median(float(r["cpu_us_per_request"]) for r in mine),  # type: ignore[arg-type]
            "requests_per_s": statistics.median(int(r["requests_per_s"]) for r in mine),  # type: ignore[call-overload]
        }
    ratio = summary[2]["cpu_us_per_request"] / summary[1]["cpu_us_per_request"]
    spreads = [r["spread_max_min"] for r in runs if r["workers"] == 2]
    print(
        f"CPU per call, medians: 1 process {summary[1]['cpu_us_per_request']:.2f} µs, "
        f"2 workers {summary[2]['cpu_us_per_request']:.2f} µs ({ratio:.3f}x); "
        f"connections max/min over the rounds: {spreads}; load average {loadavg_now()}"
    )
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
