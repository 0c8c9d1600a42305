"""trio-mcp on Redis side by side with the memory stores and the official
Python SDK, under wrk: ``tools/call`` (session, JSON) and ``tools/call`` with
3 progress notifications (SSE), answered by the session's owner and by a
replica that does not own it.

    PYTHONPATH=src python benchmarks/redis_suite.py [--rounds 3] [--duration 10]
        [--warmup 2] [--scenarios call,progress-sse] [--json PATH]

Modes, each a fresh set of processes per run (suite.py's fixture, checks and
wrk script): ``python-sdk`` (memory), ``memory`` (trio-mcp, memory stores),
``redis-owner`` (one replica on a fresh redis-server; the sessions are made
on it and loaded on it), ``redis-other`` (two replicas; the sessions are made
on the first and loaded on the second, which reads them from Redis). The
server under load and redis-server share CPU 0 (one core for the whole
service, as the SDK has), wrk runs on CPU 1. Ratios are taken round by
round (a mode against the SDK's or the memory run of the same round), then
the median. Also the Redis commands per request and the time Redis spent in
them (INFO commandstats), and redis-server's CPU per request (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import SERVER_CPU, ServerProcess, can_pin, free_port, run_wrk, wrk_command
from load_mcp import open_session
from suite import LUA, SCENARIOS, SERVERS, check_call, check_progress, fast_uvicorn_dir
from suite import server_command as peer_command

MODES = ("python-sdk", "memory", "redis-owner", "redis-other")
#: What the stores send Redis themselves (the rest runs inside their scripts).
CLIENT_COMMANDS = ("evalsha", "eval", "script", "publish")


class Redis:
    """A redis-server of its own on a loopback port, without persistence."""

    def __init__(self, pin: bool) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="trio-mcp-redis-suite-")
        cmd = [
            shutil.which("redis-server") or "redis-server",
            "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", self.dir,
        ]  # fmt: skip
        if pin:
            cmd = ["taskset", "-c", SERVER_CPU, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args: str) -> str:
        """One command's reply, as text (redis-cli)."""
        found = subprocess.run(
            [shutil.which("redis-cli") or "redis-cli", "-p", str(self.port), *args],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return found.stdout.strip()

    def commands(self) -> int:
        """Commands the clients sent Redis (INFO commandstats): every command but
        those the scripts ran, which Redis counts under their own names."""
        text = self.cli("INFO", "commandstats")
        calls = dict(re.findall(r"cmdstat_(\w+):calls=(\d+)", text))
        return sum(int(calls.get(name, 0)) for name in CLIENT_COMMANDS)

    def script_usec(self) -> int:
        """Microseconds Redis spent in the stores' commands (INFO commandstats)."""
        text = self.cli("INFO", "commandstats")
        usec = dict(re.findall(r"cmdstat_(\w+):calls=\d+,usec=(\d+)", text))
        return sum(int(usec.get(name, 0)) for name in CLIENT_COMMANDS)

    def cpu_seconds(self) -> float:
        """redis-server's CPU time so far (user and system, /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def trio_mcp(port: int, pin: bool, redis_url: str = "") -> ServerProcess:
    here = Path(__file__).resolve().parent
    cmd = [sys.executable, str(here / "_suite_server.py"), "--port", str(port)]
    if redis_url:
        cmd += ["--redis-url", redis_url]
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
    env = {"PYTHONPATH": str(here.parent / "src"), "TRIO_MCP_REQUIRE_EXTENSIONS": "1"}
    return ServerProcess("trio-mcp", cmd, env, port)


def run(mode: str, scenario: str, args: argparse.Namespace, pin: bool, links: Path) -> dict:
    """One measured run of `scenario` in `mode`: its record."""
    spec = SCENARIOS[scenario]
    sse = spec.sse
    check = check_progress if scenario == "progress-sse" else check_call
    redis = Redis(pin) if mode.startswith("redis") else None
    started: list[ServerProcess] = []
    try:
        if mode == "python-sdk":
            port = free_port()
            cmd, env = peer_command(mode, port, sse=sse, pin=pin, use_ext=True, links=links)
            started.append(ServerProcess(mode, cmd, env, port))
        else:
            for _ in range(2 if mode == "redis-other" else 1):
                started.append(trio_mcp(free_port(), pin, redis.url if redis else ""))
        for server in started:
            server.wait_ready(timeout=30)
        made_on, loaded = started[0], started[-1]
        check(loaded, SERVERS["trio-mcp" if mode != "python-sdk" else mode], sse)

        def wrk(duration: int) -> list[str]:
            sessions = [open_session(made_on) for _ in range(args.threads)]
            return wrk_command(
                loaded.port,
                threads=args.threads,
                connections=args.connections,
                duration=duration,
                pin=pin,
                lua=LUA,
                script_args=[spec.lua_mode, *sessions],
            )

        run_wrk(wrk(args.warmup), args.warmup)
        load = wrk(args.duration)
        before = redis.commands() if redis else 0
        usec_before = redis.script_usec() if redis else 0
        redis_cpu_before = redis.cpu_seconds() if redis else 0.0
        cpu_before = loaded.cpu_seconds()
        result, _ = run_wrk(load, args.duration)
        cpu = (loaded.cpu_seconds() or 0.0) - (cpu_before or 0.0)
        redis_cpu = redis.cpu_seconds() - redis_cpu_before if redis else 0.0
        after = redis.commands() if redis else 0
        usec = redis.script_usec() - usec_before if redis else 0
        check(loaded, SERVERS["trio-mcp" if mode != "python-sdk" else mode], sse)
    finally:
        for server in started:
            server.stop()
        if redis:
            redis.stop()
    e = result["errors"]
    errors = e["connect"] + e["read"] + e["write"] + e["timeout"]
    errors += result["non2xx"] + result["mismatches"]
    seconds = result["duration_us"] / 1e6
    requests = result["requests"]
    return {
        "mode": mode,
        "scenario": scenario,
        "req_per_s": requests / seconds,
        "p99_ms": result["latency_us"]["p99"] / 1000,
        "errors": errors,
        "server_cpu_us_per_request": cpu * 1e6 / max(requests, 1),
        "redis_commands_per_request": (after - before) / max(requests, 1),
        "redis_cpu_us_per_request": redis_cpu * 1e6 / max(requests, 1),
        "redis_command_us_per_request": usec / max(requests, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--scenarios", default="call,progress-sse")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    pin = can_pin()
    links = fast_uvicorn_dir()
    runs: list[dict[str, Any]] = []
    scenarios = args.scenarios.split(",")
    for round_number in range(1, args.rounds + 1):
        for scenario in scenarios:
            for mode in MODES:
                record = run(mode, scenario, args, pin, links)
                record["round"] = round_number
                runs.append(record)
                print(
                    f"  round {round_number}  {scenario:13} {mode:12} "
                    f"{record['req_per_s']:9.0f} req/s  p99 {record['p99_ms']:7.2f} ms  "
                    f"errors {record['errors']}  CPU {record['server_cpu_us_per_request']:6.1f}"
                    f" us/req  Redis {record['redis_commands_per_request']:.4f} round trips/req"
                    f" {record['redis_cpu_us_per_request']:.1f} us CPU/req"
                    f" ({record['redis_command_us_per_request']:.1f} in commands)",
                    flush=True,
                )
    print(
        f"\n{'scenario':13} {'mode':12} {'req/s':>9} {'vs SDK':>7} {'vs memory':>9}"
        f" {'CPU us/req':>10} {'Redis RT/req':>13} {'Redis CPU us/req':>16}"
    )
    for scenario in scenarios:
        for mode in MODES:
            mine = [r for r in runs if r["scenario"] == scenario and r["mode"] == mode]

            def ratio(
                to: str, mine: list[dict[str, Any]] = mine, scenario: str = scenario
            ) -> float:
                return statistics.median(
                    r["req_per_s"]
                    / next(
                        o["req_per_s"]
                        for o in runs
                        if o["scenario"] == scenario
                        and o["mode"] == to
                        and o["round"] == r["round"]
                    )
                    for r in mine
                )

            print(
                f"{scenario:13} {mode:12} "
                f"{statistics.median(r['req_per_s'] for r in mine):9.0f} "
                f"{ratio('python-sdk'):6.2f}x {ratio('memory'):8.2f}x "
                f"{statistics.median(r['server_cpu_us_per_request'] for r in mine):10.1f} "
                f"{statistics.median(r['redis_commands_per_request'] for r in mine):13.4f} "
                f"{statistics.median(r['redis_cpu_us_per_request'] for r in mine):16.1f}"
            )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
