"""Connections spread evenly over the workers of a ``--workers`` group.

The kernel gives each new connection to one worker's ``SO_REUSEPORT``
socket by a hash of its addresses and ports: even on average, uneven by
chance (64 connections over two workers split 43/21 now and then), and
nothing corrects it. So each worker publishes how many connections it
holds, and one that accepts a connection while it holds `slack` or more
beyond the least loaded live peer (with ``worker_cpu_affinity``, and a
third more than it: `LOCAL_SHARE`) passes the socket to that peer before
reading anything from it; the peer admits it as a connection of its own
(its quotas and limits: a passed connection counts in the receiver's
quotas only, once). A TLS connection passes too: its handshake has not
begun. A connection is passed at most once.

- The counts (`SpreadCounts`): a small file in the group's private
  directory that the supervisor makes and every worker maps. Per worker
  slot: the pid of the process that serves it (0: none, or it is draining),
  the connections that process holds (written at admission and at close,
  never per request), and how many connections the slot has passed to each
  slot and received from each. What one slot has passed to another and the
  other has not received yet is in transit and counts for the receiver, so
  a burst of connections is not passed over and over to a peer that has not
  caught up. Each cell has one writer (the slot's process; the supervisor
  once that process is gone), and cells are whole 8-byte words.
- The passing: `socket.send_fds` on a unix stream connection that each
  worker keeps to each peer's ``<peer_sockets_dir>/<owner_name>.conns``
  socket (beside the hop sockets, in the same 0700 directory); each passed
  connection is two bytes (the sender's slot) with its descriptor.
- A peer that is not live, is gone (nobody listens), reads too slowly (its
  link's buffer is full) or whose link broke: the worker keeps the
  connection. A worker that dies loses the connections it held and those
  passed to it that it had not taken yet; the supervisor then marks its
  slot free and settles its transit counts (`SpreadCounts.forget`).
"""

from __future__ import annotations

import mmap
import os
import socket
from collections.abc import Callable
from typing import Any, Final

import trio

from .._config import ServerConfig
from ._peers import bind_peer_listener
from ._quotas import ConnectionQuota
from ._socketio import close_listener
from ._tasks import spawn

#: The suffix of the sockets connections are passed on, in the group's directory.
SUFFIX: Final = ".conns"
#: With ``worker_cpu_affinity``, a worker passes a connection only when it
#: holds a third more than the peer (and the slack): a passed connection
#: is served on another CPU than the one its packets are handled on, and
#: costs more CPU per request for as long as it lives (benchmarks/README.md,
#: "CPU affinity"), so small differences are left as the kernel made them.
LOCAL_SHARE: Final = 3
_CELL: Final = 8
_FLAGS: Final = getattr(socket, "MSG_NOSIGNAL", 0)
_RECEIVE_FLAGS: Final = getattr(socket, "MSG_CMSG_CLOEXEC", 0)

Admit = Callable[[socket.socket, Any, bool, trio.Nursery], None]


class SpreadCounts:
    """The group's shared counts, mapped from the file at `path` (made
    zeroed by `create`). Slot ``i``'s row: its process's pid, the
    connections it holds, what it passed to each slot, what it received
    from each."""

    __slots__ = ("slots", "_map", "cells")

    def __init__(self, path: str, slots: int) -> None:
        self.slots = slots
        with open(path, "r+b") as file:  # (the map keeps a descriptor of its own)
            self._map = mmap.mmap(file.fileno(), self.size(slots))
        self.cells = memoryview(self._map).cast("q")

    @staticmethod
    def size(slots: int) -> int:
        return slots * (2 + 2 * slots) * _CELL

    @classmethod
    def create(cls, path: str, slots: int) -> SpreadCounts:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, cls.size(slots))
        finally:
            os.close(fd)
        return cls(path, slots)

    def close(self) -> None:
        self.cells.release()
        self._map.close()

    def _row(self, slot: int) -> int:
        return slot * (2 + 2 * self.slots)

    def pid(self, slot: int) -> int:
        return self.cells[self._row(slot)]

    def set_pid(self, slot: int, pid: int) -> None:
        self.cells[self._row(slot)] = pid

    def held(self, slot: int) -> int:
        return self.cells[self._row(slot) + 1]

    def set_held(self, slot: int, held: int) -> None:
        self.cells[self._row(slot) + 1] = held

    def count_passed(self, sender: int, receiver: int) -> None:
        self.cells[self._row(sender) + 2 + receiver] += 1

    def count_received(self, receiver: int, sender: int) -> None:
        self.cells[self._row(receiver) + 2 + self.slots + sender] += 1

    def in_transit(self, receiver: int) -> int:
        """Connections passed to `receiver` that it has not received yet."""
        cells = self.cells
        slots = self.slots
        received = self._row(receiver) + 2 + slots
        total = 0
        for sender in range(slots):
            waiting = cells[self._row(sender) + 2 + receiver] - cells[received + sender]
            if waiting > 0:
                total += waiting
        return total

    def load(self, slot: int) -> int:
        """What `slot` holds, with what is on its way to it."""
        return self.held(slot) + self.in_transit(slot)

    def forget(self, slot: int, pid: int) -> None:
        """Process `pid` of `slot` has exited: if it was the slot's live one,
        the slot is free, and what was in transit to it is lost (settled, so
        that it no longer counts for the slot's next process)."""
        if self.pid(slot) != pid:
            return  # (a retired one: its successor has the slot)
        self.set_pid(slot, 0)
        self.set_held(slot, 0)
        cells = self.cells
        received = self._row(slot) + 2 + self.slots
        for sender in range(self.slots):
            cells[received + sender] = cells[self._row(sender) + 2 + slot]


class PublishedQuota(ConnectionQuota):
    """A server's `ConnectionQuota` that publishes the connections it holds
    to the group's counts at each admission and each close."""

    __slots__ = ("spread",)

    def __init__(self, config: ServerConfig, spread: ConnectionSpread) -> None:
        super().__init__(config)
        self.spread = spread

    def admit(self, host: str) -> str | None:
        group = super().admit(host)
        if group is not None:
            self.spread.publish(self.held)
        return group

    def leave(self, group: str) -> None:
        super().leave(group)
        self.spread.publish(self.held)


class ConnectionSpread:
    """One worker's part in the spread (the module docstring has the rules):
    its counts, its links to the peers, and the socket it is passed
    connections on (bound here, at start-up). The server it serves with
    calls `joined`, `admit_or_pass` for each connection it accepts, and
    runs `receive`."""

    def __init__(
        self,
        counts: SpreadCounts,
        slot: int,
        paths: list[str],
        slack: int,
        backlog: int | None,
        *,
        local: bool = False,
    ) -> None:
        self.counts = counts
        self.slot = slot
        self.paths = paths
        self.slack = slack
        #: The kernel gives each worker the connections its CPU receives
        #: (``worker_cpu_affinity``): pass only beyond `LOCAL_SHARE` too.
        self.local = local
        self.pid = os.getpid()
        self.quota: ConnectionQuota | None = None
        self._admit: Admit | None = None
        #: How many connections this process passed on, and was passed.
        self.passed = 0
        self.received = 0
        self._tag = slot.to_bytes(2, "little")
        self._links: dict[int, tuple[socket.socket, int]] = {}
        self._incoming: set[socket.socket] = set()
        self._listener = bind_peer_listener(paths[slot], backlog)
        self._live = False

    # ---- the server's hooks -------------------------------------------------

    def joined(self, config: ServerConfig, admit: Admit) -> ConnectionQuota:
        """The server's quota (which publishes what it holds); `admit` is the
        server's own admission, which passes nothing on."""
        self.quota = PublishedQuota(config, self)
        self._admit = admit
        return self.quota

    def publish(self, held: int) -> None:
        if self._live:
            self.counts.set_held(self.slot, held)

    def admit_or_pass(
        self, sock: socket.socket, address: Any, ip: bool, connections: trio.Nursery
    ) -> None:
        """The server's admission of a connection it accepted, or its passing on."""
        if not self.pass_on(sock):
            assert self._admit is not None
            self._admit(sock, address, ip, connections)

    def pass_on(self, sock: socket.socket) -> bool:
        """Pass `sock` to the least loaded live peer if this process holds
        `slack` or more beyond it; whether it went (if not, keep it)."""
        counts = self.counts
        assert self.quota is not None
        mine = self.quota.held + counts.in_transit(self.slot)
        slack = self.slack
        target = -1
        least = 0
        for peer in range(counts.slots):
            if peer == self.slot or not counts.pid(peer):
                continue
            if mine - counts.held(peer) < slack:
                continue  # (the common case: no transit to add up)
            load = counts.load(peer)
            if mine - load < (max(slack, load // LOCAL_SHARE) if self.local else slack):
                continue
            if target < 0 or load < least:
                target, least = peer, load
        if target < 0 or not self._send(target, sock):
            return False
        counts.count_passed(self.slot, target)
        self.passed += 1
        sock.close()
        return True

    def _send(self, target: int, sock: socket.socket) -> bool:
        pid = self.counts.pid(target)
        link = self._links.pop(target, None)
        if link is not None and link[1] != pid:  # (its slot has a new process)
            link[0].close()
            link = None
        for attempt in ("kept", "new") if link is not None else ("new",):
            if attempt == "new":
                link = self._connect(target, pid)
                if link is None:
                    return False
            assert link is not None
            try:
                socket.send_fds(link[0], [self._tag], [sock.fileno()], _FLAGS)
            except BlockingIOError:  # (the peer reads too slowly)
                self._links[target] = link
                return False
            except OSError:  # (the peer is gone, or has closed our link)
                link[0].close()
                continue
            self._links[target] = link
            return True
        return False

    def _connect(self, target: int, pid: int) -> tuple[socket.socket, int] | None:
        link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        link.setblocking(False)
        try:
            # (a unix socket connects at once, or not at all)
            link.connect(self.paths[target])
        except OSError:
            link.close()
            return None
        return link, pid

    # ---- receiving ----------------------------------------------------------

    async def receive(self, connections: trio.Nursery) -> None:
        """Take the connections the peers pass here and admit them, until
        cancelled (the server's listeners close); then admit those that
        have arrived and not been taken yet, and close."""
        assert self.quota is not None and self._admit is not None
        admit = self._admit
        self.counts.set_held(self.slot, self.quota.held)
        self.counts.set_pid(self.slot, self.pid)
        self._live = True
        listener = self._listener
        try:
            async with trio.open_nursery() as links:
                while True:
                    try:
                        link, _ = listener.accept()
                    except BlockingIOError:
                        await trio.lowlevel.wait_readable(listener)
                        continue
                    except OSError:
                        await trio.sleep(0.1)  # (out of descriptors: as the server's accept)
                        continue
                    link.setblocking(False)
                    self._incoming.add(link)
                    spawn(links, "a link from a peer", self._read_link, link, admit, connections)
        finally:
            # (peers stop passing here: a successor of this slot, in a
            # rolling restart, has taken the slot already)
            self._not_live()
            self._admit_queued(admit, connections)
            self.close()

    def _not_live(self) -> None:
        if self._live:
            self._live = False
            if self.counts.pid(self.slot) == self.pid:
                self.counts.set_pid(self.slot, 0)

    async def _read_link(
        self, link: socket.socket, admit: Admit, connections: trio.Nursery
    ) -> None:
        while self._take(link, admit, connections):
            await trio.lowlevel.wait_readable(link)

    def _take(self, link: socket.socket, admit: Admit, connections: trio.Nursery) -> bool:
        """Admit what waits on `link`; False when it has ended."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(link, 2, 1, _RECEIVE_FLAGS)
            except BlockingIOError:
                return True
            except OSError:
                data, fds = b"", []
            if not data and not fds:
                self._incoming.discard(link)
                link.close()
                return False
            sender = int.from_bytes(data, "little")
            for fd in fds:
                self._admit_passed(socket.socket(fileno=fd), admit, connections)
                if len(data) == 2 and sender < self.counts.slots:
                    self.counts.count_received(self.slot, sender)

    def _admit_passed(self, sock: socket.socket, admit: Admit, connections: trio.Nursery) -> None:
        try:
            address = sock.getpeername()
        except OSError:  # (its client has gone already)
            sock.close()
            return
        self.received += 1
        admit(sock, address, True, connections)

    def _admit_queued(self, admit: Admit, connections: trio.Nursery) -> None:
        while True:
            try:
                link, _ = self._listener.accept()
            except OSError:
                break
            link.setblocking(False)
            self._incoming.add(link)
        for link in list(self._incoming):
            self._take(link, admit, connections)

    def close(self) -> None:
        self._not_live()
        if self._listener.fileno() >= 0:
            close_listener(self._listener)
        for link in self._incoming:
            trio.lowlevel.notify_closing(link)
            link.close()
        self._incoming.clear()
        for link, _ in self._links.values():
            link.close()
        self._links.clear()
