"""A client that goes away while its request runs frees what it held: the
request is cancelled (2026-07-28, stateless 2025), or goes on with its socket
closed at once (a 2025 session's request, whose events a resume can fetch)."""

from __future__ import annotations

import itertools
import os
import socket
import struct

import orjson
import pytest
import trio
from _support import (
    MCP,
    connect,
    cycle_garbage,
    initialize_body,
    mcp_post,
    modern_body,
    modern_headers,
)

from trio_mcp import Server
from trio_mcp._trio._limits import CANCELS_PER_TURN

#: Short time limits, so the server's sweeper ticks every 0.1 s.
QUICK_TICKS = {"write_timeout_s": 0.8}
CALLS = 20


class Hanging:
    """An app whose `hang` tool never returns, counting the runs still going."""

    def __init__(self) -> None:
        self.running = 0
        self.started = 0
        self.app = app = Server("hanging")

        @app.tool()
        async def hang() -> str:
            self.running += 1
            self.started += 1
            try:
                await trio.sleep_forever()
            finally:
                self.running -= 1
            return "never"  # pragma: no cover

        @app.tool()
        async def slow(seconds: float) -> str:
            await trio.sleep(seconds)
            return "slept"

    async def until(self, check, what: str) -> None:
        """Wait (5 s at most) until `check()` holds."""
        with trio.move_on_after(5):
            while not check():
                await trio.sleep(0.02)
        assert check(), f"not within 5 s: {what}"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def hang_call(id: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "hang", "arguments": {}},
    }


async def post_and_vanish(port: int, data: bytes) -> None:
    """Send one request, then close the connection without reading."""
    client = await connect(port)
    await client.send(data)
    await client.stream.aclose()


async def vanish_from_2026_calls(port: int, hanging: Hanging) -> None:
    """`CALLS` hanging 2026 calls whose clients go at once; until all are
    running, then until every one is cancelled."""
    for id in range(CALLS):
        body = modern_body("tools/call", {"name": "hang", "arguments": {}}, id=id)
        await post_and_vanish(
            port, mcp_post(body, version="2026-07-28", extra=modern_headers(body))
        )
    await hanging.until(lambda: hanging.started == CALLS, "all calls running")
    await hanging.until(lambda: hanging.running == 0, "every call cancelled")


async def test_a_2026_request_is_cancelled_when_its_client_goes(start_mcp) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    port = server.ports[0]
    fds = open_fds()
    await vanish_from_2026_calls(port, hanging)
    await hanging.until(lambda: server.statistics().connections_open == 0, "connections gone")
    assert open_fds() <= fds


async def test_a_cancelled_call_is_freed_without_the_cycle_collector(start_mcp) -> None:
    """A call cancelled because its client went leaves no reference cycle:
    its writer and its keepalives referred to each other, so each vanished
    call held its connection, socket and buffers until a full collection
    (paced once a minute: 200 such calls a second took the soak's RSS up and
    down by 40 MB, and the collection stalled the server for 100-240 ms)."""
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    with cycle_garbage() as left:
        await vanish_from_2026_calls(server.ports[0], hanging)
        await hanging.until(lambda: server.statistics().connections_open == 0, "connections gone")
    assert not left & {
        "Connection",
        "ConnectionWriter",
        "PostStream",
        "SocketIO",
        "HTTP11Connection",
    }


class Watches(trio.abc.Instrument):
    """How many client watches (`ConnectionWriter.watch_peer`) are started."""

    def __init__(self) -> None:
        self.started = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        frame = getattr(task.coro, "cr_frame", None)  # (`spawn`'s guard is plain Python)
        if frame is not None and frame.f_locals.get("what") == "a client watch":
            self.started += 1


async def test_a_client_gone_before_the_sweeper_looks_needs_no_watch(start_mcp) -> None:
    """The sweeper's look at a long answer finds its client gone without
    waiting, and ends the answer with no watching task."""
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    port = server.ports[0]
    watches = Watches()
    trio.lowlevel.add_instrument(watches)
    try:
        await vanish_from_2026_calls(port, hanging)
    finally:
        trio.lowlevel.remove_instrument(watches)
    assert watches.started == 0


async def test_a_call_whose_client_left_ends_at_the_first_tick_that_sees_it(
    start_mcp, autojump_clock: trio.testing.MockClock
) -> None:
    """Calls whose clients sent them and left end at the sweeper's first look
    at them, not its second: a vanished call holds its task, socket and
    objects for up to one tick, not two (under a flood of them, what they
    hold outlives more young collections the longer they run)."""
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    tick_s = server._limits.tick_s
    for id in range(CALLS):
        body = modern_body("tools/call", {"name": "hang", "arguments": {}}, id=id)
        await post_and_vanish(
            server.ports[0], mcp_post(body, version="2026-07-28", extra=modern_headers(body))
        )
        await hanging.until(lambda n=id + 1: hanging.started == n, "the call running")
        started = trio.current_time()
        await hanging.until(lambda: hanging.running == 0, "the call cancelled")
        assert trio.current_time() - started <= tick_s


class RunningPerBatch(trio.abc.Instrument):
    """How many of `hanging`'s calls still run, at each scheduler batch's end."""

    def __init__(self, hanging: Hanging) -> None:
        self.hanging = hanging
        self.counts: list[int] = []

    def before_io_wait(self, timeout: float) -> None:
        self.counts.append(self.hanging.running)


async def test_the_calls_of_clients_gone_in_one_tick_end_a_few_per_batch(start_mcp) -> None:
    """Forty clients that leave between two of the sweeper's looks have their
    calls cancelled over several scheduler batches, not all in one that every
    other request would wait behind."""
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    port = server.ports[0]
    for id in range(40):
        body = modern_body("tools/call", {"name": "hang", "arguments": {}}, id=id)
        await post_and_vanish(
            port, mcp_post(body, version="2026-07-28", extra=modern_headers(body))
        )
    await hanging.until(lambda: hanging.started == 40, "all calls running")
    running = RunningPerBatch(hanging)
    trio.lowlevel.add_instrument(running)
    try:
        await hanging.until(lambda: hanging.running == 0, "every call cancelled")
    finally:
        trio.lowlevel.remove_instrument(running)
    ended = [before - after for before, after in itertools.pairwise(running.counts)]
    assert sum(ended) == running.counts[0] > CANCELS_PER_TURN
    assert max(ended) <= CANCELS_PER_TURN


async def test_a_stateless_request_is_cancelled_when_its_client_goes(start_mcp) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS, stateless=True)
    port = server.ports[0]
    for id in range(CALLS):
        await post_and_vanish(port, mcp_post(hang_call(id), version="2025-11-25"))
    await hanging.until(lambda: hanging.started == CALLS, "all calls running")
    await hanging.until(lambda: hanging.running == 0, "every call cancelled")
    await hanging.until(lambda: server.statistics().connections_open == 0, "connections gone")


async def anyone(request) -> str:
    return "someone"


@pytest.mark.parametrize("authenticate", [None, anyone], ids=["anonymous", "authenticated"])
async def test_a_session_request_goes_on_but_its_socket_is_closed(start_mcp, authenticate) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, authenticate=authenticate, http=QUICK_TICKS)
    port = server.ports[0]
    async with await connect(port) as client:
        mcp = MCP(client)
        await mcp.initialize()
        fds = open_fds()
        for id in range(CALLS):
            await post_and_vanish(
                port, mcp_post(hang_call(id), session=mcp.session, version=mcp.version)
            )
        await hanging.until(lambda: hanging.started == CALLS, "all calls running")
        # every socket is closed, while every call goes on
        await hanging.until(lambda: open_fds() <= fds, "sockets closed")
        assert hanging.running == CALLS
        await client.send(
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
            + mcp.session.encode()
            + b"\r\n\r\n"
        )
        assert (await client.read_reply()).status == 200
    await hanging.until(lambda: hanging.running == 0, "the session's end cancels them")


async def test_a_pipelined_request_during_a_long_answer_is_kept_and_served(start_mcp) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        slow = {**hang_call(2), "params": {"name": "slow", "arguments": {"seconds": 0.5}}}
        await client.send(mcp_post(slow, session=mcp.session, version=mcp.version))
        await trio.sleep(0.3)  # the server watches the client by now
        quick = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        await client.send(mcp_post(quick, session=mcp.session, version=mcp.version))
        with trio.fail_after(5):
            first, second = await client.read_reply(), await client.read_reply()
    assert orjson.loads(first.body)["result"]["content"][0]["text"] == "slept"
    assert orjson.loads(second.body) == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_a_connection_goes_on_after_a_watched_answer(start_mcp) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    async with await connect(server.ports[0]) as client:
        mcp = MCP(client)
        await mcp.initialize()
        for id, seconds in ((2, 0.4), (3, 0.0), (4, 0.4)):
            answer = await mcp.call(
                "tools/call", {"name": "slow", "arguments": {"seconds": seconds}}, id=id
            )
            assert answer["result"]["content"][0]["text"] == "slept"
        assert orjson.loads((await mcp.post(initialize_body(id=9), session=None)).body)["result"]


async def test_a_reset_counts_as_gone(start_mcp) -> None:
    hanging = Hanging()
    server = await start_mcp(hanging.app, http=QUICK_TICKS)
    body = modern_body("tools/call", {"name": "hang", "arguments": {}})
    client = await connect(server.ports[0])
    await client.send(mcp_post(body, version="2026-07-28", extra=modern_headers(body)))
    await hanging.until(lambda: hanging.running == 1, "the call running")
    await trio.sleep(0.3)  # watched by now
    sock = client.stream.socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # an RST, not a FIN
    await hanging.until(lambda: hanging.running == 0, "the call cancelled")
