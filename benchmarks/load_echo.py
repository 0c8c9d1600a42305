"""Load benchmark: the trio-mcp echo server against uvicorn and hypercorn (trio worker).

Run from a checkout, with the interpreter that has the servers installed::

    PYTHONPATH=src python benchmarks/load_echo.py [--duration 10] [--rounds 1]
        [--connections 64] [--servers trio-mcp,uvicorn,hypercorn-trio] [--json PATH]

Each server runs the same echo app (``examples/echo.py`` for trio-mcp,
``benchmarks/peers/echo_asgi.py`` for the ASGI servers) as one process on a free
127.0.0.1 port. The script checks that a POST is echoed correctly, warms up
with wrk, then loads it with ``wrk -t2 -c64 --latency`` POSTing a ~100-byte
JSON-RPC body (``benchmarks/post.lua``). With taskset and two or more CPUs the
server is pinned to CPU 0 and wrk to CPU 1. Servers run one after the other;
with ``--rounds N`` the order repeats N times and the median is reported.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LUA = HERE / "post.lua"
BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"echo","arguments":{"text":"hello"}}}'
)
SERVERS = ("trio-mcp", "uvicorn", "hypercorn-trio")
EXT_MODULES = ("_httphead", "_headers", "_sentinel", "_sse")
PACKAGES = ("trio", "uvicorn", "httptools", "uvloop", "hypercorn", "Cython")
SERVER_CPU = "0"
WRK_CPU = "1"


class BenchmarkError(RuntimeError):
    pass


@dataclass
class Run:
    server: str
    round: int
    requests_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: int
    cpu_us_per_request: float | None
    loadavg_before: str
    raw: dict[str, Any] = field(default_factory=dict)


def run_record(r: Run) -> dict[str, Any]:
    """One run as it is written to the results JSON."""
    return {
        "server": r.server,
        "round": r.round,
        "requests_per_s": r.requests_per_s,
        "p50_ms": r.p50_ms,
        "p90_ms": r.p90_ms,
        "p99_ms": r.p99_ms,
        "errors": r.errors,
        "server_cpu_us_per_request": r.cpu_us_per_request,
        "loadavg_before": r.loadavg_before,
        "wrk": r.raw,
    }


# -- environment ---------------------------------------------------------------


def peers_dir() -> Path:
    """Where ``scripts/peers`` installed the peer servers: ``$TRIO_MCP_PEERS``,
    else ``.peers`` in this checkout, the same default as scripts/peers and the tests."""
    return Path(os.environ.get("TRIO_MCP_PEERS") or ROOT / ".peers")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def can_pin() -> bool:
    if shutil.which("taskset") is None:
        return False
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:
        return False
    return {int(SERVER_CPU), int(WRK_CPU)} <= cpus


def compiled_extensions_present() -> bool:
    pkg = ROOT / "src" / "trio_mcp"
    return all(any(pkg.glob(f"{name}.*.so")) for name in EXT_MODULES)


def server_command(
    name: str, port: int, *, pin: bool, use_ext: bool
) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment that start server `name` on `port`."""
    py = sys.executable
    env: dict[str, str] = {}
    if name == "trio-mcp":
        cmd = [py, str(ROOT / "examples" / "echo.py"), "--port", str(port)]
        env["PYTHONPATH"] = str(ROOT / "src")
        if use_ext:
            env["TRIO_MCP_REQUIRE_EXTENSIONS"] = "1"
    elif name == "uvicorn":
        cmd = [
            py,
            "-m",
            "uvicorn",
            "--app-dir",
            str(HERE / "peers"),
            "echo_asgi:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--http",
            "httptools",
            "--loop",
            "uvloop",
            "--no-access-log",
            "--log-level",
            "warning",
        ]
    elif name == "hypercorn-trio":
        # --workers 0 serves in this process (the default 1 forks a worker child).
        cmd = [
            py,
            "-m",
            "hypercorn",
            "--worker-class",
            "trio",
            "--workers",
            "0",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "echo_asgi:app",
        ]
        env["PYTHONPATH"] = str(HERE / "peers")
    else:
        raise ValueError(name)
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
    return cmd, env


def wrk_command(
    port: int,
    *,
    threads: int,
    connections: int,
    duration: int,
    pin: bool,
    lua: Path = LUA,
    script_args: Sequence[str] = (),
) -> list[str]:
    """wrk against /mcp on `port`; `script_args` go after ``--`` to the Lua init(args)."""
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration}s",
        "--latency",
        "--timeout",
        "5s",
        "-s",
        str(lua),
        f"http://127.0.0.1:{port}/mcp",
    ]
    if script_args:
        cmd += ["--", *script_args]
    if pin:
        cmd = ["taskset", "-c", WRK_CPU, *cmd]
    return cmd


# -- one server ----------------------------------------------------------------


class ServerProcess:
    def __init__(self, name: str, cmd: list[str], env: dict[str, str], port: int) -> None:
        self.name = name
        self.cmd = cmd
        self.port = port
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def fail(self, message: str) -> BenchmarkError:
        return BenchmarkError(f"{self.name}: {message}\n--- server output ---\n{self.output()}")

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise self.fail(f"exited with {self.proc.returncode} before answering")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise self.fail(f"did not accept connections within {timeout} s")

    def check_echo(self) -> None:
        """Two POSTs on one keep-alive connection must come back byte for byte."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            for _ in range(2):
                conn.request(
                    "POST", "/mcp", body=BODY, headers={"Content-Type": "application/json"}
                )
                resp = conn.getresponse()
                body = resp.read()
                ctype = resp.getheader("content-type", "")
                if resp.status != 200:
                    raise self.fail(f"POST /mcp answered {resp.status}, not 200")
                if ctype.split(";")[0].strip().lower() != "application/json":
                    raise self.fail(f"POST /mcp answered content-type {ctype!r}")
                if body != BODY:
                    raise self.fail(f"POST /mcp answered {body!r}, not the request body {BODY!r}")
        except (OSError, http.client.HTTPException) as exc:
            raise self.fail(f"echo check failed: {exc!r}") from exc
        finally:
            conn.close()

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server process so far (Linux only)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(
                    f"  {self.name} (pid {self.proc.pid}) ignored SIGTERM for 5 s: SIGKILL",
                    file=sys.stderr,
                )
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_wrk(cmd: list[str], duration: float) -> tuple[dict[str, Any], str]:
    try:
        out = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=duration + 30, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"wrk did not finish in time: {shlex.join(cmd)}") from exc
    if out.returncode != 0:
        raise BenchmarkError(f"wrk failed ({out.returncode}): {out.stderr}{out.stdout}")
    for line in out.stdout.splitlines():
        if line.startswith("WRK_RESULT "):
            return json.loads(line[len("WRK_RESULT ") :]), out.stdout
    raise BenchmarkError(f"no WRK_RESULT line in wrk output:\n{out.stdout}\n{out.stderr}")


def bench_one(
    name: str,
    round_no: int,
    args: argparse.Namespace,
    *,
    pin: bool,
    use_ext: bool,
    commands: dict[str, Any],
) -> Run:
    loadavg = loadavg_now()
    port = free_port()
    cmd, env = server_command(name, port, pin=pin, use_ext=use_ext)
    server = ServerProcess(name, cmd, env, port)
    try:
        server.wait_ready()
        server.check_echo()
        if args.warmup > 0:
            warm = wrk_command(
                port,
                threads=args.threads,
                connections=args.connections,
                duration=args.warmup,
                pin=pin,
            )
            run_wrk(warm, args.warmup)
        load = wrk_command(
            port,
            threads=args.threads,
            connections=args.connections,
            duration=args.duration,
            pin=pin,
        )
        cpu_before = server.cpu_seconds()
        result, text = run_wrk(load, args.duration)
        cpu_after = server.cpu_seconds()
        if server.proc.poll() is not None:
            raise server.fail(f"died during the load run (exit {server.proc.returncode})")
        server.check_echo()  # still correct after the load
        commands.setdefault(
            name, {"server": shlex.join(cmd), "server_env": env, "wrk": shlex.join(load)}
        )
    finally:
        server.stop()
    seconds = result["duration_us"] / 1e6
    errors = sum(result["errors"].values())
    lat = result["latency_us"]
    cpu_per_request = None
    if cpu_before is not None and cpu_after is not None:
        result["server_cpu_s"] = round(cpu_after - cpu_before, 3)
        cpu_per_request = (cpu_after - cpu_before) * 1e6 / max(result["requests"], 1)
    result["wrk_output"] = text
    return Run(
        server=name,
        round=round_no,
        requests_per_s=result["requests"] / seconds,
        p50_ms=lat["p50"] / 1000,
        p90_ms=lat["p90"] / 1000,
        p99_ms=lat["p99"] / 1000,
        errors=errors,
        cpu_us_per_request=cpu_per_request,
        loadavg_before=loadavg,
        raw=result,
    )


# -- reporting -----------------------------------------------------------------


def loadavg_now() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def median_of(runs: list[Run]) -> dict[str, Any]:
    cpu = [r.cpu_us_per_request for r in runs if r.cpu_us_per_request is not None]
    return {
        "requests_per_s": statistics.median(r.requests_per_s for r in runs),
        "p50_ms": statistics.median(r.p50_ms for r in runs),
        "p90_ms": statistics.median(r.p90_ms for r in runs),
        "p99_ms": statistics.median(r.p99_ms for r in runs),
        "errors": sum(r.errors for r in runs),
        "server_cpu_us_per_request": statistics.median(cpu) if cpu else None,
        "rounds": len(runs),
    }


def machine_info(use_ext: bool, pin: bool, packages: Sequence[str] = PACKAGES) -> dict[str, Any]:
    from importlib import metadata

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for pkg in packages:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    try:
        wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=5)
        wrk_version = (wrk.stdout + wrk.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        wrk_version = None
    probe = subprocess.run(
        [sys.executable, "-c", "import trio_mcp._speedups as s; print(s.USING_EXTENSIONS)"],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT / "src"),
            **({"TRIO_MCP_REQUIRE_EXTENSIONS": "1"} if use_ext else {}),
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    return {
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "packages": versions,
        "wrk": wrk_version,
        "trio_mcp_extensions_in_use": probe.stdout.strip() == "True",
        "pinned": {"server_cpu": SERVER_CPU, "wrk_cpu": WRK_CPU} if pin else None,
    }


def _us(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def run_rounds(
    names: list[str],
    args: argparse.Namespace,
    bench: Callable[..., Run],
    *,
    pin: bool,
    use_ext: bool,
) -> tuple[list[Run], dict[str, Any]]:
    """Run `bench` for every server, round after round, printing each run."""
    runs: list[Run] = []
    commands: dict[str, Any] = {}
    width = max(len(name) for name in names)
    for round_no in range(1, args.rounds + 1):
        for name in names:
            run = bench(name, round_no, args, pin=pin, use_ext=use_ext, commands=commands)
            runs.append(run)
            print(
                f"  round {round_no} {name:{width}} {run.requests_per_s:10.0f} req/s  "
                f"p50 {run.p50_ms:6.2f} ms  p99 {run.p99_ms:6.2f} ms  errors {run.errors}  "
                f"cpu/req {_us(run.cpu_us_per_request)} us  (loadavg before {run.loadavg_before})",
                flush=True,
            )
    return runs, commands


def print_summary(names: list[str], runs: list[Run]) -> dict[str, dict[str, Any]]:
    """The median of each server's runs, printed as a table."""
    summary = {name: median_of([r for r in runs if r.server == name]) for name in names}
    width = max(len(name) for name in names) + 1
    print()
    print(
        f"{'server':{width}} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} "
        f"{'cpu us/req':>11}"
    )
    for name, s in summary.items():
        print(
            f"{name:{width}} {s['requests_per_s']:10.0f} {s['p50_ms']:8.2f} "
            f"{s['p99_ms']:8.2f} {s['errors']:7d} {_us(s['server_cpu_us_per_request']):>11}"
        )
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per load run (whole)")
    parser.add_argument(
        "--warmup", type=int, default=2, help="seconds of wrk warm-up (whole; 0: none)"
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all servers N times")
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated subset")
    parser.add_argument("--no-pin", action="store_true", help="do not use taskset")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in SERVERS]
    if unknown or not names:
        parser.error(f"unknown servers {unknown}; pick from {', '.join(SERVERS)}")
    if shutil.which("wrk") is None:
        parser.error("wrk is not on PATH")
    pin = not args.no_pin and can_pin()
    use_ext = compiled_extensions_present()
    if "trio-mcp" in names and not use_ext:
        print(
            "NOTE: compiled extensions not built; trio-mcp runs its pure-Python twins",
            file=sys.stderr,
        )
    print(
        f"duration {args.duration:g} s, warm-up {args.warmup:g} s, wrk -t{args.threads} "
        f"-c{args.connections}, rounds {args.rounds}, "
        + (f"server on CPU {SERVER_CPU}, wrk on CPU {WRK_CPU}" if pin else "not pinned"),
        flush=True,
    )

    try:
        runs, commands = run_rounds(names, args, bench_one, pin=pin, use_ext=use_ext)
    except BenchmarkError as exc:
        print(f"\nABORTED: {exc}", file=sys.stderr)
        return 1

    summary = print_summary(names, runs)
    ratios: dict[str, float] = {}
    if "trio-mcp" in summary:
        ours = summary["trio-mcp"]["requests_per_s"]
        for peer in ("uvicorn", "hypercorn-trio"):
            if peer in summary:
                ratios[f"trio-mcp/{peer}"] = ours / summary[peer]["requests_per_s"]
                print(f"req/s ratio trio-mcp/{peer}: {ratios[f'trio-mcp/{peer}']:.2f}")

    if args.json:
        info = machine_info(use_ext, pin)
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": [sys.executable, *sys.argv],
            "settings": {
                "duration_s": args.duration,
                "warmup_s": args.warmup,
                "connections": args.connections,
                "wrk_threads": args.threads,
                "rounds": args.rounds,
                "body": BODY.decode(),
            },
            "machine": info,
            "commands": commands,
            "summary": summary,
            "ratios_requests_per_s": ratios,
            "runs": [run_record(r) for r in runs],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
