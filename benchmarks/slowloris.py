"""Slowloris against a trio-mcp server: a normal client's latency while
thousands of connections trickle their request heads a line at a time.

    python benchmarks/slowloris.py [--connections 9000] [--addresses 1]
        [--seconds 10] [--rate N] [--reconnect] [--pin] [--json PATH]

One run, on loopback, bounded in time:

1. a server (``trio-mcp run examples/everything.py``, default settings) on
   127.0.0.1;
2. the normal client, ``trio-mcp bench --scenario call`` with 16 connections
   from 127.0.0.1 (closed loop, or open loop at ``--rate`` calls/s), for
   ``--seconds`` unloaded;
3. the attack, from ``--addresses`` other loopback addresses (127.0.0.2 and
   up): ``--connections`` connections, each sending a request line and then
   one header line a second, never ending its head (with ``--reconnect``,
   made again whenever the server drops it);
4. the normal client again, for ``--seconds``, while the attack goes on.

It prints, and writes to ``--json``, the normal client's calls per second and
p99 (overall and the worst second) in both phases, their ratio, and what the
attack saw (connections made, dropped with 408, refused with 503). The goal
(issue 22) is a loaded p99 at most 2x the unloaded one, throughout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = f"{ROOT / 'examples' / 'everything.py'}:server"
TRICKLE_S = 1.0
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pinned(cpus: str | None) -> list[str]:
    """The prefix that runs a command on `cpus` (nothing: anywhere)."""
    return ["taskset", "-c", cpus] if cpus else []


def pinned_cpus(parser: argparse.ArgumentParser) -> tuple[str, str]:
    """Where `--pin` puts the server with the clients measured (CPU 0) and the
    attacker (every other CPU)."""
    cpus = os.cpu_count() or 1
    if cpus < 2:
        parser.error("--pin needs at least 2 CPUs")
    return "0", f"1-{cpus - 1}"


def wait_until_up(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def bench(
    port: int, seconds: float, connections: int, rate: float | None, cpus: str | None = None
) -> dict[str, Any]:
    """One run of the normal client (open loop at `rate` calls/s, if given); its report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        subprocess.run(
            pinned(cpus)
            + [
                sys.executable,
                "-m",
                "trio_mcp",
                "bench",
                f"http://127.0.0.1:{port}/mcp",
                "--scenario",
                "call",
                "--connections",
                str(connections),
                "--duration",
                str(seconds),
                "--warmup",
                "1",
                "--quiet",
                "--json",
                str(out),
            ]
            + (["--rate", str(rate)] if rate else []),
            check=True,
            timeout=seconds + 120,
        )
        report: dict[str, Any] = json.loads(out.read_text())
    series = [row["p99_ms"] for row in report["series"] if row["p99_ms"] is not None]
    return {
        "calls_per_s": report["totals"]["requests_per_s"],
        "errors": report["totals"]["errors"],
        "p50_ms": report["latency_ms"]["p50"],
        "p99_ms": report["latency_ms"]["p99"],
        "worst_second_p99_ms": max(series) if series else None,
        "p99_ms_by_second": series,
    }


# ---- the attack (a process of its own) -----------------------------------------


async def trickler(
    port: int,
    source: str,
    until: float,
    counts: dict[str, int],
    ramp: trio.Semaphore,
    reconnect: bool = True,
) -> None:
    """One slowloris connection, made again whenever the server drops it
    (unless not `reconnect`)."""
    first = True
    while trio.current_time() < until and (reconnect or first):
        first = False
        sock = trio.socket.socket()
        try:
            async with ramp:
                await sock.bind((source, 0))
                await sock.connect(("127.0.0.1", port))
            counts["connected"] += 1
            await sock.send(HEAD)
            line = 0
            while trio.current_time() < until:
                with trio.move_on_after(TRICKLE_S):
                    data = await sock.recv(4096)
                    if data.startswith(b"HTTP/1.1 408"):
                        counts["dropped_408"] += 1
                    elif data.startswith(b"HTTP/1.1 503"):
                        counts["refused_503"] += 1
                    elif not data:
                        counts["closed"] += 1
                    break
                line += 1
                await sock.send(b"X-Trickle-%d: %d\r\n" % (line, line))
        except OSError:
            counts["errors"] += 1
            await trio.sleep(0.1)
        finally:
            sock.close()


async def attack(
    port: int, connections: int, addresses: int, seconds: float, reconnect: bool
) -> dict[str, int]:
    counts = {"connected": 0, "dropped_408": 0, "refused_503": 0, "closed": 0, "errors": 0}
    until = trio.current_time() + seconds
    ramp = trio.Semaphore(256)  # connects in flight at once
    async with trio.open_nursery() as nursery:
        for n in range(connections):
            source = f"127.0.0.{2 + n % addresses}"
            nursery.start_soon(trickler, port, source, until, counts, ramp, reconnect)
    return counts


def attack_main(args: argparse.Namespace) -> int:
    raise_fd_limit()
    counts = trio.run(
        attack, args.port, args.connections, args.addresses, args.seconds, args.reconnect
    )
    print(json.dumps(counts))
    return 0


# ---- the run ----------------------------------------------------------------------


def server_usage(pid: int) -> dict[str, Any]:
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    return {"fds": fds, "rss_mb": round(rss_kb / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=9000)
    parser.add_argument("--addresses", type=int, default=1, help="attacking addresses (<= 250)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each measured phase")
    parser.add_argument("--clients", type=int, default=16, help="the normal client's connections")
    parser.add_argument(
        "--rate",
        type=float,
        help="the normal client sends this many calls/s, open loop (default: closed loop)",
    )
    parser.add_argument(
        "--reconnect",
        action="store_true",
        help="make each connection again when the server drops it (a churn attack)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server and the normal client on CPU 0, the attacker on the other CPUs "
        "(taskset), so that the attack's own CPU does not delay the calls measured",
    )
    parser.add_argument(
        "--apart",
        action="store_true",
        help="with --pin: the server alone on CPU 0, the normal client on the other CPUs "
        "and the attacker there too at the lowest priority (nice 19), so that the normal "
        "client's own work does not wait for the server's CPU (as a remote client's would not)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--attack", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.addresses <= 250:
        parser.error("--addresses must be in 1..250")
    if args.attack:
        return attack_main(args)
    raise_fd_limit()
    port = free_port()
    served_on, attacked_from = pinned_cpus(parser) if args.pin else (None, None)
    if args.apart and not args.pin:
        parser.error("--apart needs --pin")
    client_on = attacked_from if args.apart else served_on
    server = subprocess.Popen(
        pinned(served_on)
        + [sys.executable, "-m", "trio_mcp", "run", EVERYTHING, "--port", str(port)]
        + ["--log-level", "warning"],
        preexec_fn=raise_fd_limit,
    )
    attacker = None
    try:
        wait_until_up(port)
        quiet = bench(port, args.seconds, args.clients, args.rate, client_on)
        before = server_usage(server.pid)
        ramp_s = max(2.0, args.connections / 3000)
        attack_s = ramp_s + args.seconds + 5  # (the bench's start-up and warm-up too)
        attacker = subprocess.Popen(
            pinned(attacked_from)
            + (["nice", "-n", "19"] if args.apart else [])
            + [sys.executable, __file__, "--attack", "--port", str(port)]
            + ["--connections", str(args.connections), "--addresses", str(args.addresses)]
            + ["--seconds", str(attack_s)]
            + (["--reconnect"] if args.reconnect else []),
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(ramp_s)
        during = server_usage(server.pid)
        loaded = bench(port, args.seconds, args.clients, args.rate, client_on)
        output, _ = attacker.communicate(timeout=attack_s + 30)  # (it stops by itself)
        attacked = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
        result = {
            "connections": args.connections,
            "addresses": args.addresses,
            "seconds": args.seconds,
            "reconnect": args.reconnect,
            "rate": args.rate,
            "pinned": args.pin,
            "apart": args.apart,
            "unloaded": quiet,
            "loaded": loaded,
            "p99_ratio": round(loaded["p99_ms"] / quiet["p99_ms"], 2),
            "worst_second_p99_ratio": round(
                loaded["worst_second_p99_ms"] / quiet["worst_second_p99_ms"], 2
            ),
            "attack": attacked,
            "server_before": before,
            "server_during": during,
            "server_exited": server.poll() is not None,
        }
    finally:
        if attacker is not None and attacker.poll() is None:
            attacker.kill()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
