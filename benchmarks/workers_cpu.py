"""``--workers 2`` against one process: CPU time per request, and how the
connections spread over the workers.

Run from a checkout with the dev interpreter (wrk must be installed)::

    PYTHONPATH=src python benchmarks/workers_cpu.py [--duration 10] [--rounds 3]
        [--connections 64] [--threads 2] [--rate N] [--per-core] [--affinity]
        [--base CHECKOUT] [--json PATH]

Each round starts ``trio-mcp run benchmarks/_suite_server.py --workers W``
for W = 1, then 2 (default configuration; with 1 there is no supervisor),
on a free 127.0.0.1 port, and loads it for ``--duration`` seconds with a
2026-07-28 tools/call echo("hello") with no session, which any worker
answers itself (a 2025 session's request would go to its owner:
``passing_on.py`` measures that):

- by default with wrk, as fast as it goes (``benchmarks/suite.lua``'s
  ``call2026``, ``--threads`` threads, ``--connections`` connections), so
  the server and wrk share the cores and preempt each other;
- with ``--rate N``, with ``trio-mcp bench --rate N`` instead: an open loop
  at N calls/s in all, below what the machine can serve, so that a core
  stays partly idle and each process is woken for what arrives.

The CPU time is read from ``/proc`` before and after: the workers' and the
supervisor's apart, divided by the requests completed; with them the
context switches per request of the serving processes (voluntary: a wait
for I/O, one per scheduler batch at most; involuntary: preempted). Halfway
through, the connections each worker holds are counted (its established TCP
sockets on the port, matched through ``/proc/net/tcp``), and their max/min
ratio reported. By default nothing is pinned: the workers need every core.

With ``--per-core``, one single-threaded wrk per serving process runs on
that process's CPU with its share of the connections (a process that may
run anywhere is pinned first, the i-th to CPU i): one process and each of
two then share a core with one load thread, where by default wrk's two
threads go wherever the kernel puts them and one process has a core to
itself more often than two. ``--affinity`` runs ``--workers 2`` with
``--worker-cpu-affinity``: each worker on its CPU, given the connections
that CPU receives.

``--base CHECKOUT`` runs another checkout's ``src`` (a build of main, say)
beside this one, round by round, so that both meet the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import ROOT, BenchmarkError, ServerProcess, free_port, loadavg_now, run_wrk
from load_echo import wrk_command as wrk_for
from load_mcp import LUA
from worker_fanout import children_of, cpu_of

APP = ROOT / "benchmarks" / "_suite_server.py"
MODERN = "2026-07-28"


def established_on(port: int) -> set[int]:
    """The inodes of the established TCP sockets whose local port is `port`,
    from the kernel's socket diagnostics (``ss``): reading ``/proc/net/tcp``
    while tens of thousands of other sockets come and go skips entries."""
    out = subprocess.run(
        ["ss", "-tnHe", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(word[4:]) for word in out.split() if word.startswith("ino:")}


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


def switches_of(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of `pid` so far."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if "ctxt_switches:" in line:
            name, _, value = line.partition(":")
            found[name.strip()] = int(value)
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


def per_core_wrk(port: int, serving: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """One single-threaded wrk per serving process, on that process's CPU,
    with an equal share of the connections: a process that may run anywhere
    is pinned first (the i-th to CPU i), one pinned already
    (``--worker-cpu-affinity``) stays. So each process shares its core with
    one load thread, however many processes there are, and every connection
    is opened from its wrk's CPU. The wrks' totals, added up."""
    cpus = []
    for index, pid in enumerate(serving):
        allowed = os.sched_getaffinity(pid)
        if len(allowed) > 1:
            allowed = {index}
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), allowed)
        cpus.append(min(allowed))
    share = args.connections // len(serving)
    commands = [
        ["taskset", "-c", str(cpu)]
        + wrk_for(
            port,
            threads=1,
            connections=share,
            duration=args.duration,
            pin=False,
            lua=LUA,
            script_args=["call2026", MODERN],
        )
        for cpu in cpus
    ]
    with ThreadPoolExecutor(len(commands)) as pool:
        results = [done for done, _ in pool.map(lambda cmd: run_wrk(cmd, args.duration), commands)]
    errors: dict[str, int] = {}
    for result in results:
        for key, count in result["errors"].items():
            errors[key] = errors.get(key, 0) + count
    return {
        "requests": sum(result["requests"] for result in results),
        "errors": errors,
        "non2xx": sum(result["non2xx"] for result in results),
        "mismatches": sum(result["mismatches"] for result in results),
        "duration_us": max(result["duration_us"] for result in results),
    }


def bench_at_rate(port: int, args: argparse.Namespace) -> dict[str, Any]:
    """``trio-mcp bench`` (this checkout's) at ``args.rate`` calls/s; its totals."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        command = [sys.executable, "-m", "trio_mcp", "bench", f"http://127.0.0.1:{port}/mcp"]
        command += ["--protocol", MODERN, "--rate", str(args.rate), "--warmup", "0"]
        command += ["--connections", str(args.connections), "--duration", str(args.duration)]
        command += ["--quiet", "--json", str(out)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        subprocess.run(command, check=True, timeout=args.duration + 120, env=env, cwd=ROOT)
        report: dict[str, Any] = json.loads(out.read_text())
    totals = report["totals"]
    return {
        "requests": totals["requests"],
        "errors": totals["errors"],
        "duration_s": totals["duration_s"],
    }


#: What runs: one process, a group of two workers, or two independent
#: processes on one port (``--reuse-port``, no supervisor, no group).
KINDS = {"1 process": 1, "--workers 2": 2, "2 processes": 2}


def start(kind: str, src: Path, port: int, extra: list[str]) -> list[ServerProcess]:
    cmd = [sys.executable, "-m", "trio_mcp", "run", str(APP), "--port", str(port)]
    env = {"PYTHONPATH": str(src), "TRIO_MCP_REQUIRE_EXTENSIONS": "1"}
    if kind == "2 processes":
        cmd += ["--reuse-port"]
        servers = [ServerProcess(f"{kind} ({i})", cmd, env, port) for i in (1, 2)]
    else:
        cmd += ["--workers", str(KINDS[kind])] + (extra if KINDS[kind] > 1 else [])
        servers = [ServerProcess(kind, cmd, env, port)]
    for server in servers:
        deadline = time.monotonic() + 60
        while "serving MCP on" not in server.output():
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise server.fail("did not start")
            time.sleep(0.1)
        server.wait_ready()
    time.sleep(1.0)  # (every worker imported and listening, as the line says)
    return servers


def one_run(kind: str, src: Path, args: argparse.Namespace, extra: list[str]) -> dict[str, object]:
    port = free_port()
    servers = start(kind, src, port, extra)
    try:
        supervisor = servers[0].proc.pid if kind == "--workers 2" else None
        serving = children_of(supervisor) if supervisor else [s.proc.pid for s in servers]
        pids = [*([supervisor] if supervisor else []), *serving]
        samples: list[list[int]] = []

        def count_connections() -> None:
            # (every half second from the first: wrk's connections reconnect
            # each 1,000 requests, the server's default limit, all at about
            # the same time, so one look can fall inside such a wave)
            for _ in range(max(1, int(args.duration * 2) - 2)):
                time.sleep(0.5)
                inodes = established_on(port)
                samples.append([sockets_of(pid, inodes) for pid in serving])

        counter = threading.Thread(target=count_connections)
        cpu_before = {pid: cpu_of(pid) for pid in pids}
        switches_before = [switches_of(pid) for pid in serving]
        counter.start()
        if args.rate:
            result = bench_at_rate(port, args)
            errors = result["errors"]
            requests = result["requests"]
            duration_s = result["duration_s"]
        else:
            cmd_wrk = wrk_for(
                port,
                threads=args.threads,
                connections=args.connections,
                duration=args.duration,
                pin=False,
                lua=LUA,
                script_args=["call2026", MODERN],
            )
            if args.per_core:
                wrk = per_core_wrk(port, serving, args)
            else:
                wrk, _ = run_wrk(cmd_wrk, args.duration)
            errors = sum(wrk["errors"].values()) + wrk["non2xx"] + wrk["mismatches"]
            requests = wrk["requests"]
            duration_s = wrk["duration_us"] / 1e6
        cpu_after = {pid: cpu_of(pid) for pid in pids}
        switches_after = [switches_of(pid) for pid in serving]
        counter.join()
    finally:
        for server in servers:
            server.stop()
    if errors:
        raise BenchmarkError(f"{kind}: {errors} errors")
    spread = samples[len(samples) // 2]
    ratios = [max(c) / min(c) if min(c) else float("inf") for c in samples]
    cpu = {pid: cpu_after[pid] - cpu_before[pid] for pid in pids}
    cpu_s = sum(cpu.values())
    supervisor_s = cpu[supervisor] if supervisor else 0.0
    voluntary = sum(a[0] - b[0] for a, b in zip(switches_after, switches_before, strict=True))
    preempted = sum(a[1] - b[1] for a, b in zip(switches_after, switches_before, strict=True))
    return {
        "kind": kind,
        "requests": requests,
        "requests_per_s": round(requests / duration_s),
        "cpu_s": round(cpu_s, 2),
        "cpu_us_per_request": round(cpu_s / requests * 1e6, 2),
        "supervisor_cpu_s": round(supervisor_s, 2),
        "waits_per_request": round(voluntary / requests, 3),
        "preemptions_per_request": round(preempted / requests, 4),
        "connections_per_worker": spread,
        "spread_max_min": round(max(spread) / min(spread), 2) if min(spread) else None,
        "spread_samples": samples,
        "spread_worst": round(max(ratios), 2),
        "spread_median": round(statistics.median(ratios), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rate", type=int, help="open loop at this many calls/s (trio-mcp bench)")
    parser.add_argument("--base", type=Path, help="another checkout to run beside this one")
    parser.add_argument(
        "--independent",
        action="store_true",
        help="also two independent processes on the port (--reuse-port), this checkout only",
    )
    parser.add_argument(
        "--per-core",
        action="store_true",
        help="a single-threaded wrk per serving process, on that process's CPU",
    )
    parser.add_argument(
        "--affinity",
        action="store_true",
        help="--workers 2 with --worker-cpu-affinity (this checkout's, not --base's)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    builds = {"this": ROOT / "src"}
    if args.base is not None:
        builds = {"base": args.base.resolve() / "src", **builds}
    load = f"trio-mcp bench --rate {args.rate}" if args.rate else "wrk, as fast as it goes"
    load += ", a wrk per process on its CPU" if args.per_core else ""
    load += "; --workers 2 with --worker-cpu-affinity" if args.affinity else ""
    print(f"load: {load}; load average {loadavg_now()}", flush=True)
    runs: list[dict[str, Any]] = []
    for round_no in range(1, args.rounds + 1):
        for build, src in builds.items():
            kinds = list(KINDS) if args.independent and build == "this" else list(KINDS)[:2]
            for kind in kinds:
                extra = ["--worker-cpu-affinity"] if args.affinity and build == "this" else []
                run = one_run(kind, src, args, extra)
                runs.append({"round": round_no, "build": build, **run})
                print(
                    f"  round {round_no} {build} {kind}: "
                    f"{run['requests_per_s']:>7,} calls/s, CPU {run['cpu_us_per_request']:6.2f} µs "
                    f"per call (supervisor {run['supervisor_cpu_s']} s), waits "
                    f"{run['waits_per_request']} and preemptions "
                    f"{run['preemptions_per_request']} per call, connections per worker "
                    f"{run['connections_per_worker']} halfway (max/min {run['spread_max_min']}; "
                    f"over {len(run['spread_samples'])} looks median {run['spread_median']}, "
                    f"worst {run['spread_worst']})",
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for build in builds:
        mine = {k: [r for r in runs if r["build"] == build and r["kind"] == k] for k in KINDS}
        cpu = {
            k: statistics.median(r["cpu_us_per_request"] for r in v) for k, v in mine.items() if v
        }
        summary[build] = {
            "cpu_us_per_request": cpu,
            "ratios": {k: round(v / cpu["1 process"], 3) for k, v in cpu.items()},
            "requests_per_s": {
                k: statistics.median(r["requests_per_s"] for r in v) for k, v in mine.items() if v
            },
            "spreads": {
                k: [(r["spread_max_min"], r["spread_median"], r["spread_worst"]) for r in v]
                for k, v in mine.items()
                if k != "1 process"
            },
        }
        print(
            f"{build}: CPU per call, medians: "
            + ", ".join(
                f"{k} {v:.2f} µs ({cpu[k] / cpu['1 process']:.3f}x)" for k, v in cpu.items()
            )
            + "; connections max/min over the rounds (halfway, median, worst): "
            + str(summary[build]["spreads"])
        )
    print(f"load average {loadavg_now()}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
