"""The connections a server takes: in all, per client address, and those
still sending their head.

`ConnectionQuota` decides at accept time, before a connection costs a task:
beyond the server's cap (kept below the file-descriptor limit, so that
``accept`` never fails for want of one) or the client address's share, the
connection gets a 503 with ``Retry-After`` and is closed at once. The
``Retry-After`` is when capacity frees up: the server's sweeper notes, at
each tick, the earliest time a held connection must end (its phase's time
limit, or its answer's), and when the client's own connections must.
`head_limit` is the head time limit under pressure: while many connections
are still sending their heads, the limit shortens, so slow heads cannot
crowd out complete requests.
"""

from __future__ import annotations

import contextlib
import math
import resource
import socket
from typing import Final

from .._config import ServerConfig
from .._http._addresses import address_group
from .._http._forwarded import Trust

#: File descriptors kept free beyond the connection cap (listeners, the
#: stores' and the log's files, the refusals themselves): a tenth of the
#: limit, at least this many.
FD_RESERVE: Final = 64
#: The shortest head time limit pressure brings.
HEAD_LIMIT_FLOOR_S: Final = 1.0
#: The ``Retry-After`` of a refusal when no held connection has a time limit
#: (every one carries an event stream, which ends when its client leaves):
#: the server cannot know when one frees, so this is a guess, not a promise.
OPEN_ENDED_RETRY_S: Final = 10


def _unavailable(text: bytes) -> bytes:
    """A 503 that closes, saying `text`, with ``%d`` for its Retry-After."""
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nretry-after: %%d\r\n"
        b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n" % len(text)
    ) + text


_REFUSAL: Final = _unavailable(b"too many connections")
_BODIES_FULL: Final = _unavailable(b"too many bodies being received")


def retry_after_s(frees_at: float, now: float) -> int:
    """The ``Retry-After`` of a refusal at `now` when capacity frees at
    `frees_at`: whole seconds, at least 1."""
    if frees_at == math.inf:
        return OPEN_ENDED_RETRY_S
    return max(1, math.ceil(frees_at - now))


def fd_limit() -> int:
    """The process's soft limit on open file descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(config: ServerConfig, limit: int | None = None) -> int:
    """The most connections a server with `config` holds at once: its
    ``max_connections``, but never more than the file-descriptor `limit`
    (the process's, by default) leaves after the reserve."""
    limit = fd_limit() if limit is None else limit
    room = max(1, limit - max(FD_RESERVE, limit // 10))
    if config.max_connections is None:
        return room
    return min(config.max_connections, room)


class ConnectionQuota:
    """The connections held, in all and per client address group."""

    __slots__ = (
        "cap",
        "per_address",
        "held",
        "_by_group",
        "trust",
        "bodies",
        "max_bodies",
        "frees_at",
        "bodies_free_at",
        "crowded",
        "group_frees_at",
        "body_limit_s",
    )

    def __init__(self, config: ServerConfig) -> None:
        #: Trusted proxies: their connections count in the cap only.
        self.trust = Trust(config.forwarded_allow_ips)
        self.cap = connection_cap(config)
        per_address = config.max_connections_per_address
        self.per_address = per_address if per_address is not None else max(1, self.cap // 2)
        self.held = 0
        self._by_group: dict[str, int] = {}
        #: The bytes of the request bodies being received, and their budget.
        self.bodies = 0
        self.max_bodies = config.max_receiving_bytes
        #: What the sweeper found at its last tick (`noted`): by when a held
        #: connection, one receiving a body, and one of each group in
        #: `group_frees_at` will have ended (inf: none has a time limit).
        self.frees_at = math.inf
        self.bodies_free_at = math.inf
        self.group_frees_at: dict[str, float] = {}
        #: The groups refused for their share, while they hold it: the
        #: sweeper finds when their connections end (only theirs: the look
        #: costs a lookup per connection).
        self.crowded: set[str] = set()
        #: A body being received is whole or gone within this (its time
        #: limit and one tick of the sweeper, which is at most 0.5 s).
        self.body_limit_s = config.body_timeout_s + 0.5

    def noted(self, frees_at: float, bodies_free_at: float, groups: dict[str, float]) -> None:
        """The sweeper's findings at a tick (the attributes above), for the
        groups that were `crowded`; those still at their share stay crowded."""
        self.frees_at = frees_at
        self.bodies_free_at = bodies_free_at
        self.group_frees_at = groups
        by_group = self._by_group
        per_address = self.per_address
        self.crowded = {g for g in groups if dict.get(by_group, g, 0) >= per_address}

    def refusal(self, host: str, now: float) -> bytes:
        """The 503 for a connection from `host` that `admit` refused, with
        when to try again: when a held connection (or one of the address
        group's, when it is the group's share that is full) must end."""
        if self.held >= self.cap:
            frees_at = self.frees_at
        else:
            group = address_group(host)
            self.crowded.add(group)
            # (a group not looked at yet gets the server's soonest, once)
            frees_at = dict.get(self.group_frees_at, group, self.frees_at)
        return _REFUSAL % retry_after_s(frees_at, now)

    def bodies_refusal(self, now: float) -> bytes:
        """The 503 for a body the budget has no room for, with when a body
        being received must be whole or gone (one the sweeper has not seen
        yet began at most now)."""
        frees_at = min(self.bodies_free_at, now + self.body_limit_s)
        return _BODIES_FULL % retry_after_s(frees_at, now)

    def take_body(self, size: int) -> bool:
        """Reserve `size` bytes for a body being received; False when the
        budget has no room (a body alone may take the whole budget)."""
        if self.bodies and self.bodies + size > self.max_bodies:
            return False
        self.bodies += size
        return True

    def give_body(self, size: int) -> None:
        """A body reserved with `take_body` is whole, or gone."""
        self.bodies -= size

    def admit(self, host: str) -> str | None:
        """Take a connection from `host`: its address group, or None when the
        server or the group has its quota (refuse it)."""
        if self.held >= self.cap:
            return None
        group = address_group(host)
        count = dict.get(self._by_group, group, 0)
        if count >= self.per_address and not (self.trust and self.trust.trusts(host)):
            return None
        self._by_group[group] = count + 1
        self.held += 1
        return group

    def leave(self, group: str) -> None:
        """A connection admitted for `group` has closed."""
        self.held -= 1
        count = self._by_group[group] - 1
        if count:
            self._by_group[group] = count
        else:
            del self._by_group[group]

    def groups(self) -> int:
        """How many address groups hold connections (for statistics)."""
        return len(self._by_group)


def refuse(sock: socket.socket, refusal: bytes) -> None:
    """Send a connection over quota its `refusal` and close it, without a
    task: what the kernel takes of it now goes, the rest is dropped."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(refusal)
        sock.shutdown(socket.SHUT_WR)
    sock.close()


def slow_heads_threshold(config: ServerConfig, cap: int) -> int:
    """How many connections still sending their heads bring the shortest
    head limit: ``config.slow_heads_threshold``, or half the connection `cap`.

    Shortening sooner makes a slowloris that reconnects at once cost more,
    not less: each head dropped early is made again, and accepting and
    dropping one costs far more than one more trickled line."""
    if config.slow_heads_threshold is not None:
        return config.slow_heads_threshold
    return max(2, cap // 2)


def head_limit(waiting: int, threshold: int, head_timeout_s: float) -> float:
    """The head time limit while `waiting` connections are still sending
    their heads: the full limit up to half the `threshold`, then shorter in
    proportion, down to `HEAD_LIMIT_FLOOR_S` at the threshold and beyond."""
    floor = min(HEAD_LIMIT_FLOOR_S, head_timeout_s)
    half = threshold / 2
    if waiting <= half:
        return head_timeout_s
    if waiting >= threshold:
        return floor
    return max(floor, head_timeout_s * (threshold - waiting) / half)
