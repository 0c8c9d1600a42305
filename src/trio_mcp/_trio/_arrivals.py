"""Arrivals: a new connection's first request head, read without a task
until it is in.

Most clients send their first request whole as they connect, and the accept
finds it there: its connection's task starts with it. A first head that is
not whole yet (a slow client, or a slowloris trickling it) waits in the slow
lane (`SlowLane.arrive`) with no task: the lane reads what comes, a few
reads per turn, into the connection's parser, and the task starts once the
parser has something to say (a request, a refusal) or the head is in and a
body follows. A task (its coroutines, its start, a wake for the 408, its
end) was most of what a slowloris connection held and cost
(benchmarks/README.md, "Arrivals").

An arrival is a `Connection` like any other for the sweeper, which times it
by its phase (the idle limit until its first bytes, then the head limit,
shortened while many heads are slow) and ends it with the connection's own
`end_overdue`: the `Arrival` stands in for the socket (``interrupt``: a
408, then a close, as for a head interrupted over `SocketIO`) and for the
connection's cancel scope (``cancel``: a close, as for an idle connection),
until its task takes over both.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import trio

from .._config import ServerConfig
from .._errors import RemoteProtocolError
from .._http._connection import CLOSED, HEAD, IDLE, NEED_DATA, Event
from ._connection import TOO_SLOW, Connection, DateCache, http_connection
from ._quotas import ConnectionQuota
from ._tasks import spawn

if TYPE_CHECKING:
    from ._slow_lane import SlowLane
    from ._socketio import HeadGathering

#: What a connection's parser said before its task started (None: ask it).
First = Event | RemoteProtocolError | None
#: Serves an arrival in a task: its socket, address group and client, its
#: connection, what its parser said (`HTTPServer._serve_socket`).
Serve = Callable[[socket.socket, str, str, Connection, First], Awaitable[None]]

logger = logging.getLogger("trio_mcp.server")


def group_of(conn: Connection) -> str:
    """The address group a connection of a server's own listeners counts in."""
    group = conn.group
    assert group is not None
    return group


class Doorway:
    """What a server's arrivals share: where they wait, and what makes,
    starts, counts and ends them."""

    __slots__ = ("config", "lane", "connections", "quota", "dates", "nursery", "serve")

    def __init__(
        self,
        config: ServerConfig,
        lane: SlowLane,
        connections: set[Connection],
        quota: ConnectionQuota,
        dates: DateCache,
    ) -> None:
        self.config = config
        self.lane = lane
        #: The server's connections, arrivals among them.
        self.connections = connections
        self.quota = quota
        self.dates = dates
        self.nursery: trio.Nursery | None = None
        self.serve: Serve | None = None

    def serve_in(self, nursery: trio.Nursery, serve: Serve) -> None:
        """Start the tasks of arrivals in `nursery`, each running `serve`."""
        self.nursery = nursery
        self.serve = serve

    def start(self, sock: socket.socket, conn: Connection, first: First) -> None:
        """Start the task of an arrival whose parser has something to say."""
        assert self.nursery is not None and self.serve is not None
        group = group_of(conn)
        spawn(self.nursery, "a connection", self.serve, sock, group, conn.http.client, conn, first)

    def admit(self, sock: socket.socket, host: str, group: str, draining: bool) -> None:
        """Take a connection just accepted from `host`: read what it sent, and
        start its task now if that says enough, or let it wait in the lane."""
        config = self.config
        http = http_connection(config, host, self.quota.trust, None)
        http.draining = draining
        arrival = Arrival(sock, self)
        conn = arrival.conn = Connection(http, arrival, arrival, group)
        conn.limit_phase(config.idle_timeout_s)
        self.connections.add(conn)
        try:
            sock.setblocking(False)
            data = sock.recv(config.receive_chunk_bytes)
        except BlockingIOError:
            arrival.wait()
            return
        except OSError:
            arrival.close()  # (reset before we got to it)
            return
        if arrival.guarded_took(data):
            arrival.wait()


class Arrival:
    """A connection whose first head is arriving, with no task yet (module
    docstring): the sweeper's `Interruptible` and cancel scope for it."""

    __slots__ = ("sock", "conn", "doorway", "cancel_called", "in_lane")

    #: (as `SocketIO`'s: an arrival's reads are the lane's already)
    lane: SlowLane | None = None
    head: HeadGathering | None = None
    #: (as a cancel scope's: nothing runs under it)
    cancelled_caught: Final = False

    def __init__(self, sock: socket.socket, doorway: Doorway) -> None:
        self.sock: socket.socket | None = sock
        self.conn: Connection
        self.doorway = doorway
        #: (as a cancel scope's: `cancel` was called)
        self.cancel_called = False
        #: Whether it waits in the lane (else its first read said enough).
        self.in_lane = False

    def wait(self) -> None:
        """Wait in the lane for more of the head."""
        self.in_lane = True
        self.doorway.lane.arrive(self)

    def read(self) -> bool:
        """Read what came (the lane calls this when the socket is readable);
        whether to wait for more."""
        sock = self.sock
        if sock is None:
            return False
        try:
            data = sock.recv(self.doorway.config.receive_chunk_bytes)
        except BlockingIOError:
            return True
        except OSError:
            self.close()  # (a reset: nobody to answer)
            return False
        return self.guarded_took(data)

    def guarded_took(self, data: bytes) -> bool:
        """`took`, run by the accept loop or the lane, which serve every
        connection: what fails in it ends this one alone, logged, as it would
        have ended its task."""
        try:
            return self.took(data)
        except Exception:
            logger.exception("a new connection's first head failed; it ended alone")
            self.close()
            return False

    def took(self, data: bytes) -> bool:
        """Give `data` (b"": the end of the stream) to the parser; whether
        to wait for more. Starts the task once the parser has more to say
        than that it needs more of a head."""
        conn = self.conn
        http = conn.http
        began = http.phase is IDLE
        http.receive_data(data)
        first: First
        try:
            first = http.next_event()
        except RemoteProtocolError as exc:
            first = exc  # (the task answers it, as it would have)
        if first is NEED_DATA:
            phase = http.phase
            if phase is IDLE:
                return True
            if phase is HEAD:
                if began:
                    conn.limit_phase(self.doorway.config.head_timeout_s)
                return True
            first = None  # (a body follows: the task reads it, under its limits)
        elif first is CLOSED:
            self.close()  # (gone before a byte of a request: nothing to say)
            return False
        sock = self.sock
        assert sock is not None
        self.sock = None
        doorway = self.doorway
        if self.in_lane:
            doorway.lane.forget(sock)  # (its task reads it from now)
        doorway.start(sock, conn, first)
        return False

    def interrupt(self) -> None:
        """A head past its limit: what the kernel takes of a 408 goes now,
        then the socket closes (a slowloris is not owed a lingering close)."""
        if self.sock is not None:
            self.send_nowait(self.conn.http.error_response(TOO_SLOW, self.doorway.dates.get()))
            self.close()

    def send_nowait(self, data: bytes) -> int:
        """Send what the kernel takes of `data` now (none, if the peer is gone)."""
        if self.sock is None:
            return 0
        try:
            return self.sock.send(data)
        except OSError:
            return 0

    def cancel(self) -> None:
        """Past the idle limit with no request begun, or the server is
        stopping: close."""
        self.cancel_called = True
        self.close()

    def close(self) -> None:
        """Close now, and count the connection out."""
        sock = self.sock
        if sock is None:
            return
        self.sock = None
        doorway = self.doorway
        if self.in_lane:
            doorway.lane.forget(sock)
        sock.close()
        conn = self.conn
        doorway.connections.discard(conn)
        doorway.quota.leave(group_of(conn))
        # (the connection still names this arrival as its socket and scope,
        # for an ending the sweeper chose already: each method here asks for
        # the socket first; without the cycle, refcounts free them both)
        del self.conn
