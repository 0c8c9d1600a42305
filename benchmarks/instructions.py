"""User-space instructions per operation of the real server, sockets and all.

Run from a checkout with the dev interpreter (valgrind must be installed)::

    PYTHONPATH=src python benchmarks/instructions.py [--scenario call|initialize|sse]
        [--protocol 2025-11-25|2026-07-28] [--requests 20000] [--connections 8]
        [--warmup 2000] [--json PATH] [--keep-dump PATH] [--server-args "--metrics /metrics ..."]
        [--redis]

Starts ``benchmarks/_suite_server.py`` (compiled extensions required) under
``valgrind --tool=callgrind`` on a free 127.0.0.1 port, sends ``--warmup``
operations with ``trio-mcp bench``, zeroes the counters (``callgrind_control
-z``), sends ``--requests`` more, dumps the counters (``callgrind_control -d``)
and stops the server. The result is the instructions the server process ran
in user space between zero and dump, divided by the operations: HTTP parsing,
the MCP layer, trio's run loop, the wrappers around every system call; not
the kernel's side of those calls. For ``--scenario initialize`` an operation
is a whole initialize + initialized + DELETE cycle. With ``--redis`` the
server keeps its sessions and events in a redis-server of its own (started
here, not under valgrind, on a loopback port): the count is then the
server's side of the Redis stores (coredis, the scripts' arguments and
answers), not redis-server's (``redis_instructions.py`` counts those).

Unlike a load test, the count barely moves from run to run (two runs of the
default settings differed by 0.15%), so it shows a change of one percent
that the machine's noise would hide; unlike ``micro_call.py`` it includes
the socket wrappers and trio's waits. Under valgrind the server runs about
50 times slower, so the client always has the next request waiting: the
count is that of a busy server. A run of the defaults takes about 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVER_SCRIPT = HERE / "_suite_server.py"


def total_instructions(dump: str) -> int:
    """The instruction total of a callgrind output file's text."""
    for line in dump.splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError("no totals or summary line in the callgrind output")


def newest_dump_instructions(directory: Path, keep_dump: str | None) -> int:
    """The instruction total of the newest callgrind dump in `directory`
    (copied to `keep_dump`, if given)."""
    dumps = sorted(directory.glob("callgrind.out.*"), key=lambda p: p.stat().st_mtime)
    if not dumps:
        raise SystemExit("callgrind wrote no dump")
    if keep_dump:
        shutil.copyfile(dumps[-1], keep_dump)
    return total_instructions(dumps[-1].read_text())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_accepting(
    port: int, proc: subprocess.Popen[bytes], limit_s: float, log: Path
) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            # (the server's own last lines, without valgrind's "==pid==" ones:
            # a stale compiled build, say, is refused with a message there)
            lines = log.read_text(errors="replace").splitlines()
            said = "\n".join([line for line in lines if not line.startswith("==")][-15:])
            raise SystemExit(f"the server exited early (status {proc.returncode}):\n{said}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the server did not accept within {limit_s:.0f} s")


def bench(
    args: argparse.Namespace, port: int, requests: int, env: dict[str, str], tmp: Path
) -> None:
    """Run `trio-mcp bench` for `requests` operations, all of which must succeed."""
    result_file = tmp / f"bench-{requests}.json"
    command = [
        sys.executable,
        "-m",
        "trio_mcp",
        "bench",
        f"http://127.0.0.1:{port}/mcp",
        "--scenario",
        args.scenario,
        "--protocol",
        args.protocol,
        "--connections",
        str(args.connections),
        "--requests",
        str(requests),
        "--warmup",
        "0",
        "--timeout",
        "120",
        "--quiet",
        "--json",
        str(result_file),
    ]
    if args.scenario == "sse":
        command += ["--tool", "progress"]  # the suite fixture's tool with 3 notifications
    done = subprocess.run(command, env=env, capture_output=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"trio-mcp bench failed: {done.stderr.decode()[-2000:]}")
    totals = json.loads(result_file.read_text())["totals"]
    if totals["errors"] or totals["ok"] != requests:
        raise SystemExit(f"trio-mcp bench: {totals['ok']} ok, {totals['errors']} errors")


def measure(args: argparse.Namespace) -> dict[str, object]:
    if not args.redis:
        return measure_with(args, [])
    from redis_suite import Redis  # (only here: it imports the whole suite)

    redis = Redis(pin=False)
    try:
        return measure_with(args, ["--redis-url", redis.url])
    finally:
        redis.stop()


def measure_with(args: argparse.Namespace, more_server_args: list[str]) -> dict[str, object]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with tempfile.TemporaryDirectory(prefix="trio-mcp-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        log = Path(tmp) / "server.log"
        server = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(SERVER_SCRIPT),
                "--port",
                str(port),
                *args.server_args,
                *more_server_args,
            ],
            env={**env, "TRIO_MCP_REQUIRE_EXTENSIONS": "1"},
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        try:
            wait_until_accepting(port, server, limit_s=300, log=log)
            if args.warmup:
                bench(args, port, args.warmup, env, Path(tmp))
            zero, dump = (
                ("callgrind_control", "-z", str(server.pid)),
                ("callgrind_control", "-d", str(server.pid)),
            )
            subprocess.run(zero, check=True, capture_output=True)
            started = time.monotonic()
            bench(args, port, args.requests, env, Path(tmp))
            subprocess.run(dump, check=True, capture_output=True)
            seconds = time.monotonic() - started
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=120)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        # the dump holds the counts since the zeroing; the file written at
        # exit (the plain name) holds only what came after the dump
        instructions = newest_dump_instructions(Path(tmp), args.keep_dump)
    return {
        "scenario": args.scenario,
        "protocol": args.protocol,
        "connections": args.connections,
        "redis": args.redis,
        "operations": args.requests,
        "instructions": instructions,
        "instructions_per_operation": round(instructions / args.requests),
        "seconds_under_valgrind": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["call", "initialize", "sse"], default="call")
    parser.add_argument("--protocol", choices=["2025-11-25", "2026-07-28"], default="2025-11-25")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--keep-dump", help="copy the callgrind dump here (for callgrind_annotate)")
    parser.add_argument(
        "--server-args",
        default="",
        help="more arguments for _suite_server.py, e.g. '--metrics /metrics --access-log FILE'",
    )
    parser.add_argument(
        "--redis",
        action="store_true",
        help="the server's stores in a redis-server started for the run (not under valgrind)",
    )
    args = parser.parse_args()
    args.server_args = args.server_args.split()
    result = measure(args)
    print(
        f"{result['instructions_per_operation']:,} instructions per operation "
        f"({args.scenario}, {args.protocol}{', Redis' if args.redis else ''}, "
        f"{args.requests:,} operations over "
        f"{args.connections} connections)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
