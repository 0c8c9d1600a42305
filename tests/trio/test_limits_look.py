"""The sweeper's look at the connections goes a batch at a time: thousands
of open streams do not make one long scheduler batch at each tick."""

from __future__ import annotations

from math import inf

import trio

from trio_mcp import ServerConfig
from trio_mcp._trio._limits import LOOKS_PER_TURN, TimeLimits
from trio_mcp._trio._quotas import ConnectionQuota


class Phase:
    phase = None  # (not sending a head)


class Idle:
    """What the look reads of a connection: one in a phase with a limit."""

    def __init__(self, since: float | None, limit: float = 30.0) -> None:
        self.since = since
        self.limit = limit
        self.http = Phase()
        self.answering = None
        self.holding = False
        self.group = "127.0.0.1"
        self.interruptible = None


async def test_the_look_yields_between_batches_and_skips_what_ended_meanwhile() -> None:
    connections = {Idle(since=None) for _ in range(LOOKS_PER_TURN * 3)}
    quota = ConnectionQuota(ServerConfig())
    limits = TimeLimits(ServerConfig(), connections, quota)  # type: ignore[arg-type]
    batches = 0
    ended: list[Idle] = []

    async def other_task() -> None:
        nonlocal batches
        while True:
            batches += 1
            if batches == 2:  # the look has yielded once: those it has not seen yet end
                ended.extend(c for c in connections if c.since is None)
                connections.difference_update(ended)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await trio.lowlevel.checkpoint()
        assert await limits.look(60.0) == []
        nursery.cancel_scope.cancel()
    assert batches >= 3  # (the other task ran between the look's batches)
    assert LOOKS_PER_TURN <= len(ended) < 3 * LOOKS_PER_TURN - LOOKS_PER_TURN // 2
    assert {c.since for c in ended} == {None}  # (not looked at once they had ended)
    assert {c.since for c in connections} == {60.0}


async def test_a_small_server_is_looked_at_in_one_go() -> None:
    connections = {Idle(since=None, limit=inf) for _ in range(10)}
    quota = ConnectionQuota(ServerConfig())
    limits = TimeLimits(ServerConfig(), connections, quota)  # type: ignore[arg-type]
    assert await limits.look(5.0) == []
    assert {c.since for c in connections} == {5.0}
