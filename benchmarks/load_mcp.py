"""Load benchmark: MCP tools/call on trio-mcp against the official Python SDK server.

Run from a checkout with the dev interpreter (the SDK server runs with the
interpreter that ``scripts/peers`` set up, ``py/bin/python`` under
``$TRIO_MCP_PEERS``, by default ``.peers/`` in the checkout)::

    PYTHONPATH=src python benchmarks/load_mcp.py [--duration 10] [--rounds 1]
        [--connections 64] [--servers trio-mcp,python-sdk] [--json PATH]

Both servers expose the same ``echo(text: str) -> str`` tool over Streamable
HTTP at ``/mcp`` in stateful session mode with JSON (not SSE) responses:
``examples/everything.py`` for trio-mcp, ``benchmarks/peers/python_sdk_server.py``
(mcp 2.3.0 on uvicorn) for the SDK. For each server, on a free 127.0.0.1 port,
the script opens one MCP session per wrk thread (initialize +
notifications/initialized), checks one real tools/call per server, warms up,
then loads it with ``wrk -t2 -c64 --latency -s benchmarks/suite.lua`` (its ``call`` or
``call2026`` scenario): every
request is a tools/call of echo("hello") on the thread's session with a fresh
id. With taskset and two or more CPUs the server is pinned to CPU 0 and wrk to
CPU 1. Servers alternate; with ``--rounds N`` the order repeats N times and the
medians are reported. The helpers come from ``load_echo.py``.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import (
    ROOT,
    SERVER_CPU,
    WRK_CPU,
    BenchmarkError,
    Run,
    ServerProcess,
    can_pin,
    compiled_extensions_present,
    free_port,
    loadavg_now,
    machine_info,
    peers_dir,
    print_summary,
    run_record,
    run_rounds,
    run_wrk,
    wrk_command,
)

HERE = Path(__file__).resolve().parent
LUA = HERE / "suite.lua"
MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
PEER_PYTHON = peers_dir() / "py" / "bin" / "python"
SERVERS = ("trio-mcp", "python-sdk")
PACKAGES = ("trio", "orjson", "jsonschema-rs", "Cython")
PEER_PACKAGES = ("mcp", "uvicorn", "starlette", "pydantic", "anyio", "httptools", "uvloop")
PROTOCOL = "2025-11-25"
TEXT = "hello"
CALL = {
    "jsonrpc": "2.0",
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": TEXT}},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def server_command(
    name: str, port: int, *, pin: bool, use_ext: bool
) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment that start MCP server `name` on `port`."""
    env: dict[str, str] = {}
    if name == "trio-mcp":
        cmd = [sys.executable, str(ROOT / "examples" / "everything.py"), "--port", str(port)]
        env["PYTHONPATH"] = str(ROOT / "src")
        if use_ext:
            env["TRIO_MCP_REQUIRE_EXTENSIONS"] = "1"
    elif name == "python-sdk":
        cmd = [str(PEER_PYTHON), str(HERE / "peers" / "python_sdk_server.py"), "--port", str(port)]
    else:
        raise ValueError(name)
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
    return cmd, env


# -- MCP over plain HTTP -------------------------------------------------------


def _post(
    server: ServerProcess, body: dict[str, Any], session: str | None
) -> tuple[int, str, str | None, bytes]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session == MODERN:  # the stateless era: headers and _meta instead of a session
        body = {**body, "params": {**body.get("params", {}), "_meta": MODERN_META}}
        headers["MCP-Protocol-Version"] = MODERN
        headers["Mcp-Method"] = body["method"]
        if "name" in body["params"]:
            headers["Mcp-Name"] = body["params"]["name"]
    elif session is not None:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = PROTOCOL
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return (
            resp.status,
            resp.getheader("content-type", ""),
            resp.getheader("mcp-session-id"),
            data,
        )
    except (OSError, http.client.HTTPException) as exc:
        raise server.fail(f"POST {body.get('method')} failed: {exc!r}") from exc
    finally:
        conn.close()


def open_session(server: ServerProcess, era: str = "2025") -> str:
    """initialize + notifications/initialized; the new session's id (2026: no session)."""
    if era == "2026":
        return MODERN
    status, ctype, sid, data = _post(server, INITIALIZE, None)
    if status != 200 or not sid:
        raise server.fail(
            f"initialize answered {status} {ctype!r}, session {sid!r}: {data[:300]!r}"
        )
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _, data = _post(server, note, sid)
    if status != 202:
        raise server.fail(f"notifications/initialized answered {status}, not 202: {data[:300]!r}")
    return sid


def check_call(server: ServerProcess, sid: str) -> None:
    """One real tools/call must come back 200 application/json with the echoed text."""
    status, ctype, _, data = _post(server, {**CALL, "id": 7}, sid)
    if status != 200 or ctype.split(";")[0].strip().lower() != "application/json":
        raise server.fail(f"tools/call answered {status} {ctype!r}: {data[:300]!r}")
    try:
        msg = json.loads(data)
        text = msg["result"]["content"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise server.fail(f"tools/call answered an unexpected body: {data[:300]!r}") from exc
    if msg.get("id") != 7 or text != TEXT or msg["result"].get("isError"):
        raise server.fail(f"tools/call answered {data[:300]!r}, not the text {TEXT!r}")
    if b'"text":"hello"' not in data:  # what suite.lua looks for in its samples
        raise server.fail(f'tools/call body lacks the literal "text":"hello": {data[:300]!r}')


# -- one server ----------------------------------------------------------------


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

    def wrk(duration: int) -> list[str]:
        # fresh sessions for every wrk run, so ids never collide with leftovers
        if args.era == "2026":
            script_args = ["call2026"]
        else:
            script_args = ["call", *(open_session(server) for _ in range(args.threads))]
        return wrk_command(
            port,
            threads=args.threads,
            connections=args.connections,
            duration=duration,
            pin=pin,
            lua=LUA,
            script_args=script_args,
        )

    try:
        server.wait_ready()
        check_call(server, open_session(server, args.era))
        if args.warmup > 0:
            run_wrk(wrk(args.warmup), args.warmup)
        load = wrk(args.duration)
        cpu_before = server.cpu_seconds()
        result, text = run_wrk(load, args.duration)
        cpu_after = server.cpu_seconds()
        if server.proc.poll() is not None:
            raise server.fail(f"died during the load run (exit {server.proc.returncode})")
        check_call(server, open_session(server, args.era))  # still correct after the load
        commands.setdefault(
            name,
            {
                "server": shlex.join(cmd),
                "server_env": env,
                "wrk": shlex.join(load[: load.index("--")])
                + " -- "
                + " ".join(f"SID{i + 1}" for i in range(args.threads)),
            },
        )
    finally:
        server.stop()
    seconds = result["duration_us"] / 1e6
    e = result["errors"]
    # wrk's own "status" count is the ≥ 400 subset of non2xx
    errors = e["connect"] + e["read"] + e["write"] + e["timeout"]
    errors += result["non2xx"] + result["mismatches"]
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


def peer_versions(env: dict[str, str] | None = None) -> dict[str, str | None]:
    """Package versions in the SDK interpreter (with `env` added to its environment)."""
    code = (
        "import json, importlib.metadata as m\n"
        "def v(p):\n"
        "    try: return m.version(p)\n"
        "    except m.PackageNotFoundError: return None\n"
        f"print(json.dumps({{p: v(p) for p in {list(PEER_PACKAGES)!r}}}))"
    )
    out = subprocess.run(
        [str(PEER_PYTHON), "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **(env or {})},
    )
    try:
        versions: dict[str, str | None] = json.loads(out.stdout)
    except ValueError:
        return {"error": out.stderr.strip()[-500:]}
    ver = subprocess.run([str(PEER_PYTHON), "-V"], capture_output=True, text=True, timeout=30)
    versions["python"] = ver.stdout.split()[-1] if ver.stdout else None
    return versions


def ensure_extensions() -> bool:
    """Build the compiled extensions in place when any is missing; whether all exist."""
    if compiled_extensions_present():
        return True
    print("building the compiled extensions (setup.py build_ext --inplace)", flush=True)
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=ROOT,
        timeout=600,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    return compiled_extensions_present()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per load run (whole)")
    parser.add_argument(
        "--warmup", type=int, default=2, help="seconds of wrk warm-up (whole; 0: none)"
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (one MCP session each)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all servers N times")
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated subset")
    parser.add_argument("--no-pin", action="store_true", help="do not use taskset")
    parser.add_argument("--json", type=Path, help="write results here")
    parser.add_argument(
        "--era",
        choices=["2025", "2026"],
        default="2025",
        help="2025: session JSON mode (2025-11-25); 2026: stateless 2026-07-28 requests",
    )
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in SERVERS]
    if unknown or not names:
        parser.error(f"unknown servers {unknown}; pick from {', '.join(SERVERS)}")
    if shutil.which("wrk") is None:
        parser.error("wrk is not on PATH")
    if "python-sdk" in names and not PEER_PYTHON.exists():
        parser.error(f"{PEER_PYTHON} is missing; run scripts/peers first (or set TRIO_MCP_PEERS)")
    pin = not args.no_pin and can_pin()
    use_ext = "trio-mcp" in names and ensure_extensions()
    if "trio-mcp" in names and not use_ext:
        print(
            "NOTE: compiled extensions not built; trio-mcp runs its pure-Python twins",
            file=sys.stderr,
        )
    print(
        f"tools/call echo, duration {args.duration} s, warm-up {args.warmup} s, "
        f"wrk -t{args.threads} -c{args.connections} ({args.threads} sessions), "
        f"rounds {args.rounds}, "
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
    if "trio-mcp" in summary and "python-sdk" in summary:
        ours, theirs = summary["trio-mcp"], summary["python-sdk"]
        ratios["trio-mcp/python-sdk"] = ours["requests_per_s"] / theirs["requests_per_s"]
        print(f"req/s ratio trio-mcp/python-sdk: {ratios['trio-mcp/python-sdk']:.2f}")
        if ours["server_cpu_us_per_request"] and theirs["server_cpu_us_per_request"]:
            cpu_ratio = theirs["server_cpu_us_per_request"] / ours["server_cpu_us_per_request"]
            ratios["cpu_per_request python-sdk/trio-mcp"] = cpu_ratio
            print(f"CPU per request python-sdk/trio-mcp: {cpu_ratio:.2f}")

    if args.json:
        info = machine_info(use_ext, pin, PACKAGES)
        info["python_sdk_interpreter"] = {"path": str(PEER_PYTHON), **peer_versions()}
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": [sys.executable, *sys.argv],
            "settings": {
                "duration_s": args.duration,
                "warmup_s": args.warmup,
                "connections": args.connections,
                "wrk_threads": args.threads,
                "sessions_per_wrk_run": args.threads,
                "rounds": args.rounds,
                "protocol_version": PROTOCOL,
                "body": json.dumps({**CALL, "id": "<n>"}, separators=(",", ":")),
                "lua": str(LUA.relative_to(ROOT)),
            },
            "machine": info,
            "commands": commands,
            "summary": summary,
            "ratios": ratios,
            "runs": [run_record(r) for r in runs],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
