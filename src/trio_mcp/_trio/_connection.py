"""What the trio shell keeps per connection: its time limit and drain state,
the byte stream it talks over, and the cached Date header value.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from email.utils import formatdate
from math import inf
from typing import TYPE_CHECKING, Final, Protocol

from .._config import ServerConfig
from .._errors import RemoteProtocolError
from .._http._connection import HEAD, IDLE, HTTP11Connection
from .._http._forwarded import NO_PROXY, Trust
from .._http._handler import Cancellable, SlowAnswer

if TYPE_CHECKING:
    from ._slow_lane import SlowLane
    from ._socketio import HeadGathering

#: How long a connection open when a graceful shutdown closed the listener
#: may still take to send a request (its first, or the next on a kept-alive
#: one): a client or proxy that was about to send it sends it at once; one
#: that stays silent is not owed the whole idle timeout.
LAST_REQUEST_GRACE_S: Final = 1.0

#: A head or body that took longer than its limit.
TOO_SLOW: Final = RemoteProtocolError("request took too long to arrive", 408)


class DateCache:
    """The Date header value, formatted once per second.

    While a sweeper ticks (``HTTPServer.enforce_timeouts``, at least twice a
    second), it refreshes the value and a response reads it without the
    clock, so the Date may lag by up to a tick; otherwise every read checks
    the clock.
    """

    __slots__ = ("_second", "_value", "_tickers")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""
        #: How many sweepers refresh the value now.
        self._tickers = 0

    def get(self) -> bytes:
        if self._tickers:
            return self._value
        return self.refresh()

    def refresh(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._value = formatdate(now, usegmt=True).encode("ascii")
        return self._value

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """While entered, the caller calls `refresh` at least twice a second."""
        self.refresh()
        self._tickers += 1
        try:
            yield
        finally:
            self._tickers -= 1


class ByteStream(Protocol):
    """What a connection task needs from its transport (trio streams and SocketIO)."""

    async def receive_some(self, max_bytes: int) -> bytes | bytearray: ...
    async def send_all(self, data: bytes) -> None: ...
    async def send_eof(self) -> None: ...
    async def aclose(self) -> None: ...


class Closable(Protocol):
    def close(self) -> None: ...


class Answering(Protocol):
    """What the sweeper needs of the writer of a deferred answer (`ConnectionWriter`)."""

    #: When the sweeper first saw the answer running (None: not yet).
    seen: float | None
    #: How long the answer may run, from then; past it the sweeper sets
    #: `overdue` and ends the connection.
    time_limit_s: float
    overdue: bool
    #: Someone watches the answer's client already.
    watched: bool
    #: What to start once the answer has run long (None: nothing, or started).
    slow: SlowAnswer | None

    def peer_gone_already(self) -> bool: ...
    def peer_left(self) -> None: ...
    async def watch_peer(self) -> None: ...


class Interruptible(Protocol):
    """A byte stream the sweeper can end a head on without a cancel, and
    whose reads it can move to the slow lane (`SocketIO`)."""

    lane: SlowLane | None
    head: HeadGathering | None

    def interrupt(self) -> None: ...
    def send_nowait(self, data: bytes) -> int: ...
    def close(self) -> None: ...


class Timer(Cancellable, Protocol):
    """A connection's cancel scope, as the sweeper and the connection's end
    see it: trio's, or an arrival's stand-in until its task starts
    (`_arrivals.py`)."""

    @property
    def cancelled_caught(self) -> bool: ...


class Connection:
    """Book-keeping the server needs for one connection: time limit and drain.

    `limit` is how long the current phase may take (inf: no limit) and `since`
    when the sweeper first saw that phase (None: not yet). The connection task
    sets both as it changes phase (`limit_phase`), without reading the clock;
    `HTTPServer.enforce_timeouts` stamps `since` and cancels `timer` once
    `limit` has passed since then. That keeps time limits off trio's deadline
    heap and off the clock on every request.

    `answering` is the writer of the deferred answer being produced, if any:
    the sweeper ends one whose client is gone at its first look, and starts
    watching the client of one still running at its second
    (`ConnectionWriter.watch_peer`).

    A connection over a socket that can be interrupted (`interruptible`) ends an
    overdue head without a cancel (`end_overdue`): a cancel unwinds the
    connection task's stack with an exception and runs its ending through
    two more cancel scopes, and a slowloris makes thousands of such endings.
    """

    __slots__ = (
        "http",
        "timer",
        "interruptible",
        "limit",
        "since",
        "answering",
        "holding",
        "overdue",
        "group",
        "hop",
    )

    def __init__(
        self,
        http: HTTP11Connection,
        timer: Timer,
        interruptible: Interruptible | None = None,
        group: str | None = None,
    ) -> None:
        self.http = http
        self.timer = timer
        self.interruptible = interruptible
        self.limit = inf
        self.since: float | None = None
        self.answering: Answering | None = None
        #: The bytes of the bodies' budget this connection holds (its body is
        #: being received).
        self.holding = 0
        #: The sweeper interrupted its head: the connection task answers 408
        #: when its read ends.
        self.overdue = False
        #: The client address group it counts in (None: not counted, as
        #: with `HTTPServer.handle_stream`).
        self.group = group
        #: The hop its last passed-on request went through, kept open for the
        #: next (`_peers.relay`); closed with the connection.
        self.hop: Closable | None = None

    def limit_phase(self, seconds: float) -> None:
        """A new phase begins that may take `seconds` (inf: no limit)."""
        self.limit = seconds
        self.since = None

    def limit_head(self, seconds: float, lane: SlowLane | None) -> None:
        """A head that did not come whole in one read begins: it may take
        `seconds`, and it is slow, so its next reads wait in `lane` (if any;
        the sweeper moves them back once the head is in), which reads its
        lines itself once its request line is in."""
        self.limit_phase(seconds)
        interruptible = self.interruptible
        if interruptible is not None and lane is not None:
            interruptible.lane = lane
            interruptible.head = self.http

    def end_overdue(self) -> None:
        """End a connection whose phase has passed its limit (the sweeper
        calls this): a head still arriving over an interruptible socket is
        interrupted, its read ends as if at end of stream and the task answers
        408 (`overdue`); anything else, or a head still there at the next
        tick, has its scope cancelled."""
        interruptible = self.interruptible
        if interruptible is not None and not self.overdue and self.http.phase is HEAD:
            self.overdue = True
            interruptible.interrupt()
        else:
            self.timer.cancel()

    def drain(self) -> None:
        """The listener has closed: a connection waiting for a request gets
        `LAST_REQUEST_GRACE_S` from now to send it (it is served, and told
        to close), since its client may have sent it already; then it closes."""
        self.http.draining = True
        if self.http.phase is IDLE and self.limit > LAST_REQUEST_GRACE_S:
            self.limit = LAST_REQUEST_GRACE_S
            self.since = None  # (the sweeper times it from its next look)


def http_connection(
    config: ServerConfig, client: str, trust: Trust, hop: tuple[str, bytes] | None
) -> HTTP11Connection:
    """A connection's sans-IO state; `hop`: a passed-on request's scheme and
    what followed its preamble (`serve_hop`), its client `client`."""
    http = HTTP11Connection(config)
    http.client = client
    if hop is not None:
        http.proxy = NO_PROXY
        http.scheme = hop[0]
        http.receive_data(hop[1])
    elif trust and trust.trusts(client):
        http.proxy = trust
    return http
