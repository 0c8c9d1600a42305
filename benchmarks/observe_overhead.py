"""What metrics and the access log cost: tools/call with both off and both on, side by side.

    PYTHONPATH=src python benchmarks/observe_overhead.py [--rounds 3] [--duration 10]
        [--warmup 2] [--connections 64] [--format text|json] [--no-pin]
        [--features metrics,log]

Runs the suite's ``call`` scenario (``suite.lua``: echo on a 2025-11-25
session, JSON answers, one session per wrk thread) against
``_suite_server.py`` (compiled extensions required) alternately with both
features off and with ``--metrics /metrics --access-log FILE`` (a temporary
file, every request logged), off/on in one round and on/off in the next, so
drift in the machine's load falls on both alike. Prints each run, the
medians, and the on/off ratio of each round's pair and of the medians. The
issue's goal: at least 0.9.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import ServerProcess, can_pin, free_port, run_wrk, wrk_command
from load_mcp import ensure_extensions, open_session
from suite import LUA, server_command


def one_run(on: bool, args: argparse.Namespace, log_dir: Path) -> tuple[float, float, int]:
    """Requests per second of one load run, the server's CPU microseconds per
    request, and the access log's lines."""
    port = free_port()
    cmd, env = server_command(
        "trio-mcp", port, sse=False, pin=args.pin, use_ext=True, links=log_dir
    )
    log = log_dir / f"access-{port}.log"
    if on and "metrics" in args.features:
        cmd += ["--metrics", "/metrics"]
    if on and "log" in args.features:
        cmd += ["--access-log", str(log), "--access-log-format", args.format]
    server = ServerProcess("trio-mcp", cmd, env, port)
    try:
        server.wait_ready(timeout=30)

        def wrk(duration: int) -> list[str]:
            sessions = [open_session(server) for _ in range(args.threads)]
            return wrk_command(
                port,
                threads=args.threads,
                connections=args.connections,
                duration=duration,
                pin=args.pin,
                lua=LUA,
                script_args=["call", *sessions],
            )

        if args.warmup > 0:
            run_wrk(wrk(args.warmup), args.warmup)
        load = wrk(args.duration)
        cpu_before = server.cpu_seconds()
        result, _ = run_wrk(load, args.duration)
        cpu_after = server.cpu_seconds()
    finally:
        server.stop()
    e = result["errors"]
    errors = e["connect"] + e["read"] + e["write"] + e["timeout"] + result["non2xx"]
    if errors:
        raise SystemExit(f"{errors} errors in a run ({'on' if on else 'off'})")
    lines = len(log.read_bytes().splitlines()) if log.exists() else 0
    assert cpu_before is not None and cpu_after is not None
    cpu_us = (cpu_after - cpu_before) * 1e6 / result["requests"]
    return result["requests"] / (result["duration_us"] / 1e6), cpu_us, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument(
        "--features", default="metrics,log", help="what 'on' turns on: metrics, log or both"
    )
    args = parser.parse_args(argv)
    args.pin = not args.no_pin and can_pin()
    if not ensure_extensions():
        raise SystemExit("the compiled extensions are missing and could not be built")
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    pairs, cpu_pairs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            got, cpu = {}, {}
            for on in order:
                rate, cpu_us, lines = one_run(on, args, Path(tmp))
                got[on], cpu[on] = rate, cpu_us
                rates[on].append(rate)
                cpus[on].append(cpu_us)
                extra = f", {lines:,} log lines" if on else ""
                print(
                    f"round {round_ + 1} {'on ' if on else 'off'}: {rate:,.0f}/s, "
                    f"server CPU {cpu_us:.2f} us/request{extra}",
                    flush=True,
                )
            pairs.append(got[True] / got[False])
            cpu_pairs.append(cpu[False] / cpu[True])
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median off {off:,.0f}/s, on {on:,.0f}/s: on/off {on / off:.3f}")
    print("paired on/off per round: " + ", ".join(f"{r:.3f}" for r in pairs))
    off_cpu, on_cpu = statistics.median(cpus[False]), statistics.median(cpus[True])
    print(
        f"server CPU per request, median: off {off_cpu:.2f} us, on {on_cpu:.2f} us: "
        f"off/on {off_cpu / on_cpu:.3f} (the rate ratio of a saturated core)"
    )
    print("paired off/on CPU per round: " + ", ".join(f"{r:.3f}" for r in cpu_pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
