"""A ``trio-mcp run --workers N`` group as the end-to-end tests run it: a
real process on 127.0.0.1, its output and its workers, killed by PID when
the test ends (tests/e2e/test_workers*.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson
import trio
from _support import Client, V, connect, free_port, mcp_post, modern_body, modern_call
from _support import modern_headers as headers_of

APP = Path(__file__).parent / "e2e" / "workers_app.py"
PID_CALL = modern_body("tools/call", {"name": "pid", "arguments": {}})


def children_of(parent: int) -> set[int]:
    """The processes whose parent is `parent` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="latin-1") as file:
                fields = file.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.add(int(entry))
    return found


def cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        return file.read()


class Group:
    """A running ``trio-mcp run`` process: its port, its output, its workers."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int) -> None:
        self.proc = proc
        self.port = port
        self._lines: list[str] = []
        self.seen: set[int] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.append(line.decode(errors="replace"))

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def workers(self) -> set[int]:
        pids = children_of(self.proc.pid)
        self.seen |= pids
        return pids

    async def wait_for(self, text: str) -> None:
        while text not in self.output:
            assert self.proc.poll() is None, self.output
            await trio.sleep(0.05)

    async def exit_status(self) -> int:
        while self.proc.poll() is None:
            await trio.sleep(0.05)
        self._reader.join(5)
        return self.proc.returncode

    async def call(self, tool: str = "pid", **arguments: object) -> int:
        """A 2026 tools/call on a new connection; the pid that answered."""
        body = modern_body("tools/call", {"name": tool, "arguments": arguments})
        reply, answer = await modern_call(self.port, body)
        assert reply.status == 200, reply
        return int(answer["result"]["content"][0]["text"])

    def close(self) -> None:
        self.workers()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # (so that it removes its directory)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait()
        for pid in self.seen:  # (orphans, if the test ended before the group)
            with contextlib.suppress(OSError):
                if b"trio_mcp._worker" in cmdline(pid):
                    os.kill(pid, signal.SIGKILL)
        self._reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@contextlib.contextmanager
def group(
    *args: str, app: Path = APP, env: Mapping[str, str] | None = None, workers: int | None = 2
) -> Iterator[Group]:
    """``trio-mcp run APP --port P --workers N ARGS`` (no --workers if N is None)."""
    port = free_port()
    command = [sys.executable, "-m", "trio_mcp", "run", str(app), "--port", str(port)]
    command += [] if workers is None else ["--workers", str(workers)]
    command += args
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    running = Group(proc, port)
    try:
        yield running
    finally:
        running.close()


async def open_at_once(port: int, count: int) -> list[Client]:
    """`count` connections opened at once (each one's connect in its own task)."""
    clients: list[Client] = []

    async def one() -> None:
        clients.append(await connect(port))

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
    return clients


async def holders(clients: list[Client]) -> list[int | None]:
    """The pid of the worker that serves each client's connection (a call on
    it), or None where it was refused with a 503."""
    found: list[int | None] = []
    for client in clients:
        await client.send(mcp_post(PID_CALL, version=V, extra=headers_of(PID_CALL)))
        with trio.fail_after(10):
            reply = await client.read_reply()
        if reply.status == 503:
            found.append(None)
            continue
        assert reply.status == 200, reply
        found.append(int(orjson.loads(reply.body)["result"]["content"][0]["text"]))
    return found


def per_worker(found: list[int | None]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for pid in found:
        if pid is not None:
            counts[pid] = counts.get(pid, 0) + 1
    return counts


async def close_all(clients: list[Client]) -> None:
    for client in clients:
        await client.stream.aclose()
