"""Replicas as processes of their own (``trio-mcp run --redis-url``) sharing a
real redis-server, and the SIGKILL drill: a client whose replica was killed
in the middle of its GET stream resumes on another with Last-Event-ID and
gets every event once, in order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
import trio
from _support import MCP, connect, connect_when_up, free_port
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis, next_message, open_get

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

TARGET = f"{Path(__file__).with_name('replica_app.py')}:server"


@contextmanager
def replicas(redis_url: str, count: int) -> Iterator[list[tuple[subprocess.Popen[bytes], int]]]:
    """`count` ``trio-mcp run`` processes on the Redis; killed by PID at the end."""
    started = []
    try:
        for _ in range(count):
            port = free_port()
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trio_mcp",
                    "run",
                    TARGET,
                    "--port",
                    str(port),
                    "--redis-url",
                    redis_url,
                    "--log-level",
                    "warning",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started.append((proc, port))
        yield started
    finally:
        for proc, _ in started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


async def call(port: int, mcp: MCP, tool: str, id: int) -> tuple[int, str]:
    """tools/call `tool` on a new connection to `port`: (status, its text)."""
    async with await connect(port) as client:
        other = MCP(client)
        other.session, other.version = mcp.session, mcp.version
        reply = await other.post(
            {
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {}},
            }
        )
    if reply.status != 200:
        return reply.status, ""
    return 200, orjson.loads(reply.body)["result"]["content"][0]["text"]


async def test_replica_processes_serve_one_session_and_survive_a_sigkill(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    with replicas(redis.url, 3) as started, trio.fail_after(60):
        (one, port1), (_, port2), (three, port3) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port2))
        await mcp.initialize()
        # ten calls on new connections to replicas 1 and 3: all 200, by them
        answers = [await call((port1, port3)[i % 2], mcp, "whoami", i) for i in range(10)]
        assert [status for status, _ in answers] == [200] * 10
        assert {pid for _, pid in answers} == {str(one.pid), str(three.pid)}
        # a GET stream on replica 1 hears what replica 2 sends
        stream = await open_get(port1, mcp)
        for i in range(2):
            assert await call(port2, mcp, "poke", 20 + i) == (200, "poked")
        seen = [await next_message(stream) for _ in range(2)]
        os.kill(one.pid, signal.SIGKILL)  # replica 1 dies mid-stream
        one.wait()
        await stream.client.stream.aclose()
        for i in range(3):
            assert await call(port2, mcp, "poke", 30 + i) == (200, "poked")
        # the client resumes on replica 3 (taking the stream over at once)
        resumed = await open_get(port3, mcp, last_event_id=seen[-1][0])
        assert await call(port2, mcp, "poke", 40) == (200, "poked")
        got = [await next_message(resumed) for _ in range(4)]
        ids = [event_id for event_id, _ in seen + got]
        sequences = [int(event_id.rsplit("-", 1)[1]) for event_id in ids]  # type: ignore[union-attr]
        assert sequences == sorted(set(sequences)) and len(sequences) == 6, ids
        with trio.move_on_after(0.5):  # and nothing more: no event twice
            extra = await resumed.message()
            raise AssertionError(f"an event came twice: {extra}")
        await resumed.client.stream.aclose()
        await mcp.client.stream.aclose()
