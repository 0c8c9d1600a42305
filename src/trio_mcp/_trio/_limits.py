"""The server's time limits, applied by one sweeper instead of a deadline
per connection.

Each connection keeps the limit of its current phase (idle, head, body,
writing; none while the handler runs) as a plain number, set as it changes
phase without reading the clock (`Connection.limit_phase`). At each tick
`TimeLimits.look` notes when it first sees each phase and each deferred
answer, and returns the connections whose limit (or whose answer's
``time_limit_s``) has passed since; `end_gradually` ends them a few per
turn (`_turns.py`). The look, too, goes a few hundred connections per turn,
so that thousands of open streams do not make one long batch at each tick.
So a request costs no clock reading and no work in trio's deadline heap;
limits fire no earlier than set and up to two ticks late.

The same look moves the reads of a slow head (`_slow_lane.py`) back from
the slow lane once the head is in; it ends an answer whose client is gone
already at its first tick, and watches the clients of long answers (from
their second tick), starts what slow ones do to keep their responses alive
(`ResponseWriter.slow`), shortens the head limit while many heads are slow,
and tells the connection quota when capacity frees up, for its refusals'
``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from math import inf
from typing import Final

import trio

from .._config import ServerConfig
from .._http._connection import HEAD
from ._connection import Connection
from ._quotas import ConnectionQuota, head_limit, slow_heads_threshold
from ._slow_lane import SlowLane, slow_lane
from ._tasks import in_python, spawn
from ._turns import keep_turns, take_turn

#: How many endings (overdue connections, answers whose client left) the
#: sweeper runs per turn (`_turns.py`).
CANCELS_PER_TURN: Final = 4
#: How many connections the sweeper looks at per turn: one look
#: at 10,000 open streams took about 10 ms, twice a second, and every request
#: waited behind it.
LOOKS_PER_TURN: Final = 512


def tick_s(config: ServerConfig) -> float:
    """How often a server with `config` looks at its time limits: an eighth
    of the shortest, at most every 0.5 s."""
    shortest = min(
        config.idle_timeout_s,
        config.head_timeout_s,
        config.body_timeout_s,
        config.write_timeout_s,
    )
    if config.ssl_certfile is not None:
        shortest = min(shortest, config.ssl_handshake_timeout_s)
    return min(0.5, shortest / 8)


async def end_gradually(endings: list[Callable[[], None]]) -> None:
    """Run the `endings` the look gave, `CANCELS_PER_TURN` per turn.

    Each ending wakes a connection, which runs its end (a 408, a cancelled
    answer, a close) in the next batch: a few at a time, so that a thousand
    slow heads due in one tick, or the calls of two hundred clients that
    left since the last, do not make one batch that every other request
    waits behind.
    """
    while endings:
        await take_turn()
        for end in endings[-CANCELS_PER_TURN:]:
            end()
        del endings[-CANCELS_PER_TURN:]


def start_clock(
    clock: trio.Nursery, sweep: Callable[[], Awaitable[None]], limits: TimeLimits, lane: bool
) -> None:
    """Start a server's clock tasks in `clock`: the sweeper (`sweep`), and the
    slow lane of `limits`' connections where `lane` (their reads can be
    interrupted) and there is epoll; the clock outlives every connection."""
    clock.start_soon(in_python, keep_turns, name=keep_turns)
    clock.start_soon(in_python, sweep, name=sweep)
    limits.lane = slow_lane() if lane else None
    if limits.lane is not None:
        clock.start_soon(in_python, limits.lane.run, name=limits.lane.run)


class TimeLimits:
    """The sweeper's view of a server's connections (module docstring)."""

    __slots__ = (
        "connections",
        "quota",
        "watchers",
        "head_limit_s",
        "heads_waiting",
        "_slow_heads",
        "_head_timeout_s",
        "tick_s",
        "lane",
    )

    def __init__(
        self, config: ServerConfig, connections: set[Connection], quota: ConnectionQuota
    ) -> None:
        self.connections = connections
        self.quota = quota
        #: Where the watches of long answers' clients run (None: not watched).
        self.watchers: trio.Nursery | None = None
        #: The head time limit now (shorter while many heads are slow) and the
        #: number of connections still sending their heads, at the last tick.
        self.head_limit_s = config.head_timeout_s
        self.heads_waiting = 0
        self._slow_heads = slow_heads_threshold(config, quota.cap)
        self._head_timeout_s = config.head_timeout_s
        self.tick_s = tick_s(config)
        #: Where slow heads' reads wait (None: with the others; the server
        #: sets it while it runs).
        self.lane: SlowLane | None = None

    async def look(self, now: float) -> list[Callable[[], None]]:
        """Note the phases and answers begun since the last tick and watch
        long answers' clients; what ends the connections whose limit (or
        whose answer's limit) has passed, and the answers whose client has
        gone (for `end_gradually`). `LOOKS_PER_TURN` connections per turn."""
        endings: list[Callable[[], None]] = []
        watchers = self.watchers
        shortened = self.head_limit_s
        heads = 0
        # By when a connection, one receiving a body and one of each crowded
        # group must end (for the refusals' Retry-After).
        frees = bodies_free = inf
        quota = self.quota
        groups: dict[str, float] = dict.fromkeys(quota.crowded, inf)
        connections = self.connections
        many = len(connections) > LOOKS_PER_TURN
        looked = 0
        # (a copy when it yields: connections come and go meanwhile)
        for conn in list(connections) if many else connections:
            if many:
                looked += 1
                if looked == LOOKS_PER_TURN:
                    looked = 0
                    await take_turn()
                if conn not in connections:
                    continue  # (it ended while the look yielded)
            since = conn.since
            limit = conn.limit
            if conn.http.phase is HEAD and limit is not inf:  # (waiting for the rest of a head)
                heads += 1
                limit = min(limit, shortened)
            else:
                io = conn.interruptible
                if io is not None and io.lane is not None:
                    io.lane = io.head = None  # (its head is in: back with the others)
            if since is None:
                conn.since = since = now  # a phase begun since the last tick
            elif now - since >= limit:
                endings.append(conn.end_overdue)
            due = since + limit
            writer = conn.answering
            if writer is not None:
                seen = writer.seen
                if seen is None:
                    writer.seen = seen = now
                    # A client gone by the first tick that sees its answer (one
                    # that sent its call and left) needs no second: its answer
                    # ends now, before what it holds outlives young collections.
                    if watchers is not None and writer.peer_gone_already():
                        writer.watched = True
                        endings.append(writer.peer_left)
                elif now - seen >= writer.time_limit_s and not writer.overdue:
                    writer.overdue = True
                    endings.append(conn.end_overdue)
                elif watchers is not None:
                    if not writer.watched:
                        # An answer seen running at two ticks takes long: watch its
                        # client from now on (quick answers never cost a task).
                        writer.watched = True
                        if writer.peer_gone_already():
                            endings.append(writer.peer_left)
                        else:
                            spawn(watchers, "a client watch", writer.watch_peer)
                    slow = writer.slow
                    if slow is not None and now - seen >= slow.slow_after_s:
                        writer.slow = None  # (started once)
                        spawn(watchers, "a slow answer's keepalives", slow.keep_alive)
                due = min(due, seen + writer.time_limit_s)
            if due < frees:
                frees = due
            if conn.holding and due < bodies_free:
                bodies_free = due
            if groups and conn.group in groups and due < groups[conn.group]:
                groups[conn.group] = due
        self.heads_waiting = heads
        self.head_limit_s = head_limit(heads, self._slow_heads, self._head_timeout_s)
        # A connection past its limit ends at the first tick that sees it.
        tick = self.tick_s
        quota.noted(
            frees + tick,
            bodies_free + tick,
            {group: due + tick for group, due in groups.items()},
        )
        return endings
