"""The connections a server takes: in all, per client address, and those
still sending their head.

`ConnectionQuota` decides at accept time, before a connection costs a task:
beyond the server's cap (kept below the file-descriptor limit, so that
``accept`` never fails for want of one) or the client address's share, the
connection gets a 503 with ``Retry-After`` and is closed at once.
`head_limit` is the head time limit under pressure: while many connections
are still sending their heads, the limit shortens, so slow heads cannot
crowd out complete requests.
"""

from __future__ import annotations

import contextlib
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
#: When a connection is refused: a connection's life is not known in
#: advance, so this is a hint, not a promise.
REFUSED_RETRY_S: Final = 1
_REFUSAL: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"retry-after: %d\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 20\r\n"
    b"connection: close\r\n\r\n"
    b"too many connections" % REFUSED_RETRY_S
)


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

    __slots__ = ("cap", "per_address", "held", "_by_group", "trust", "bodies", "max_bodies")

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


def refuse(sock: socket.socket) -> None:
    """Answer a connection over quota 503 and close it, without a task: what
    the kernel takes of the answer now goes, the rest is dropped."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(_REFUSAL)
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
