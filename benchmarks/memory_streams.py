"""Memory per idle session and per idle GET stream, and the fan-out latency of a broadcast.

Run from a checkout with the dev interpreter::

    PYTHONPATH=src python benchmarks/memory_streams.py [--count 10000] [--batch 200]
        [--rounds 3] [--timeout 300] [--no-pin] [--json PATH]

The server is ``benchmarks/_notify_server.py`` (the ``examples/everything.py``
app plus a ``broadcast`` tool that calls ``server.notify_tools_changed()``),
one process on a free 127.0.0.1 port, default configuration except a listen
backlog of 4096 and ``max_sessions`` raised to fit. This script is the client:
one trio process speaking HTTP/1.1 by hand over ``trio.open_tcp_stream``. It

1. warms the server up (sessions, GET streams, a broadcast, DELETE), then
   reads the server's VmRSS from ``/proc/PID/status``;
2. creates N idle sessions (initialize + notifications/initialized) over
   ``--batch`` concurrent keep-alive connections, closes them, reads VmRSS;
3. opens one GET stream per session (``--batch`` opening at a time, each
   until its priming event arrived), keeps them all open, reads VmRSS;
4. ``--rounds`` times: on a separate connection with its own session, sends
   ``tools/call broadcast`` and times, from the client's clock, how long until
   the last of the N streams has received ``notifications/tools/list_changed``;
5. closes the streams and waits (up to 2 keepalives) for the server to let go
   of them, reads VmRSS again.

With ``--listen`` the N streams are 2026-07-28 ``subscriptions/listen``
streams instead (a POST each, no session, asking for ``toolsListChanged``;
open once its acknowledgement arrived), and step 2 is skipped: a fresh server
holds only the listen streams, so KiB per idle listen stream is measured on
memory that no earlier stage freed.

With taskset and two or more CPUs the server runs on CPU 0 and this client on
CPU 1. Everything runs under one global timeout; the server is stopped on exit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import resource
import select
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_echo import (
    ROOT,
    SERVER_CPU,
    WRK_CPU,
    BenchmarkError,
    ServerProcess,
    can_pin,
    compiled_extensions_present,
    free_port,
    loadavg_now,
    machine_info,
)

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = HERE / "_notify_server.py"
CLIENT_CPU = WRK_CPU
PACKAGES = ("trio", "orjson", "jsonschema-rs", "Cython")
PROTOCOL = "2025-11-25"
BACKLOG = 4096
KEEPALIVE_S = 15.0  # MCPConfig.keepalive_s, the server's default
FD_MARGIN = 512  # descriptors per process beyond one per stream
PATTERN = b"notifications/tools/list_changed"
LAST_CHUNK = b"\r\n0\r\n\r\n"  # the end of a chunked body (SSE data never has CRLF)

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "memory-streams", "version": "1"},
        },
    }
).encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
BROADCAST = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"broadcast"}}'
POST_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL,
}
GET_HEADERS = {"Accept": "text/event-stream", "MCP-Protocol-Version": PROTOCOL}
MODERN = "2026-07-28"
LISTEN = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    },
    separators=(",", ":"),
).encode()
LISTEN_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "subscriptions/listen",
}


# -- HTTP/1.1 by hand ------------------------------------------------------------


def http_request(method: str, port: int, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HTTPConn:
    """One client connection: requests and responses on a keep-alive socket."""

    def __init__(self, stream: trio.SocketStream, port: int) -> None:
        self.stream = stream
        self.port = port
        self.buf = bytearray()

    @classmethod
    async def open(cls, port: int) -> HTTPConn:
        return cls(await trio.open_tcp_stream("127.0.0.1", port), port)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def fill(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise BenchmarkError("the server closed the connection unexpectedly")
        self.buf += data

    async def read_head(self) -> tuple[int, dict[bytes, bytes]]:
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            await self.fill()
        lines = bytes(self.buf[:end]).split(b"\r\n")
        del self.buf[: end + 4]
        status = int(lines[0].split(b" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def read_body(self, headers: dict[bytes, bytes]) -> bytes:
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            while len(self.buf) < size:
                await self.fill()
            body = bytes(self.buf[:size])
            del self.buf[:size]
            return body
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = bytearray()
            while True:
                while (end := self.buf.find(b"\r\n")) < 0:
                    await self.fill()
                size = int(bytes(self.buf[:end]).split(b";")[0], 16)
                while len(self.buf) < end + 2 + size + 2:
                    await self.fill()
                body += self.buf[end + 2 : end + 2 + size]
                del self.buf[: end + 2 + size + 2]
                if size == 0:
                    return bytes(body)
        return b""

    async def request(
        self, method: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        await self.stream.send_all(http_request(method, self.port, headers, body))
        status, response_headers = await self.read_head()
        return status, response_headers, await self.read_body(response_headers)


def must_close(headers: dict[bytes, bytes]) -> bool:
    return headers.get(b"connection", b"").lower() == b"close"


# -- the server process -----------------------------------------------------------


@dataclass
class Memory:
    stage: str
    vm_rss_kib: int
    rss_anon_kib: int
    vm_hwm_kib: int
    fds: int
    at_s: float


def proc_status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "RssAnon", "VmHWM"):
            values[name] = int(rest.split()[0])  # kB
    return values


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def server_log(server: ServerProcess) -> str:
    server.log.seek(0)
    return server.log.read().decode(errors="replace")


# -- sessions ------------------------------------------------------------------------


async def create_sessions(port: int, count: int, batch: int) -> list[str]:
    """`count` initialized sessions over `batch` concurrent keep-alive connections."""
    ids: list[str] = []
    todo = count

    async def worker() -> None:
        nonlocal todo
        conn: HTTPConn | None = None
        try:
            while todo > 0:
                todo -= 1
                if conn is None:
                    conn = await HTTPConn.open(port)
                status, headers, body = await conn.request("POST", POST_HEADERS, INITIALIZE)
                sid = headers.get(b"mcp-session-id")
                if status != 200 or sid is None:
                    raise BenchmarkError(
                        f"initialize #{len(ids) + 1} answered {status} "
                        f"(session id {sid!r}): {body[:300]!r}"
                    )
                session_headers = {**POST_HEADERS, "Mcp-Session-Id": sid.decode()}
                status, headers, body = await conn.request("POST", session_headers, INITIALIZED)
                if status != 202:
                    raise BenchmarkError(f"notifications/initialized answered {status}: {body!r}")
                ids.append(sid.decode())
                if must_close(headers):
                    await conn.aclose()
                    conn = None
        finally:
            if conn is not None:
                await conn.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(min(batch, count)):
            nursery.start_soon(worker)
    return ids


async def delete_sessions(port: int, ids: list[str], batch: int) -> None:
    todo = list(ids)

    async def worker() -> None:
        conn = await HTTPConn.open(port)
        try:
            while todo:
                sid = todo.pop()
                headers = {"MCP-Protocol-Version": PROTOCOL, "Mcp-Session-Id": sid}
                status, response_headers, body = await conn.request("DELETE", headers)
                if status != 200:
                    raise BenchmarkError(f"DELETE answered {status}: {body!r}")
                if must_close(response_headers):
                    await conn.aclose()
                    conn = await HTTPConn.open(port)
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(min(batch, len(ids))):
            nursery.start_soon(worker)


# -- GET streams ---------------------------------------------------------------------


class EpollReader:
    """Reads every open stream from one thread with a plain epoll loop.

    A trio task per stream costs this client 15-50 µs per delivered event
    (wake-up, re-registration, a SocketStream read), so with 10,000 streams
    the client, not the server, decided when the last event arrived. Here a
    delivered event costs one ``recv`` in a loop over ready descriptors.
    `on_data(index, data, now)` runs in the reader thread; it returns False
    when that stream has ended, and the trio.Event that `add` returned for it
    is then set (through the trio token).
    """

    def __init__(self, on_data: Callable[[int, bytes, float], bool]) -> None:
        self.on_data = on_data
        self.epoll = select.epoll()
        self.streams: dict[int, int] = {}  # fd -> stream index
        self.lock = threading.Lock()
        self.stopping = False
        self.token = trio.lowlevel.current_trio_token()
        self.thread = threading.Thread(target=self._loop, name="epoll-reader", daemon=True)
        self.ended_events: dict[int, trio.Event] = {}

    def start(self) -> None:
        self.thread.start()

    def add(self, index: int, fd: int) -> trio.Event:
        ended = trio.Event()
        with self.lock:
            self.streams[fd] = index
            self.ended_events[index] = ended
            self.epoll.register(fd, select.EPOLLIN)
        return ended

    def remove(self, fd: int) -> None:
        with self.lock:
            if self.streams.pop(fd, None) is not None:
                self.epoll.unregister(fd)

    def stop(self) -> None:
        self.stopping = True
        self.thread.join(timeout=5)
        self.epoll.close()

    def _loop(self) -> None:
        perf_counter = time.perf_counter
        while not self.stopping:
            events = self.epoll.poll(0.05)
            if not events:
                continue
            now = perf_counter()
            with self.lock:
                for fd, _ in events:
                    index = self.streams.get(fd)
                    if index is None:
                        continue
                    try:
                        data = os.read(fd, 65536)
                    except OSError:
                        data = b""
                    if not self.on_data(index, data, now):
                        del self.streams[fd]
                        self.epoll.unregister(fd)
                        event = self.ended_events.pop(index)
                        self.token.run_sync_soon(event.set)


class Streams:
    """N event streams, records when each sees each broadcast.

    A stream is a GET on session `ids[i]`, or with `listen` a 2026-07-28
    subscriptions/listen POST (the ids then only count the streams). A task
    per stream opens it; once open, one `EpollReader` thread reads them all.
    """

    def __init__(
        self, port: int, ids: list[str], rounds: int, batch: int, *, listen: bool = False
    ) -> None:
        self.port = port
        self.ids = ids
        self.listen = listen
        self.rounds = rounds
        self.limiter = trio.CapacityLimiter(batch)
        self.opened = 0
        self.all_open = trio.Event()
        self.ended = 0
        self.arrivals = [[math.nan] * len(ids) for _ in range(rounds)]
        self.received = [0] * rounds
        self.done = [trio.Event() for _ in range(rounds)]
        self.extra_events = 0
        self.on_end: Callable[[], None] | None = None
        self.seen = [0] * len(ids)
        self.tails = [b""] * len(ids)

    async def run(self) -> None:
        self.reader = EpollReader(self._data)
        self.reader.start()
        try:
            async with trio.open_nursery() as nursery:
                for index, sid in enumerate(self.ids):
                    nursery.start_soon(self._one, index, sid)
        finally:
            self.reader.stop()

    def _data(self, index: int, data: bytes, now: float) -> bool:
        """New bytes of stream `index` (reader thread); False once it ended."""
        if not data:
            return False
        chunk = self.tails[index] + data
        self.seen[index] = self._seen(index, self.seen[index], chunk.count(PATTERN), now)
        if LAST_CHUNK in chunk:
            return False  # the server ended the response (DELETE)
        self.tails[index] = chunk[-(len(PATTERN) - 1) :]
        return True

    def _seen(self, index: int, seen: int, count: int, now: float) -> int:
        for _ in range(count):
            if seen < self.rounds:
                self.arrivals[seen][index] = now
                self.received[seen] += 1
                if self.received[seen] == len(self.ids):
                    self.reader.token.run_sync_soon(self.done[seen].set)
            else:
                self.extra_events += 1
            seen += 1
        return seen

    async def _open(self, conn: HTTPConn, index: int, sid: str) -> int:
        """Open stream `index` on `conn`; where its first event (the priming
        event of a GET, the acknowledgement of a listen) ends in the buffer."""
        if self.listen:
            opening = http_request("POST", self.port, LISTEN_HEADERS, LISTEN)
        else:
            headers = {**GET_HEADERS, "Mcp-Session-Id": sid}
            opening = http_request("GET", self.port, headers)
        await conn.stream.send_all(opening)
        status, response_headers = await conn.read_head()
        ctype = response_headers.get(b"content-type", b"")
        if status != 200 or not ctype.startswith(b"text/event-stream"):
            body = await conn.read_body(response_headers)
            kind = "listen" if self.listen else "GET"
            raise BenchmarkError(
                f"{kind} stream #{index} answered {status} {ctype!r}: {body[:300]!r}"
            )
        self.opened_on(index, response_headers)
        # the priming event (GET) or the acknowledgement (listen)
        while (end := conn.buf.find(b"\n\n")) < 0:
            await conn.fill()
        if self.listen and b'"toolsListChanged":true' not in conn.buf[:end]:
            raise BenchmarkError(
                f"listen stream #{index} did not acknowledge toolsListChanged: "
                f"{bytes(conn.buf[:end])[:300]!r}"
            )
        return end

    def opened_on(self, index: int, headers: dict[bytes, bytes]) -> None:
        """The head of stream `index`'s response (for subclasses that look)."""

    async def _one(self, index: int, sid: str) -> None:
        async with self.limiter:
            conn = await HTTPConn.open(self.port)
            try:
                end = await self._open(conn, index, sid)
            except BaseException:
                await conn.aclose()
                raise
        self.opened += 1
        if self.opened == len(self.ids):
            self.all_open.set()
        fd = conn.stream.socket.fileno()
        try:
            alive, leftover = True, bytes(conn.buf[end + 2 :])
            if leftover:
                with self.reader.lock:
                    alive = self._data(index, leftover, time.perf_counter())
            if alive:
                await self.reader.add(index, fd).wait()
        finally:
            self.reader.remove(fd)
            await conn.aclose()
        self.ended += 1
        if self.on_end is not None:
            self.on_end()


# -- fan-out -------------------------------------------------------------------------


@dataclass
class FanOut:
    round: int
    started_at: float  # time.time() when the trigger was sent
    last_ms: float | None
    first_ms: float | None
    median_ms: float | None
    p99_ms: float | None
    call_answered_ms: float
    delivered: int
    server_cpu_ms: float | None
    client_cpu_ms: float


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def broadcast(
    port: int,
    sid: str,
    streams: Streams,
    round_no: int,
    server: ServerProcess,
    wait_s: float,
) -> FanOut:
    conn = await HTTPConn.open(port)
    try:
        cpu_before, client_before = server.cpu_seconds(), client_cpu_s()
        wall, t0 = time.time(), time.perf_counter()
        status, _, body = await conn.request(
            "POST", {**POST_HEADERS, "Mcp-Session-Id": sid}, BROADCAST
        )
        answered = time.perf_counter() - t0
        if status != 200 or b'"sent"' not in body:
            raise BenchmarkError(f"tools/call broadcast answered {status}: {body[:300]!r}")
        with trio.move_on_after(wait_s):
            await streams.done[round_no].wait()
        cpu_after, client_after = server.cpu_seconds(), client_cpu_s()
    finally:
        await conn.aclose()
    times = sorted((t - t0) * 1000 for t in streams.arrivals[round_no] if not math.isnan(t))
    server_cpu = None
    if cpu_before is not None and cpu_after is not None:
        server_cpu = (cpu_after - cpu_before) * 1000
    complete = len(times) == len(streams.ids)
    return FanOut(
        round=round_no + 1,
        started_at=wall,
        last_ms=times[-1] if complete else None,
        first_ms=times[0] if times else None,
        median_ms=statistics.median(times) if times else None,
        p99_ms=times[min(len(times) - 1, int(len(times) * 0.99))] if times else None,
        call_answered_ms=answered * 1000,
        delivered=len(times),
        server_cpu_ms=server_cpu,
        client_cpu_ms=(client_after - client_before) * 1000,
    )


# -- the run -------------------------------------------------------------------------


@dataclass
class Result:
    count: int
    memory: list[Memory] = field(default_factory=list)
    fanouts: list[FanOut] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    release_s: float | None = None


async def run_client(args: argparse.Namespace, server: ServerProcess, result: Result) -> None:
    port, pid, count, batch = server.port, server.proc.pid, result.count, args.batch
    started = time.perf_counter()

    async def measure(stage: str) -> Memory:
        await trio.sleep(args.settle)
        status = proc_status(pid)
        memory = Memory(
            stage,
            status["VmRSS"],
            status.get("RssAnon", 0),
            status["VmHWM"],
            fd_count(pid),
            round(time.perf_counter() - started, 2),
        )
        result.memory.append(memory)
        print(
            f"  {stage:36} VmRSS {memory.vm_rss_kib / 1024:8.1f} MiB, "
            f"{memory.fds:6d} fds  (t={memory.at_s:.1f} s)",
            flush=True,
        )
        return memory

    # 1. warm-up: every code path once, then gone again (DELETE ends the streams).
    warm_ids = await create_sessions(port, args.warmup_sessions, batch)
    (trigger_sid,) = await create_sessions(port, 1, 1)
    warm = Streams(port, warm_ids, 1, batch)
    warm_gone = trio.Event()

    def warm_ended() -> None:
        if warm.ended == len(warm_ids):
            warm_gone.set()

    warm.on_end = warm_ended
    async with trio.open_nursery() as nursery:
        nursery.start_soon(warm.run)
        await warm.all_open.wait()
        fan = await broadcast(port, trigger_sid, warm, 0, server, args.round_timeout)
        if fan.last_ms is None:
            raise BenchmarkError(f"warm-up broadcast reached {fan.delivered}/{len(warm_ids)}")
        await delete_sessions(port, warm_ids, batch)
        with trio.move_on_after(10):
            await warm_gone.wait()
        if not warm_gone.is_set():
            raise BenchmarkError("DELETE did not end the warm-up GET streams within 10 s")
    start = await measure("start (after warm-up)")

    if args.listen:
        # 2026-07-28: no sessions; the streams are subscriptions/listen requests.
        ids = [str(index) for index in range(count)]
        sessions = start
        kind = "listen"
    else:
        # 2. N idle sessions; their connections closed.
        t = time.perf_counter()
        ids = await create_sessions(port, count, batch)
        result.timings_s["create_sessions"] = round(time.perf_counter() - t, 3)
        print(f"  created {len(ids)} sessions in {result.timings_s['create_sessions']:.1f} s")
        sessions = await measure(f"after {count} idle sessions")
        kind = "GET"

    # 3. N idle streams, kept open.
    streams = Streams(port, ids, args.rounds, batch, listen=args.listen)
    lost: list[int] = []
    streams.on_end = lambda: lost.append(streams.ended)
    async with trio.open_nursery() as nursery:
        t = time.perf_counter()
        nursery.start_soon(streams.run)
        await streams.all_open.wait()
        result.timings_s["open_streams"] = round(time.perf_counter() - t, 3)
        print(f"  opened {count} {kind} streams in {result.timings_s['open_streams']:.1f} s")
        open_ = await measure(f"after {count} idle {kind} streams")
        if lost:
            raise BenchmarkError(f"{len(lost)} {kind} streams ended while idle")
        if open_.fds < sessions.fds + count:
            result.notes.append(
                f"server holds {open_.fds - sessions.fds} more descriptors, expected >= {count}"
            )

        # 4. fan-out rounds.
        for round_no in range(args.rounds):
            await trio.sleep(1.0)
            fan = await broadcast(port, trigger_sid, streams, round_no, server, args.round_timeout)
            result.fanouts.append(fan)
            last = "INCOMPLETE" if fan.last_ms is None else f"{fan.last_ms:8.1f} ms"
            print(
                f"  fan-out {fan.round}: last {last} (first {fan.first_ms:.1f}, "
                f"median {fan.median_ms:.1f}, p99 {fan.p99_ms:.1f} ms; "
                f"{fan.delivered}/{count} delivered; call answered in "
                f"{fan.call_answered_ms:.1f} ms; server CPU {fan.server_cpu_ms:.0f} ms, "
                f"client CPU {fan.client_cpu_ms:.0f} ms)",
                flush=True,
            )
        await measure(f"after {args.rounds} broadcasts")
        if lost:
            result.notes.append(f"{len(lost)} {kind} streams ended during the fan-out rounds")
        if streams.extra_events:
            result.notes.append(f"{streams.extra_events} unexpected extra list_changed events")
        nursery.cancel_scope.cancel()  # the client closes all N streams

    # 5. does the server let go of closed streams?
    if args.release_wait > 0:
        t = time.perf_counter()
        with trio.move_on_after(args.release_wait):
            while fd_count(pid) > sessions.fds + 16:  # noqa: ASYNC110 (polls /proc)
                await trio.sleep(0.25)
        waited = time.perf_counter() - t
        if fd_count(pid) <= sessions.fds + 16:
            result.release_s = round(waited, 2)
            await measure(f"streams closed, released ({waited:.1f} s)")
        else:
            await measure(f"streams closed, NOT released in {waited:.0f} s")
            result.notes.append(
                f"the server still held {fd_count(pid) - sessions.fds} stream sockets "
                f"{waited:.0f} s after the client closed them"
            )


def stop_server(server: ServerProcess, result: Result) -> None:
    proc = server.proc
    if proc.poll() is None:
        t = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
            result.timings_s["server_stop_after_sigterm"] = round(time.perf_counter() - t, 2)
        except subprocess.TimeoutExpired:
            result.notes.append("server ignored SIGTERM for 20 s: SIGKILL")
            proc.kill()
            proc.wait()
    else:
        result.notes.append(f"server exited on its own with {proc.returncode}")


def describe(exc: BaseException, timeout: float) -> str:
    """What went wrong, with exception groups (from nurseries) flattened."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        inner = getattr(e, "exceptions", None)  # an exception group
        if isinstance(inner, tuple):
            for one in inner:
                walk(one)
        else:
            leaves.append(e)

    walk(exc)
    texts: list[str] = []
    for leaf in leaves:
        if isinstance(leaf, trio.TooSlowError):
            text = f"global timeout of {timeout:g} s"
        elif isinstance(leaf, BenchmarkError):
            text = str(leaf)
        else:
            text = f"{type(leaf).__name__}: {leaf}"
        if text not in texts:
            texts.append(text)
    more = f" (+{len(texts) - 3} more kinds)" if len(texts) > 3 else ""
    return f"{len(leaves)} error(s): " + "; ".join(texts[:3]) + more


def full_collections(text: str) -> list[tuple[float, float]]:
    """(wall-clock start, ms) of each generation-2 collection the server logged."""
    found = []
    for line in text.splitlines():
        words = line.split()
        if "gen2" in words and words.index("gen2") + 5 < len(words):
            i = words.index("gen2")
            found.append((float(words[i + 2]), float(words[i + 4])))
    return found


def log_problems(text: str) -> list[str]:
    keep = ("WARNING", "ERROR", "Traceback", "CRITICAL", "failed")
    return [line for line in text.splitlines() if any(k in line for k in keep)][:50]


def raise_nofile() -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def kib_each(memory: list[Memory], before: int, after: int, count: int) -> float:
    return (memory[after].vm_rss_kib - memory[before].vm_rss_kib) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="sessions and GET streams")
    parser.add_argument("--batch", type=int, default=200, help="connections opening at once")
    parser.add_argument("--rounds", type=int, default=3, help="broadcasts timed")
    parser.add_argument("--warmup-sessions", type=int, default=100)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds before each RSS read")
    parser.add_argument("--round-timeout", type=float, default=30.0)
    parser.add_argument(
        "--release-wait",
        type=float,
        default=2 * KEEPALIVE_S + 5,
        help="seconds to wait for the server to drop closed streams (0: skip)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="global time limit, s")
    parser.add_argument(
        "--listen",
        action="store_true",
        help="2026-07-28 subscriptions/listen streams instead of sessions and GET streams",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args(argv)
    if args.count < 1 or args.batch < 1 or args.rounds < 1:
        parser.error("--count, --batch and --rounds must be positive")

    soft, hard = raise_nofile()
    count = args.count
    # Each process holds about one descriptor per stream (the sessions' connections
    # are closed before the streams open); the server inherits our hard limit.
    if soft != resource.RLIM_INFINITY and soft < count + FD_MARGIN:
        count = max(1, soft - FD_MARGIN)
        print(
            f"NOTE: RLIMIT_NOFILE hard limit {hard} is too low for {args.count} streams: "
            f"N reduced to {count}",
            file=sys.stderr,
        )
    result = Result(count=count)
    if count != args.count:
        result.notes.append(f"N reduced from {args.count} to {count} (RLIMIT_NOFILE {hard})")

    pin = not args.no_pin and can_pin()
    use_ext = compiled_extensions_present()
    port = free_port()
    cmd = [
        sys.executable,
        str(SERVER_SCRIPT),
        "--port",
        str(port),
        "--backlog",
        str(BACKLOG),
        "--max-sessions",
        str(count + args.warmup_sessions + 16),
    ]
    if pin:
        cmd = ["taskset", "-c", SERVER_CPU, *cmd]
        os.sched_setaffinity(0, {int(CLIENT_CPU)})
    env = {"PYTHONPATH": str(ROOT / "src")}
    if use_ext:
        env["TRIO_MCP_REQUIRE_EXTENSIONS"] = "1"
    else:
        print("NOTE: compiled extensions not built; the server runs the twins", file=sys.stderr)
    print(
        f"N = {count} {'listen streams' if args.listen else 'sessions / GET streams'}, "
        f"batches of {args.batch}, {args.rounds} broadcasts, "
        f"RLIMIT_NOFILE {soft}, "
        + (f"server on CPU {SERVER_CPU}, client on CPU {CLIENT_CPU}" if pin else "not pinned"),
        flush=True,
    )
    loadavg = loadavg_now()
    server = ServerProcess("trio-mcp", cmd, env, port)
    failure: str | None = None
    try:
        server.wait_ready()
        try:
            trio.run(_bounded, args, server, result)
        except Exception as exc:
            failure = describe(exc, args.timeout)
        if server.proc.poll() is not None:
            failure = (failure or "") + f" (server exited with {server.proc.returncode})"
    finally:
        stop_server(server, result)
        log = server_log(server)
        server.log.close()
    problems = log_problems(log)

    memory = result.memory
    print()
    print(f"{'stage':40} {'VmRSS MiB':>10} {'delta MiB':>10} {'fds':>7}")
    for i, m in enumerate(memory):
        delta = "" if i == 0 else f"{(m.vm_rss_kib - memory[i - 1].vm_rss_kib) / 1024:+10.1f}"
        print(f"{m.stage:40} {m.vm_rss_kib / 1024:10.1f} {delta:>10} {m.fds:7d}")
    summary: dict[str, Any] = {"count": count, "streams": "listen" if args.listen else "GET"}
    if args.listen and len(memory) >= 2:
        summary["kib_per_idle_listen_stream"] = round(kib_each(memory, 0, 1, count), 2)
        print(f"per idle open listen stream: {summary['kib_per_idle_listen_stream']:.2f} KiB")
    elif len(memory) >= 3:
        summary["kib_per_idle_session"] = round(kib_each(memory, 0, 1, count), 2)
        summary["kib_per_idle_get_stream"] = round(kib_each(memory, 1, 2, count), 2)
        print(
            f"per idle session: {summary['kib_per_idle_session']:.2f} KiB; "
            f"per idle open GET stream: {summary['kib_per_idle_get_stream']:.2f} KiB"
        )
    if len(memory) >= 4 and not args.listen:
        summary["kib_per_broadcast_per_session"] = round(
            kib_each(memory, 2, 3, count * args.rounds), 3
        )
    collections = full_collections(log)
    summary["server_gc_gen2"] = {
        "count": len(collections),
        "total_ms": round(sum(ms for _, ms in collections), 1),
        "max_ms": round(max((ms for _, ms in collections), default=0.0), 1),
    }
    gc_in_round: list[float] = []
    if result.fanouts:
        print()
        print(
            f"{'fan-out':8} {'last ms':>8} {'first':>7} {'median':>7} {'p99':>7} "
            f"{'server CPU ms':>14} {'client CPU ms':>14} {'server gen2 GC ms':>18}"
        )
    for f in result.fanouts:
        span_s = f.last_ms / 1000 if f.last_ms is not None else args.round_timeout
        end = f.started_at + span_s
        paused = sum(ms for at, ms in collections if f.started_at <= at + ms / 1000 and at <= end)
        gc_in_round.append(round(paused, 1))
        last = "-" if f.last_ms is None else f"{f.last_ms:.1f}"
        print(
            f"{f.round:<8} {last:>8} {f.first_ms or math.nan:7.1f} {f.median_ms or math.nan:7.1f} "
            f"{f.p99_ms or math.nan:7.1f} {f.server_cpu_ms or math.nan:14.0f} "
            f"{f.client_cpu_ms:14.0f} {paused:18.1f}"
        )
    lasts = [f.last_ms for f in result.fanouts if f.last_ms is not None]
    if lasts:
        summary["fanout_last_ms_min"] = round(min(lasts), 2)
        summary["fanout_last_ms_median"] = round(statistics.median(lasts), 2)
        print(
            f"fan-out to {count} streams, trigger to last delivery: "
            f"min {min(lasts):.1f} ms, median {statistics.median(lasts):.1f} ms "
            f"({len(lasts)} of {args.rounds} rounds complete)"
        )
    summary["release_s"] = result.release_s
    print(
        f"server full (gen2) collections: {len(collections)}, "
        f"longest {summary['server_gc_gen2']['max_ms']:.0f} ms"
    )
    for note in result.notes:
        print(f"NOTE: {note}")
    if problems:
        print(f"server log: {len(problems)} warning/error lines, first: {problems[0]}")
    if failure:
        print(f"\nFAILED: {failure}\n--- server output ---\n{log[-4000:]}", file=sys.stderr)

    if args.json:
        info = machine_info(use_ext, pin, PACKAGES)
        info.pop("wrk", None)
        info["pinned"] = {"server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU} if pin else None
        info["rlimit_nofile"] = [soft, hard]
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": [sys.executable, *sys.argv],
            "settings": {
                "count": count,
                "count_requested": args.count,
                "batch": args.batch,
                "rounds": args.rounds,
                "warmup_sessions": args.warmup_sessions,
                "settle_s": args.settle,
                "backlog": BACKLOG,
                "keepalive_s": KEEPALIVE_S,
                "protocol_version": MODERN if args.listen else PROTOCOL,
                "streams": "subscriptions/listen" if args.listen else "GET",
            },
            "machine": info,
            "loadavg_before": loadavg,
            "server_command": shlex.join(cmd),
            "server_env": env,
            "summary": summary,
            "memory": [m.__dict__ for m in memory],
            "fanouts": [
                {**f.__dict__, "server_gc_gen2_ms": paused}
                for f, paused in zip(result.fanouts, gc_in_round, strict=True)
            ],
            "server_gc_gen2": collections,
            "timings_s": result.timings_s,
            "notes": result.notes,
            "server_log_problems": problems,
            "failure": failure,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 1 if failure else 0


async def _bounded(args: argparse.Namespace, server: ServerProcess, result: Result) -> None:
    with trio.fail_after(args.timeout):
        await run_client(args, server, result)


if __name__ == "__main__":
    sys.exit(main())
