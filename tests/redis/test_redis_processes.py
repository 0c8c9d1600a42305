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
from _support import MCP, EventReader, connect, connect_when_up, free_port, mcp_post
from redis_fixtures import (
    COREDIS_LEFTOVERS,
    EVENT_WAIT_S,
    StartRedis,
    next_message,
    open_get,
)

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


async def test_when_a_sessions_maker_is_killed_its_streams_holder_adopts_it(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    with replicas(redis.url, 2) as started, trio.fail_after(60):
        (_, port1), (two, port2) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port2))
        await mcp.initialize()
        stream = await open_get(port1, mcp)
        assert await call(port1, mcp, "poke", 1) == (200, "poked")  # (via its maker)
        await next_message(stream)
        os.kill(two.pid, signal.SIGKILL)  # its maker dies; replica 1 holds its GET stream
        two.wait()
        # replica 1's notifications reach it once Redis saw the maker's
        # connection close (or, at the latest, its alive key lapsed)
        heard = False
        for i in range(20):
            assert await call(port1, mcp, "poke", 10 + i) == (200, "poked")
            with trio.move_on_after(0.5):
                await stream.message()
                heard = True
            if heard:
                break
        assert heard
        assert await call(port1, mcp, "poke", 40) == (200, "poked")
        _, message = await next_message(stream)
        assert message["method"] == "notifications/tools/list_changed"
        with trio.move_on_after(0.5):  # and nothing more: no event twice
            extra = await stream.message()
            raise AssertionError(f"an event came twice: {extra}")
        await stream.client.stream.aclose()
        await mcp.client.stream.aclose()


async def post_slow_call(port: int, mcp: MCP, seconds: float, id: int) -> EventReader:
    """A tools/call of ``progress_then_wait`` whose SSE answer is open: its
    priming event and its progress notification read."""
    reader = EventReader(await connect(port))
    body = {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": "progress_then_wait",
            "arguments": {"seconds": seconds},
            "_meta": {"progressToken": "p"},
        },
    }
    head = await reader.head(mcp_post(body, session=mcp.session, version=mcp.version))
    assert head.status_code == 200, head
    return reader


async def to_the_end(reader: EventReader) -> list[tuple[str | None, dict]]:
    """The messages (and their event ids) a stream gets until its end; then
    its connection is closed."""
    messages = []
    with trio.fail_after(EVENT_WAIT_S):
        try:
            while True:
                messages.append(await reader.message())
        except EOFError:
            pass
    await reader.client.stream.aclose()
    return messages


async def resumed_to_the_end(port: int, mcp: MCP, last_event_id: str) -> list[dict]:
    """The messages a GET with `last_event_id` on `port` gets, until its end."""
    reader = await open_get(port, mcp, last_event_id=last_event_id)
    return [message for _, message in await to_the_end(reader)]


async def test_a_post_stream_resumed_on_another_replica_gets_its_live_answer(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    with replicas(redis.url, 2) as started, trio.fail_after(60):
        (_, port1), (_, port2) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port1))
        await mcp.initialize()
        stream = await post_slow_call(port1, mcp, 1.0, 7)
        progress_id, progress = await next_message(stream)
        assert progress["method"] == "notifications/progress"
        await stream.client.stream.aclose()  # (a 2025 request goes on)
        # the client's load balancer sends its resume to the other replica
        messages = await resumed_to_the_end(port2, mcp, progress_id)  # type: ignore[arg-type]
        assert messages == [
            {
                "jsonrpc": "2.0",
                "id": 7,
                "result": {"content": [{"type": "text", "text": "waited"}]},
            }
        ]
        await mcp.client.stream.aclose()


async def test_a_post_stream_whose_replica_died_ends_with_an_error_answer(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    with replicas(redis.url, 3) as started, trio.fail_after(60):
        (one, port1), (_, port2), (_, port3) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port2))
        await mcp.initialize()
        stream = await post_slow_call(port1, mcp, 600.0, 8)
        progress_id, _ = await next_message(stream)
        os.kill(one.pid, signal.SIGKILL)  # the replica running the call dies
        one.wait()
        await stream.client.stream.aclose()
        # a resume anywhere gets one error answer for the call once the dead
        # replica's lease lapses, then the stream's end; a later one, the same
        first = await resumed_to_the_end(port2, mcp, progress_id)  # type: ignore[arg-type]
        again = await resumed_to_the_end(port3, mcp, progress_id)  # type: ignore[arg-type]
        assert len(first) == 1 and first == again, (first, again)
        assert first[0]["id"] == 8 and first[0]["error"]["code"] == -32603
        assert "stopped before it answered" in first[0]["error"]["message"]
        await mcp.client.stream.aclose()


async def test_a_post_stream_whose_call_was_cancelled_ends_on_another_replica_unanswered(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    with replicas(redis.url, 2) as started, trio.fail_after(60):
        (_, port1), (_, port2) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port2))
        await mcp.initialize()
        stream = await post_slow_call(port1, mcp, 600.0, 9)
        progress_id, _ = await next_message(stream)
        await stream.client.stream.aclose()
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 9},
        }
        assert (await mcp.post(cancel)).status == 202
        # the call is over, with no answer (the client gave up on it): the
        # resume ends after the replay, and no error is made up for it
        assert await resumed_to_the_end(port2, mcp, progress_id) == []  # type: ignore[arg-type]
        await mcp.client.stream.aclose()


async def test_a_post_stream_s_events_numbered_by_its_replica_replay_on_another(
    start_redis: StartRedis,
) -> None:
    # (a POST stream's replica numbers its events itself and writes them to
    # Redis in batches: what the client saw live, a resume elsewhere replays)
    redis = await start_redis()
    with replicas(redis.url, 2) as started, trio.fail_after(60):
        (_, port1), (_, port2) = started
        for _, port in started:
            await (await connect_when_up(port)).stream.aclose()
        mcp = MCP(await connect(port1))
        await mcp.initialize()
        stream = await post_slow_call(port1, mcp, 0.0, 10)
        priming_id, priming, _ = await stream.event()
        assert priming_id is not None and priming == b""
        live = await to_the_end(stream)
        assert [message.get("id") for _, message in live] == [None, 10]
        replayed = await to_the_end(await open_get(port2, mcp, last_event_id=priming_id))
        assert replayed == live
        await mcp.client.stream.aclose()
