"""The server's own Python cost of one MCP request, without sockets.

Run from a checkout with the dev interpreter::

    PYTHONPATH=src python benchmarks/micro_call.py [--requests 50000] [--repeat 5]
        [--era 2025|2026] [--method call|list] [--json PATH]

One connection task of the real `HTTPServer` serves the real `MCPEndpoint`
(the ``examples/everything.py`` app) over an in-memory byte stream that hands
out the same request bytes as often as asked and throws the responses away:
HTTP parsing, the MCP layer, the tool and the response framing all run; the
kernel's socket work and trio's I/O waits do not. The 2025 era uses one
initialized session; the 2026 era sends stateless requests. The time per
request (best of ``--repeat``, process CPU time) is what any change to the
request path should be measured against; it is far steadier than a load test
on a shared machine. With ``valgrind --tool=callgrind`` around it (and a small
``--requests``) it gives instruction counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
try:
    import trio_mcp  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(HERE))

from _suite_server import server as suite_app  # noqa: E402
from everything import server as everything_app  # noqa: E402

from trio_mcp import MCPConfig, ServerConfig  # noqa: E402
from trio_mcp._mcp._endpoint import MCPEndpoint  # noqa: E402
from trio_mcp._speedups import USING_EXTENSIONS  # noqa: E402
from trio_mcp._trio._server import HTTPServer  # noqa: E402

MODERN = "2026-07-28"


def request_bytes(body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n{head}content-length: {len(body)}\r\n\r\n"
    ).encode() + body


BASE = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "user-agent": "micro_call",
}


class ReplayStream:
    """A byte stream that receives `data` `count` times, then end of stream."""

    def __init__(self, data: bytes, count: int) -> None:
        self.data = data
        self.left = count
        self.sent = 0
        self.last = b""

    async def receive_some(self, max_bytes: int) -> bytes:
        if self.left == 0:
            return b""
        self.left -= 1
        return self.data

    async def send_all(self, data: bytes) -> None:
        self.sent += 1
        self.last = data

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def call_body(era: str, method: str) -> tuple[bytes, dict[str, str]]:
    if method == "call":
        params: dict[str, object] = {"name": "echo", "arguments": {"text": "hello"}}
        name = "echo"
        rpc = "tools/call"
    elif method == "progress":  # answered as SSE: 3 progress notifications, then the result
        params = {"name": "progress", "arguments": {}, "_meta": {"progressToken": "p"}}
        name = "progress"
        rpc = "tools/call"
    else:
        params, name, rpc = {}, "", "tools/list"
    headers = dict(BASE)
    if era == "2026":
        params["_meta"] = {
            **params.get("_meta", {}),  # type: ignore[dict-item]
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers["mcp-protocol-version"] = MODERN
        headers["mcp-method"] = rpc
        if name:
            headers["mcp-name"] = name
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": rpc, "params": params}).encode()
    return body, headers


async def session_headers(http: HTTPServer) -> dict[str, str]:
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "micro", "version": "1"},
            },
        }
    ).encode()
    stream = ReplayStream(request_bytes(init, BASE), 1)
    await http.handle_stream(stream)  # type: ignore[arg-type]
    head = stream.last.split(b"\r\n\r\n", 1)[0].decode()
    sid = next(
        line.split(":", 1)[1].strip()
        for line in head.split("\r\n")
        if line.lower().startswith("mcp-session-id:")
    )
    headers = {**BASE, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    await http.handle_stream(ReplayStream(request_bytes(note, headers), 1))  # type: ignore[arg-type]
    return headers


async def measure(args: argparse.Namespace) -> dict[str, object]:
    # one connection carries every request
    config = MCPConfig(http=ServerConfig(max_requests_per_connection=args.requests + 10))
    app = suite_app if args.method == "progress" else everything_app
    endpoint = MCPEndpoint(app, config)
    http = HTTPServer(endpoint, config.http)
    async with endpoint.running():
        body, headers = call_body(args.era, args.method)
        if args.era == "2025":
            headers = {**(await session_headers(http)), **headers}
        data = request_bytes(body, headers)
        check = ReplayStream(data, 1)
        await http.handle_stream(check)  # type: ignore[arg-type]
        if b'"error"' in check.last or (
            args.method != "progress" and not check.last.startswith(b"HTTP/1.1 200")
        ):
            raise SystemExit(f"unexpected answer: {check.last[:400]!r}")
        times = []
        for _ in range(args.repeat):
            stream = ReplayStream(data, args.requests)
            t0 = time.process_time()
            await http.handle_stream(stream)  # type: ignore[arg-type]
            took = time.process_time() - t0
            if args.method != "progress" and stream.sent != args.requests:
                raise SystemExit(f"{stream.sent} answers to {args.requests} requests")
            times.append(took / args.requests * 1e6)
        endpoint.drain()
    return {
        "era": args.era,
        "method": args.method,
        "requests": args.requests,
        "us_per_request_best": round(min(times), 2),
        "us_per_request_all": [round(t, 2) for t in times],
        "compiled": USING_EXTENSIONS,
        "python": sys.version.split()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--era", choices=["2025", "2026"], default="2025")
    parser.add_argument(
        "--method",
        choices=["call", "list", "progress"],
        default="call",
        help="tools/call echo, tools/list, or tools/call progress (SSE, the suite's fixture)",
    )
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args()
    result = trio.run(measure, args)
    print(
        f"{args.era} {args.method}: {result['us_per_request_best']} µs per request "
        f"(best of {args.repeat} x {args.requests}; compiled={result['compiled']})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
