"""Broadcasts between the processes of one ``--workers`` group on one host.

A message one process broadcasts (a notification every session should get)
goes once to each other process of the group, which hands it to its own
fan-out; per-session messages never come here (requests go to the session's
owner over the hop, `_peers.py`). This module moves opaque messages only.

- Each process listens on ``<peer_sockets_dir>/<owner_name>.fanout``, a unix
  stream socket beside its hop socket, in the same private (0700) directory,
  so only the group reaches it and a message is believed.
- The sender finds its peers by listing that directory at each broadcast
  (a few dozen entries at most), and keeps one connection to each. A worker
  that starts (a replacement, a rolling restart's successor) replaces its
  name's socket file, so a file whose inode changed is connected to again.
- A message is a line: JSON text, which holds no raw newline. It is written
  at once when the socket takes it; what the socket does not take waits in
  the peer's queue, at most ``queue_bytes`` of it. A message that does not
  fit (the peer reads too slowly), or whose peer is gone (nobody listens on
  its file), is dropped for that peer, counted and logged: a broadcast
  never waits for a peer, and a dead or wedged peer costs the others nothing.
- The receiver reads lines of at most ``queue_bytes``; a longer one, or any
  error, ends that connection only (the sender connects again).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections import deque
from collections.abc import Callable
from typing import Final

import trio

from ._peers import bind_peer_listener
from ._tasks import spawn

logger = logging.getLogger("trio_mcp.workers")

#: The suffix of the broadcast sockets in the group's directory.
SUFFIX: Final = ".fanout"
#: How often a peer's losses are logged at most (each loss is counted).
_WARN_EVERY_S: Final = 1.0
_READ_BYTES: Final = 65536


class LineReader:
    """Bytes in, whole lines out (without their newline); what follows the
    last newline waits. A line longer than `max_bytes` is a ValueError."""

    __slots__ = ("max_bytes", "_pending")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        end = data.rfind(b"\n")
        if end < 0:
            # (only the new bytes are searched: a long line in many small
            # reads costs its length, not its length squared)
            self._pending += data
            if len(self._pending) > self.max_bytes:
                raise ValueError(f"a line longer than {self.max_bytes} bytes")
            return []
        lines = (self._pending + data[:end]).split(b"\n")
        self._pending = data[end + 1 :]
        if len(self._pending) > self.max_bytes or any(len(line) > self.max_bytes for line in lines):
            raise ValueError(f"a line longer than {self.max_bytes} bytes")
        return lines


class PeerLink:
    """The connection to one peer and what waits to be written to it."""

    __slots__ = ("name", "inode", "sock", "queue", "queued_bytes", "flushing", "dropped", "warned")

    def __init__(self, name: str, inode: int, sock: socket.socket | None) -> None:
        self.name = name
        #: The socket file's inode when this connected (or failed to).
        self.inode = inode
        #: None: nobody listened on the file.
        self.sock = sock
        self.queue: deque[bytes | memoryview] = deque()
        self.queued_bytes = 0
        self.flushing = False
        #: Messages dropped for this peer since the last warning.
        self.dropped = 0
        self.warned = -_WARN_EVERY_S

    def close(self) -> None:
        sock = self.sock
        if sock is not None:
            self.sock = None
            trio.lowlevel.notify_closing(sock)  # (wakes a `_flush` waiting on it)
            sock.close()


def _connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)  # (a unix socket connects at once, or not at all)
    except OSError:
        sock.close()
        return None
    return sock


class PeerBroadcast:
    """This process's end of the group's broadcasts (module docstring):
    `send` a message to every peer, `run` to receive theirs (each goes to
    `on_message`) and to write what waits."""

    __slots__ = (
        "directory",
        "name",
        "path",
        "queue_bytes",
        "on_message",
        "links",
        "dropped",
        "unreachable",
        "_nursery",
    )

    def __init__(
        self, directory: str, name: str, queue_bytes: int, on_message: Callable[[bytes], None]
    ) -> None:
        self.directory = directory
        self.name = name
        self.path = os.path.join(directory, name + SUFFIX)
        self.queue_bytes = queue_bytes
        self.on_message = on_message
        self.links: dict[str, PeerLink] = {}
        #: Messages dropped because a peer's queue was full (or it broke with
        #: messages queued), and those whose peer was gone, over the run.
        self.dropped = 0
        self.unreachable = 0
        self._nursery: trio.Nursery | None = None

    # ---- sending --------------------------------------------------------------

    def send(self, message: bytes) -> int:
        """Send `message` (one line's text, no newline) to every peer without
        waiting; how many peers took it (wrote it, or queued it)."""
        line = message + b"\n"
        if len(line) > self.queue_bytes:
            logger.warning(
                "a broadcast of %d bytes is larger than peer_broadcast_queue_bytes (%d): "
                "the other workers' sessions do not get it",
                len(line),
                self.queue_bytes,
            )
            self.dropped += len(self._peers())
            return 0
        taken = 0
        for link in self._peers():
            if self._offer(link, line):
                taken += 1
        return taken

    def _peers(self) -> list[PeerLink]:
        """A link to each peer whose socket file is there now."""
        links = self.links
        found: list[PeerLink] = []
        seen = set()
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            entries = []
        for entry in entries:
            file = entry.name
            if not file.endswith(SUFFIX):
                continue
            name = file[: -len(SUFFIX)]
            if name == self.name:
                continue
            seen.add(name)
            try:
                inode = entry.inode()
            except OSError:
                continue
            link = links.get(name)
            if link is None:
                link = links[name] = PeerLink(name, inode, _connect(entry.path))
            elif link.inode != inode or link.sock is None:
                self._forget(link)
                link.inode = inode
                link.sock = _connect(entry.path)
            found.append(link)
        for name in [name for name in links if name not in seen]:
            self._forget(links.pop(name))
        return found

    def _forget(self, link: PeerLink) -> None:
        if link.queue:
            self._lose(link, len(link.queue), "its connection was replaced")
        link.queue.clear()
        link.queued_bytes = 0
        link.close()

    def _offer(self, link: PeerLink, line: bytes) -> bool:
        sock = link.sock
        if sock is None:
            self.unreachable += 1
            self._warn(link, "nobody listens there (the worker is gone)")
            return False
        if link.queue:
            if link.queued_bytes + len(line) > self.queue_bytes:
                self._lose(link, 1, "it reads too slowly (its queue is full)")
                return False
            link.queue.append(line)
            link.queued_bytes += len(line)
            return True
        try:
            written = sock.send(line)
        except BlockingIOError:
            written = 0
        except OSError:
            # (gone since it connected: one new try, at once)
            link.close()
            link.sock = sock = _connect(os.path.join(self.directory, link.name + SUFFIX))
            if sock is None:
                self.unreachable += 1
                self._warn(link, "its connection broke and nobody listens there now")
                return False
            try:
                written = sock.send(line)
            except BlockingIOError:
                written = 0
            except OSError:
                link.close()
                self._lose(link, 1, "its connection broke")
                return False
        if written < len(line):
            rest = memoryview(line)[written:]
            link.queue.append(rest)
            link.queued_bytes += len(rest)
            self._flush_soon(link)
        return True

    def _flush_soon(self, link: PeerLink) -> None:
        if link.flushing or self._nursery is None:
            return
        link.flushing = True
        spawn(self._nursery, f"writing to worker {link.name}", self._flush, link)

    async def _flush(self, link: PeerLink) -> None:
        """Write what waits for `link` as its socket takes it."""
        try:
            while link.queue and link.sock is not None:
                sock = link.sock
                try:
                    await trio.lowlevel.wait_writable(sock)
                except trio.ClosedResourceError:
                    continue  # (replaced meanwhile: `_forget` counted its queue)
                if link.sock is not sock or not link.queue:
                    continue
                piece = link.queue[0]
                try:
                    written = sock.send(piece)
                except BlockingIOError:
                    continue
                except OSError:
                    self._lose(link, len(link.queue), "its connection broke")
                    link.queue.clear()
                    link.queued_bytes = 0
                    link.close()
                    return
                link.queued_bytes -= written
                if written == len(piece):
                    link.queue.popleft()
                else:
                    link.queue[0] = memoryview(piece)[written:]
        finally:
            link.flushing = False

    def _lose(self, link: PeerLink, count: int, why: str) -> None:
        self.dropped += count
        link.dropped += count
        self._warn(link, why)

    def _warn(self, link: PeerLink, why: str) -> None:
        now = trio.current_time()
        if now - link.warned >= _WARN_EVERY_S:
            link.warned = now
            logger.warning(
                "broadcasts to worker %s dropped: %s (%d dropped, %d to gone workers so far)",
                link.name,
                why,
                self.dropped,
                self.unreachable,
            )

    # ---- receiving ------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen for the peers' messages and write queued ones, until cancelled."""
        listener = trio.socket.from_stdlib_socket(bind_peer_listener(self.path, None))
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                while True:
                    try:
                        conn, _ = await listener.accept()
                    except OSError as exc:
                        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                            await trio.sleep(0.1)  # (out of descriptors: try again soon)
                            continue
                        raise
                    spawn(nursery, "a worker's broadcasts", self._receive, conn)
        finally:
            self._nursery = None
            listener.close()
            for link in self.links.values():
                link.close()
            self.links.clear()

    async def _receive(self, conn: trio.socket.SocketType) -> None:
        reader = LineReader(self.queue_bytes)
        on_message = self.on_message
        with conn:
            while True:
                try:
                    data = await conn.recv(_READ_BYTES)
                    lines = reader.feed(data)
                except (OSError, ValueError) as exc:
                    logger.warning("a worker's broadcast connection ended: %s", exc)
                    return
                if not data:
                    return
                for line in lines:
                    on_message(line)
