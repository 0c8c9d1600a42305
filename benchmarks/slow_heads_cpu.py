"""What one slow request head costs the server, in CPU: per trickled header
line, and per slowloris connection dropped (408) and made again.

    python benchmarks/slow_heads_cpu.py [--mode lines|remade] [--connections 4000]
        [--seconds 10] [--head-timeout 1] [--json PATH]

On loopback, bounded in time: a server (``trio-mcp run
examples/everything.py``, its head-limit shortening and per-address quota
lifted so that the figure is the cost of the head alone) on CPU 0, and this
process, the attacker, on CPU 1, from 127.0.0.2 to 127.0.0.31:

- ``lines``: ``--connections`` connections each send a request line, then
  one header line a second (spread evenly over the second), never ending
  their heads (the head timeout is 120 s, so none is dropped);
- ``remade``: ``--connections`` connections each send a request line and
  nothing more; the server drops each at ``--head-timeout`` seconds with a
  408, and it is made again at once.

The server's user and system CPU (``/proc/PID/stat``) over ``--seconds``,
divided by the lines sent or the connections made, is the figure. The
sweeper's look at every connection, twice a second, is part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from slowloris import EVERYTHING, free_port, raise_fd_limit, wait_until_up  # noqa: E402

REQUEST_LINE = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
ADDRESSES = 30


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connect(port: int, n: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((f"127.0.0.{2 + n % ADDRESSES}", 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(REQUEST_LINE)
    return sock


def trickle_lines(port: int, pid: int, connections: int, seconds: float) -> dict[str, float]:
    socks = [connect(port, n) for n in range(connections)]
    time.sleep(1.0)  # (every first read done)
    per_tick = max(1, connections // 20)  # (each connection once a second, in 20 ticks)
    start, cpu_before, lines, turn = time.monotonic(), cpu_seconds(pid), 0, 0
    while time.monotonic() - start < seconds:
        for _ in range(per_tick):
            socks[turn].send(b"X-Line: %d\r\n" % lines)
            lines += 1
            turn = (turn + 1) % connections
        time.sleep(0.05)
    cpu = cpu_seconds(pid) - cpu_before
    for sock in socks:
        sock.close()
    return {"lines": lines, "server_cpu_s": cpu, "us_per_unit": 1e6 * cpu / lines}


def remade_connections(
    port: int, pid: int, connections: int, seconds: float, head_timeout: float
) -> dict[str, float]:
    selector = selectors.DefaultSelector()
    made = 0

    def make(n: int) -> None:
        nonlocal made
        sock = connect(port, n)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, n)
        made += 1

    for n in range(connections):
        make(n)
    time.sleep(head_timeout + 1.0)  # (the first drops are under way)
    start, cpu_before, made_before = time.monotonic(), cpu_seconds(pid), made
    while time.monotonic() - start < seconds:
        for key, _ in selector.select(0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                sock.recv(4096)  # (the 408, or the end)
            except OSError:
                pass
            selector.unregister(sock)
            sock.close()
            make(key.data)
    cpu = cpu_seconds(pid) - cpu_before
    remade = made - made_before
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    return {"connections": remade, "server_cpu_s": cpu, "us_per_unit": 1e6 * cpu / max(remade, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("lines", "remade"), default="lines")
    parser.add_argument("--connections", type=int, default=4000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--head-timeout", type=float, default=1.0, help="remade: seconds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if (os.cpu_count() or 1) < 2:
        parser.error("needs 2 CPUs: the server on one, the attacker on the other")
    raise_fd_limit()
    port = free_port()
    head_timeout = 120.0 if args.mode == "lines" else args.head_timeout
    server = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-m", "trio_mcp", "run", EVERYTHING]
        + ["--port", str(port), "--head-timeout-s", str(head_timeout)]
        + ["--slow-heads-threshold", "1000000", "--max-connections-per-address", "1000000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.sched_setaffinity(0, {1})
    try:
        wait_until_up(port)
        if args.mode == "lines":
            result = trickle_lines(port, server.pid, args.connections, args.seconds)
        else:
            result = remade_connections(
                port, server.pid, args.connections, args.seconds, args.head_timeout
            )
        result["server_alive"] = server.poll() is None
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    unit = "line" if args.mode == "lines" else "connection"
    print(
        f"{args.mode}: server CPU {result['server_cpu_s']:.2f} s over {args.seconds:g} s, "
        f"{result['us_per_unit']:.1f} us a {unit}"
    )
    if args.json:
        args.json.write_text(json.dumps({"mode": args.mode, **vars(args), **result}, default=str))


if __name__ == "__main__":
    main()
