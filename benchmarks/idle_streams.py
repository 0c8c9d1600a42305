"""A normal client's latency, and the server's garbage collections, while many
idle GET streams are open in one process.

    PYTHONPATH=src python benchmarks/idle_streams.py [--streams 10000] [--seconds 60]
        [--clients 16] [--set NAME=VALUE ...] [--json PATH]

One run, on loopback, every process stopping by itself:

1. the server: ``examples/everything.py`` under ``run_mcp`` (so the trio
   tweaks, the paced full collections and whatever ``run`` does about the
   collector apply), with ``max_sessions``, ``max_sessions_per_client`` and
   ``max_connections_per_address`` raised to fit the streams (the output says
   so), ``--set`` overriding any other ``ServerConfig`` field. A
   ``gc.callbacks`` hook in it records every collection (generation, start,
   duration), written out when it stops; a ``census`` tool counts the objects
   the collector tracks, by type;
2. the normal client, ``trio-mcp bench --scenario call`` (closed loop,
   ``--clients`` connections) for ``--seconds`` with no stream open;
3. ``--streams`` idle 2025-11-25 GET streams, one session each, opened and
   held by ``trio-mcp bench --scenario idle-streams`` (a process of its own;
   it reads only the keepalive comments), until the server holds them all;
4. the normal client again for ``--seconds``, with the streams open.

It prints (and writes to ``--json``) p50, p99 and p99.9 of both phases and
their p99 ratio, the tracked objects per open stream (and the types that grew
most), and, for each phase, the number and the longest duration of each
generation's collections in the server. The goal (issue 24): a p99 ratio of
at most 2 and no full collection of 50 ms or more while the streams are open.

Both this script and the server raise their open-files limit to the hard
limit; the server needs one descriptor per stream and some to spare, so the
run says so and stops when the hard limit is too low. With taskset and two
CPUs, the server runs on CPU 0 and the clients on CPU 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FD_SPARE = 512  # the server's descriptors beyond one per stream
PROTOCOL = "2025-11-25"
POST_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL,
}


# ---- the server (a process of its own) -------------------------------------------


def raise_fd_limit() -> int:
    """Raise the soft open-files limit to the hard one; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft


def serve(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "examples"))
    from everything import server as app

    from trio_mcp import MCPConfig, ServerConfig, run_mcp

    raise_fd_limit()
    # (generation, start, wall seconds, CPU seconds, objects walked, collected)
    collections: list[tuple[int, float, float, float, int, int]] = []
    started = [0.0, 0.0, 0]
    clock = time.monotonic  # (CLOCK_MONOTONIC: the same clock in every process)
    cpu = time.thread_time  # (a pause's own work, whatever else the machine runs)

    def record(phase: str, info: dict[str, int]) -> None:
        generation = info["generation"]
        if phase == "start":
            walked = sum(len(gc.get_objects(g)) for g in range(generation + 1))
            started[:] = clock(), cpu(), walked
        else:
            wall, used = clock() - started[0], cpu() - started[1]
            collections.append(
                (generation, started[0], wall, used, int(started[2]), info["collected"])
            )

    gc.callbacks.append(record)

    @app.tool()
    def census() -> str:
        """The objects the collector tracks (outside the frozen ones), by type."""
        objects = gc.get_objects()
        by_type = Counter(type(o).__qualname__ for o in objects)
        del objects
        return json.dumps(
            {
                "tracked": sum(by_type.values()),
                "frozen": gc.get_freeze_count(),
                "by_type": dict(by_type),
                "threshold": gc.get_threshold(),
            }
        )

    @app.tool()
    def reclaim() -> str:
        """Unfreeze, collect fully (the cyclic garbage found among what was
        frozen), and freeze again: what freezing had kept from the collector."""
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        began = clock()
        found = gc.collect()
        took = clock() - began
        if frozen:
            gc.freeze()
        return json.dumps({"frozen": frozen, "garbage": found, "took_ms": round(took * 1000, 1)})

    overrides: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(ServerConfig)}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in fields:
            raise SystemExit(f"--set: ServerConfig has no field {name!r}")
        overrides[name] = json.loads(value)
    shares = args.streams + 1024
    http_config = ServerConfig(
        port=args.port, backlog=4096, max_connections_per_address=shares, **overrides
    )
    config = MCPConfig(http=http_config, max_sessions=shares, max_sessions_per_client=shares)
    try:
        run_mcp(app, config)
    finally:
        Path(args.collections).write_text(json.dumps(collections))
    return 0


# ---- the stream holder (a process of its own) ---------------------------------------


def _exchange(
    socks: list[socket.socket], requests: list[bytes], stream: bool = False
) -> list[bytes]:
    """Send one request on each socket, then read each answer's head (and its
    Content-Length body unless `stream`); the heads, in order."""
    for sock, request in zip(socks, requests, strict=True):
        sock.sendall(request)
    heads = []
    for sock in socks:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("the server closed a connection while the streams opened")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        if not stream:
            match = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            size = int(match.group(1)) if match else 0
            while len(body) < size:
                body += sock.recv(65536)
        heads.append(head)
    return heads


def _request(method: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "idle-streams", "version": "1"},
        },
    }
).encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def hold(args: argparse.Namespace) -> int:
    """Open `args.streams` sessions, each with a GET stream on its own
    connection (`--batch` at a time), say so on stdout, then hold them for
    `args.hold` seconds reading nothing, and exit."""
    raise_fd_limit()
    held: list[socket.socket] = []
    while len(held) < args.streams:
        socks = [
            socket.create_connection(("127.0.0.1", args.port), timeout=60)
            for _ in range(min(200, args.streams - len(held)))
        ]
        heads = _exchange(socks, [_request("POST", POST_HEADERS, INITIALIZE)] * len(socks))
        sids = []
        for head in heads:
            match = re.search(rb"(?i)\r\nmcp-session-id: *([!-~]+)", head)
            if not head.startswith(b"HTTP/1.1 200") or match is None:
                raise SystemExit(f"initialize answered {head[:200]!r}")
            sids.append(match.group(1).decode())
        _exchange(
            socks,
            [_request("POST", {**POST_HEADERS, "Mcp-Session-Id": s}, INITIALIZED) for s in sids],
        )
        get = {"Accept": "text/event-stream", "MCP-Protocol-Version": PROTOCOL}
        for head in _exchange(
            socks, [_request("GET", {**get, "Mcp-Session-Id": s}) for s in sids], stream=True
        ):
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"a GET stream answered {head[:200]!r}")
        held += socks
    print("open", flush=True)
    time.sleep(args.hold)
    return 0


# ---- the run ------------------------------------------------------------------------


def pinned(cpu: str) -> list[str]:
    if shutil.which("taskset") is None or not {0, 1} <= os.sched_getaffinity(0):
        return []
    return ["taskset", "-c", cpu]


def wait_until_up(port: int, server: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("the server exited at start-up")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.connect()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def post(conn: http.client.HTTPConnection, body: dict[str, Any], sid: str | None = None) -> Any:
    headers = dict(POST_HEADERS)
    if sid is not None:
        headers["Mcp-Session-Id"] = sid
    conn.request("POST", "/mcp", json.dumps(body), headers)
    response = conn.getresponse()
    data = response.read()
    return response, data


def call_tool(port: int, name: str) -> dict[str, Any]:
    """A tool of the server's that answers JSON text, over a session of its own
    (deleted after)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        response, _ = post(
            conn,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "idle-streams", "version": "1"},
                },
            },
        )
        sid = response.getheader("Mcp-Session-Id")
        post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        response, data = post(
            conn,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name}},
            sid,
        )
        if data.startswith(b"event:") or b"\ndata:" in data or data.startswith(b"data:"):
            data = next(
                line[5:] for line in data.splitlines() if line.startswith(b"data:") and line[5:]
            )
        answer = json.loads(data)
        conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": sid, **POST_HEADERS})
        conn.getresponse().read()
        result: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
        return result
    finally:
        conn.close()


def bench(port: int, seconds: float, clients: int) -> dict[str, Any]:
    """One closed-loop run of the normal client; its latencies and when it measured."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        began = time.monotonic()
        subprocess.run(
            [*pinned("1"), sys.executable, "-m", "trio_mcp", "bench"]
            + [f"http://127.0.0.1:{port}/mcp", "--scenario", "call"]
            + ["--connections", str(clients), "--workers", "1", "--duration", str(seconds)]
            + ["--warmup", "1", "--quiet", "--json", str(out)],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=seconds + 120,
        )
        ended = time.monotonic()
        report: dict[str, Any] = json.loads(out.read_text())
    latency = report["latency_ms"]
    return {
        "calls_per_s": report["totals"]["requests_per_s"],
        "errors": report["totals"]["errors"],
        "p50_ms": latency["p50"],
        "p99_ms": latency["p99"],
        "p99.9_ms": latency["p99.9"],
        "max_ms": latency["max"],
        # (the bench's own start-up and warm-up second are inside the window)
        "window": (began, ended),
    }


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def collections_in(records: list[list[float]], window: tuple[float, float]) -> dict[str, Any]:
    """Per generation: how many collections started inside `window`, the
    longest (wall clock, and its own CPU time), the most objects one walked."""
    summary: dict[str, Any] = {}
    for generation in (0, 1, 2):
        rows = [r for r in records if r[0] == generation and window[0] <= r[1] <= window[1]]
        summary[f"gen{generation}"] = {
            "count": len(rows),
            "longest_ms": round(max(r[2] for r in rows) * 1000, 2) if rows else 0.0,
            "longest_cpu_ms": round(max(r[3] for r in rows) * 1000, 2) if rows else 0.0,
            "total_ms": round(sum(r[2] for r in rows) * 1000, 1),
            "most_walked": max(r[4] for r in rows) if rows else 0,
            "collected": sum(r[5] for r in rows),
        }
    return summary


def open_streams(port: int, streams: int, hold_s: float) -> subprocess.Popen[str]:
    """The holder process, once it says its streams are open."""
    holder = subprocess.Popen(
        [*pinned("1"), sys.executable, __file__, "--hold", str(hold_s), "--port", str(port)]
        + ["--streams", str(streams)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "open":  # (it exits when it cannot open them)
        holder.wait(timeout=30)
        raise SystemExit("the streams did not open")
    time.sleep(2.0)  # (the last ones' priming events, and their sessions' bookkeeping)
    return holder


def per_stream(before: dict[str, Any], after: dict[str, Any], streams: int) -> dict[str, Any]:
    grown = Counter(after["by_type"])
    grown.subtract(before["by_type"])
    tracked = after["tracked"] + after["frozen"] - before["tracked"] - before["frozen"]
    return {
        "tracked_per_stream": round(tracked / streams, 2),
        "top_types_per_stream": {
            name: round(count / streams, 2) for name, count in grown.most_common(25)
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="each measured phase")
    parser.add_argument("--clients", type=int, default=16, help="the normal client's connections")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a ServerConfig field for the server, e.g. gc_full_interval_s=30 (repeatable)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=65.0,
        help="seconds between the streams opening and the measured phase (default 65: the "
        "server's first paced full collection after they opened falls in it, not in the phase)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--collections", help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args)
    if args.hold is not None:
        return hold(args)

    limit = raise_fd_limit()
    if limit < args.streams + FD_SPARE:
        raise SystemExit(
            f"the open-files hard limit ({limit}) is below {args.streams + FD_SPARE}, what "
            f"{args.streams} streams need: raise it (ulimit -Hn) or pass fewer --streams"
        )
    print(
        f"open-files limit raised to {limit}; the server's max_sessions, "
        f"max_sessions_per_client and max_connections_per_address are {args.streams + 1024} "
        "for the run",
        file=sys.stderr,
    )
    sys.path.insert(0, str(HERE))
    from slowloris import free_port

    port = free_port()
    tmp = tempfile.TemporaryDirectory()
    collections_path = Path(tmp.name) / "collections.json"
    server = subprocess.Popen(
        [*pinned("0"), sys.executable, __file__, "--serve", "--port", str(port)]
        + ["--streams", str(args.streams), "--collections", str(collections_path)]
        + [f"--set={item}" for item in args.set],
        stderr=subprocess.DEVNULL,
    )
    holder = None
    try:
        wait_until_up(port, server)
        rest = call_tool(port, "census")
        quiet = bench(port, args.seconds, args.clients)
        rss_quiet = rss_mb(server.pid)
        base_fds = fd_count(server.pid)
        hold_s = args.settle + args.seconds + 200  # (the settling, the loaded phase, at most)
        opened_at = time.monotonic()
        holder = open_streams(port, args.streams, hold_s)
        open_s = time.monotonic() - opened_at
        time.sleep(args.settle)
        settled = (opened_at, time.monotonic())
        held = call_tool(port, "census")
        fds = fd_count(server.pid)
        loaded = bench(port, args.seconds, args.clients)
        rss_loaded = rss_mb(server.pid)
        holder.kill()
        holder.wait(timeout=20)
        deadline = time.monotonic() + 60
        while fd_count(server.pid) > base_fds + 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)
        closed = call_tool(port, "census")
        reclaimed = call_tool(port, "reclaim")
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait(timeout=20)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    records = json.loads(collections_path.read_text()) if collections_path.exists() else []
    tmp.cleanup()
    result = {
        "streams": args.streams,
        "seconds": args.seconds,
        "clients": args.clients,
        "server_settings": args.set,
        "streams_open_s": round(open_s, 1),
        "server_fds_with_streams": fds,
        "server_rss_mb": {"unloaded": rss_quiet, "with_streams": rss_loaded},
        "opening_and_settling": {
            "seconds": round(settled[1] - settled[0], 1),
            "collections": collections_in(records, settled),
        },
        "unloaded": {**quiet, "collections": collections_in(records, quiet.pop("window"))},
        "with_streams": {**loaded, "collections": collections_in(records, loaded.pop("window"))},
        "p99_ratio": round(loaded["p99_ms"] / quiet["p99_ms"], 2),
        "objects": {
            "at_rest": {"tracked": rest["tracked"], "frozen": rest["frozen"]},
            "with_streams": {"tracked": held["tracked"], "frozen": held["frozen"]},
            **per_stream(rest, held, args.streams),
        },
        "after_streams_closed": {
            "tracked": closed["tracked"],
            "frozen": closed["frozen"],
            "cyclic_garbage_among_frozen": reclaimed["garbage"] if reclaimed["frozen"] else None,
            "unfrozen_full_collection_ms": reclaimed["took_ms"],
        },
        "threshold": held["threshold"],
    }
    longest_full = result["with_streams"]["collections"]["gen2"]["longest_ms"]
    result["goals_met"] = result["p99_ratio"] <= 2.0 and longest_full < 50.0
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
