"""tools/call req/s with the memory stores, with Redis answered by the
session's owner, and with Redis answered by another replica, side by side.

    PYTHONPATH=src python benchmarks/redis_stores.py [--seconds 5] [--connections 16] [--depth 8]

Starts its own redis-server (loopback, no persistence) and each server as a
process of its own (one core each); the load comes from this process over
keep-alive connections, `--depth` requests pipelined on each (so that the
load generator, one Python process, is not the limit). "non-owner":
the session is initialized on replica 1 and every call goes to replica 2.
Also counts the Redis commands per request (INFO commandstats) in each mode.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import orjson
import trio

SERVE = """
import sys, trio
from trio_mcp import MCPConfig, Server, ServerConfig, serve_mcp
app = Server("bench")
@app.tool()
def echo(text: str) -> str:
    return text
port, url = int(sys.argv[1]), sys.argv[2]
trio.run(lambda: serve_mcp(app, MCPConfig(http=ServerConfig(port=port), redis_url=url,
    max_sessions=100000, max_sessions_per_client=100000)))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(body: dict, session: str | None) -> bytes:
    data = orjson.dumps(body)
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    )
    if session:
        head += b"Mcp-Session-Id: " + session.encode() + b"\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(data) + data


async def exchange(stream: trio.SocketStream, data: bytes, buffer: bytearray) -> bytes:
    """Send one request, read one Content-Length response; returns its head."""
    await stream.send_all(data)
    return await read_response(stream, buffer)


async def read_response(stream: trio.SocketStream, buffer: bytearray) -> bytes:
    """Read one Content-Length response; returns its head."""
    while b"\r\n\r\n" not in buffer:
        buffer += await stream.receive_some(65536)
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    length = int(re.search(rb"(?i)content-length: (\d+)", head)[1])  # type: ignore[index]
    while len(buffer) < end + length:
        buffer += await stream.receive_some(65536)
    del buffer[: end + length]
    return head


async def initialize(port: int) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    head = await exchange(stream, request(init, None), bytearray())
    session = re.search(rb"(?i)mcp-session-id: (\S+)", head)[1].decode()  # type: ignore[index]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await stream.send_all(request(note, session))
    await stream.receive_some(65536)
    await stream.aclose()
    return session


async def load(port: int, session: str, seconds: float, connections: int, depth: int) -> float:
    call = request(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}},
        },
        session,
    )
    done = 0

    batch = call * depth

    async def worker() -> None:
        nonlocal done
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        buffer = bytearray()
        with trio.move_on_after(seconds):
            while True:
                await stream.send_all(batch)
                for _ in range(depth):
                    head = await read_response(stream, buffer)
                    assert head.startswith(b"HTTP/1.1 200"), head
                done += depth
        await stream.aclose()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(worker)
    return done / (time.perf_counter() - start)


def redis_commands(port: int) -> int:
    out = subprocess.run(
        ["redis-cli", "-p", str(port), "info", "commandstats"], capture_output=True, text=True
    ).stdout
    return sum(int(n) for n in re.findall(r"calls=(\d+)", out))


async def wait_up(port: int) -> None:
    with trio.fail_after(20):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            return


def start_processes() -> tuple[
    subprocess.Popen[bytes], list[subprocess.Popen[bytes]], int, dict[str, int], str
]:
    """redis-server and the three servers: (redis, servers, its port, their ports, its dir)."""
    redis_port = free_port()
    directory = tempfile.mkdtemp()
    redis = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{redis_port}/0"
    ports = {name: free_port() for name in ("memory", "replica1", "replica2")}
    servers = [
        subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port), "" if name == "memory" else url],
        )
        for name, port in ports.items()
    ]
    return redis, servers, redis_port, ports, directory


async def measure(
    redis_port: int, ports: dict[str, int], seconds: float, connections: int, depth: int
) -> None:
    for port in ports.values():
        await wait_up(port)
    results = {}
    for mode, first, then in (
        ("memory-only", "memory", "memory"),
        ("redis, owner", "replica1", "replica1"),
        ("redis, non-owner", "replica1", "replica2"),
    ):
        session = await initialize(ports[first])
        await load(ports[then], session, 0.5, connections, depth)  # (warm up)
        before = redis_commands(redis_port)
        rate = await load(ports[then], session, seconds, connections, depth)
        commands = redis_commands(redis_port) - before
        results[mode] = (rate, commands / max(1, rate * seconds))
    base = results["memory-only"][0]
    print(f"{'mode':<18} {'req/s':>8} {'ratio':>6} {'redis cmds/req':>15}")
    for mode, (rate, per) in results.items():
        print(f"{mode:<18} {rate:8.0f} {rate / base:6.2f} {per:15.4f}")


def main(seconds: float, connections: int, depth: int) -> None:
    redis, servers, redis_port, ports, directory = start_processes()
    try:
        trio.run(measure, redis_port, ports, seconds, connections, depth)
    finally:
        for proc in [*servers, redis]:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--depth", type=int, default=8, help="requests pipelined per connection")
    arguments = parser.parse_args()
    main(arguments.seconds, arguments.connections, arguments.depth)
