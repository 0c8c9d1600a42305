"""What passing a request to its session's owner costs: tools/call rates of
one session answered by its owner, and passed to it by another process of
its group (owner hints and a peer sockets directory, no shared store).

Run from a checkout with the dev interpreter (wrk must be installed)::

    PYTHONPATH=src python benchmarks/passing_on.py [--duration 10] [--rounds 3]
        [--connections 16] [--threads 2] [--json PATH]

Starts two ``benchmarks/_suite_server.py`` processes on free 127.0.0.1 ports,
owners ``w0`` and ``w1``, sharing one ``requestState`` key and a private
peer sockets directory, and a third with the default configuration. Opens
one session per wrk thread on the default server and on ``w0``, then loads,
in turn, for ``--duration`` seconds each: the default server with its own
sessions ("plain"), ``w0`` with its own ("owner"), and ``w1`` with ``w0``'s
("passed on", every call crossing the hop). wrk runs
``benchmarks/suite.lua``'s ``call`` scenario: tools/call echo("hello"),
expecting 200 and the text back. With taskset and two or more CPUs each
server is pinned to CPU 0 (both processes of the group, so the hop's cost
is counted on one core, as on a busy host) and wrk to CPU 1. Reports the
medians over ``--rounds`` and the ratios to "plain".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import (
    ROOT,
    SERVER_CPU,
    BenchmarkError,
    ServerProcess,
    can_pin,
    free_port,
    run_wrk,
    wrk_command,
)
from load_mcp import LUA, check_call, open_session

KEY = "passing-on benchmark key"


def start(name: str, extra: list[str], pin: bool) -> ServerProcess:
    port = free_port()
    cmd = [sys.executable, str(ROOT / "benchmarks" / "_suite_server.py"), "--port", str(port)]
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
    env = {"PYTHONPATH": str(ROOT / "src"), "TRIO_MCP_REQUIRE_EXTENSIONS": "1"}
    server = ServerProcess(name, [*cmd, *extra], env, port)
    server.wait_ready()
    return server


def load(port: int, sessions: list[str], args: argparse.Namespace, pin: bool) -> dict:
    cmd = wrk_command(
        port,
        threads=args.threads,
        connections=args.connections,
        duration=args.duration,
        pin=pin,
        lua=LUA,
        script_args=["call", *sessions],
    )
    result, _ = run_wrk(cmd, args.duration)
    errors = sum(result["errors"].values()) + result["non2xx"] + result["mismatches"]
    if errors:
        raise BenchmarkError(f"{errors} errors: {result}")
    return {
        "requests_per_s": result["requests"] / (result["duration_us"] / 1e6),
        "p99_ms": result["latency_us"]["p99"] / 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    pin = can_pin()
    results: dict[str, list[dict]] = {"plain": [], "owner": [], "passed on": []}
    with tempfile.TemporaryDirectory() as directory:
        group = ["--peer-sockets-dir", directory, "--request-state-key", KEY]
        servers = [
            start("plain", [], pin),
            start("w0", ["--owner-name", "w0", *group], pin),
            start("w1", ["--owner-name", "w1", *group], pin),
        ]
        plain, w0, w1 = servers
        try:
            for server in servers:
                check_call(server, open_session(w0 if server is w1 else server))
            for _ in range(args.rounds):
                own = [open_session(plain) for _ in range(args.threads)]
                results["plain"].append(load(plain.port, own, args, pin))
                owned = [open_session(w0) for _ in range(args.threads)]
                results["owner"].append(load(w0.port, owned, args, pin))
                results["passed on"].append(load(w1.port, owned, args, pin))
        finally:
            for server in servers:
                server.stop()
    base = statistics.median(r["requests_per_s"] for r in results["plain"])
    summary = {}
    for name, runs in results.items():
        rate = statistics.median(r["requests_per_s"] for r in runs)
        p99 = statistics.median(r["p99_ms"] for r in runs)
        summary[name] = {"requests_per_s": round(rate), "p99_ms": p99, "ratio": rate / base}
        print(f"{name:>10}: {rate:9,.0f} calls/s  p99 {p99:6.2f} ms  {rate / base:5.2f}x plain")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
