"""Listening sockets, and a lean byte stream over an accepted connection.

`SocketIO` talks to a non-blocking stdlib socket directly and waits with
``trio.lowlevel.wait_readable``/``wait_writable`` only when the kernel says it
would block. ``trio.SocketStream`` would add a conflict detector, two context
managers and a trip through the scheduler to every call; this class does the
same job for the one task that owns the connection. Where it departs from
trio's habits, the rule and the reason it is safe:

- Checkpoints. trio makes every async call a checkpoint. Here a call that
  completes without waiting is a schedule point and a cancel point only every
  `_YIELD_EVERY`-th time (every call that waits is both, as trio's waits are).
  Safe because the socket has one user, its connection's task, whose own
  cancel scope carries the time limits and the server's cancellation: a busy
  connection (one that never waits, say a client that pipelines) sees them
  within `_YIELD_EVERY` calls, and each call between does bounded work (one
  ``recv`` of at most ``receive_chunk_bytes``, or one ``send``), so it cannot
  keep other tasks from running for longer than that.
- Eager reads. After an answer, a busy server's next read yields first and
  then reads, instead of registering the socket with epoll and waiting for
  readiness: by the time the other runnable connections have had their turn,
  the client's next request has usually arrived. A read that finds nothing
  turns this off for the connection's next `_EAGER_PAUSE` answers (a quiet
  server waits at once). The yield is a schedule point (trio's
  ``cancel_shielded_checkpoint``, or the trap itself while the trio tweaks
  are on: `use_schedule_point`) and, as above, a cancel point every
  `_YIELD_EVERY` answers.
- Batch-end sends (`BatchEndSender`, `SocketIO.hold`). The first
  `_SEND_AT_ONCE` answers of a scheduler batch go at once; the rest are kept,
  and the server's `BatchEndSender`, a trio instrument, sends them together
  just before trio next waits for I/O, once every task of the batch has had
  its turn. A client on the same host is then woken a few times per batch
  instead of once per answer. The first answers go at once because a kept
  answer leaves at the batch's end, and the next batch starts right after:
  its connection's eager read would come too soon for the client's next
  request unless other connections are read first.

- The slow lane. A read that finds nothing waits in trio's epoll, unless
  the sweeper has moved the connection to the slow lane (`lane`: its head
  is slow, `_slow_lane.py`), whose task wakes a few such reads per
  scheduler batch. Safe because what ends a wait in trio's epoll ends one
  in the lane too: bytes, end of stream or a reset (readiness), a cancel
  (its abort), a close from another task (`close` tells the lane, as
  ``notify_closing`` tells trio). Once a slow head's request line is in
  (`head`), the lane reads its other lines itself and the read returns
  them all at once (`SlowLane.gather`).

The rules that keep batch-end sends an ordinary byte stream:

- one answer is kept at a time: anything else written to the socket first
  sends the kept one, now (`release`), so bytes leave in the order written;
- the kept answer always leaves before the process can block, since trio
  calls the instrument before every wait for I/O; before the socket is shut
  down or closed; and at the connection's next read if no batch end came
  (were trio to drop the instrument, answers would still go, one by one);
- what the kernel does not take at the batch's end (a client that is not
  reading) waits for the connection's task, which sends it, under the write
  time limit, before it reads or writes anything else; a failed send is
  reported by that next call as ``trio.BrokenResourceError``;
- the instrument never raises (trio would drop it): `release` keeps errors
  for the connection's task.

The measurements behind each choice are in benchmarks/README.md.
"""

from __future__ import annotations

import errno
import functools
import select
import socket
from collections.abc import Awaitable, Callable
from math import inf
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio
from trio.lowlevel import (
    cancel_shielded_checkpoint,
    checkpoint,
    notify_closing,
    wait_readable,
    wait_writable,
)

from .._config import ServerConfig
from .._errors import StartupError

if TYPE_CHECKING:
    from ._slow_lane import SlowLane


class HeadGathering(Protocol):
    """What the lane needs of a head it may read itself (`HTTP11Connection`)."""

    def head_gathering(self) -> tuple[bytes, int, int] | None: ...


#: A call that completes without waiting is a schedule and cancel point once in this many.
_YIELD_EVERY: Final = 8
# The first answers of each scheduler batch go at once; the rest are held for
# the batch's end (`BatchEndSender`).
_SEND_AT_ONCE: Final = 8
#: Answers after an eager read that found nothing before the next eager read.
_EAGER_PAUSE: Final = 2
# Accept errors that mean "out of resources": wait and retry rather than crash.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


#: The schedule point of an eager read (see the module docstring).
_schedule_point: Callable[[], Awaitable[None]] = cancel_shielded_checkpoint


def use_schedule_point(point: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """Make `point` the schedule point of eager reads; returns the one it replaces."""
    global _schedule_point
    previous, _schedule_point = _schedule_point, point
    return previous


class BatchEndSender(trio.abc.Instrument):
    """Sends the answers `SocketIO.hold` kept, all together, when trio's
    scheduler batch ends (a trio instrument: add it to the run that serves)."""

    __slots__ = ("held", "sent_at_once")

    def __init__(self) -> None:
        #: The sockets holding an answer, in the order they took it.
        self.held: list[SocketIO] = []
        #: How many of this batch's answers went at once (`_SEND_AT_ONCE` do).
        self.sent_at_once = 0

    def before_io_wait(self, timeout: float) -> None:
        self.sent_at_once = 0
        if self.held:
            _release_all(self.held)


def _release_all(held: list[SocketIO]) -> None:
    for sio in held:
        sio.release()
    held.clear()


class SocketIO:
    """The byte stream of one accepted TCP connection (owned by one task).

    With a `BatchEndSender` (`batch`), `hold` keeps a complete answer for it
    to send when the scheduler batch ends; `write_timeout` bounds the sending
    of what the kernel did not take then.
    """

    __slots__ = (
        "sock",
        "_unyielded",
        "_unchecked",
        "_closed",
        "_sent",
        "_eager",
        "_batch",
        "_write_timeout",
        "_held",
        "_unsent",
        "_failure",
        "lane",
        "head",
    )

    def __init__(
        self,
        sock: socket.socket,
        batch: BatchEndSender | None = None,
        write_timeout: float = inf,
    ) -> None:
        if sock.gettimeout() != 0.0:  # (an arrival's is non-blocking already)
            sock.setblocking(False)
        # (not ``sock.family``, which makes an enum member at each read: about
        # 1.5% of what a slowloris connection costs)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # (a Unix socket: a peer's hop)
        self.sock = sock
        self._unyielded = 0  # calls since the last schedule point
        self._unchecked = 0  # eager reads since the last cancel point they made
        self._closed = False
        # After we answer, the peer's next request cannot be here yet (unless
        # it pipelines): wait for readiness first and skip a futile recv call.
        self._sent = False
        # While the server is busy, the client's next request has usually
        # arrived by the time the other runnable tasks have had their turn:
        # yield, then read, and skip the wait (an epoll_ctl call and the
        # readiness round trip). A read that finds nothing turns this off for
        # the next _EAGER_PAUSE answers (a quiet server waits at once).
        self._eager = 0
        self._batch = batch
        self._write_timeout = write_timeout
        #: The answer kept for the batch's end (None: none).
        self._held: bytes | None = None
        #: What the kernel did not take of it then, for our task to send.
        self._unsent: bytes | None = None
        #: Why sending it then failed (the peer is gone).
        self._failure: str | None = None
        #: Where its reads wait when the kernel has nothing (None: trio's
        #: epoll): the sweeper moves a slow head's reads to the slow lane.
        self.lane: SlowLane | None = None
        #: The head being received while the reads are in the lane, which
        #: reads its lines itself once its request line is in (None: none).
        self.head: HeadGathering | None = None

    def hold(self, data: bytes) -> bytes:
        """Keep `data`, a complete answer, to send when the scheduler batch
        ends; returns what the caller must still send with `send_all` (b"":
        nothing, always so when the answer is kept).

        Without a batch sender, for the batch's first `_SEND_AT_ONCE`
        answers (see the module docstring), or with another answer kept or
        unsent (a client that pipelines), what the kernel takes of `data`
        goes now (`send_nowait`) and the rest is returned: `send_all` keeps
        the order.
        """
        batch = self._batch
        if (
            batch is None
            or batch.sent_at_once < _SEND_AT_ONCE
            or self._held is not None
            or self._unsent is not None
        ):
            if batch is not None:
                batch.sent_at_once += 1
            sent = self.send_nowait(data)
            return data[sent:] if sent < len(data) else b""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        if self._failure is not None:
            raise trio.BrokenResourceError(self._failure)
        self._held = data
        self._sent = True
        batch.held.append(self)
        return b""

    def release(self) -> None:
        """Send the kept answer now, if any. Never raises: what the kernel does
        not take stays for the task's next call to send (`_finish_held`), and a
        failure for it to report."""
        data = self._held
        if data is None:
            return
        self._held = None
        if self._closed:
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._failure = f"send failed: {exc}"
            return
        if sent < len(data):
            self._unsent = data[sent:]

    async def _finish_held(self) -> None:
        """Before anything else is read or written: send the kept answer if no
        batch end has, then report a failed send, or send what the kernel did
        not take (within the write time limit: a client that does not read by
        then counts as gone)."""
        self.release()
        if self._failure is not None:
            raise trio.BrokenResourceError(self._failure)
        data = self._unsent
        if data is None:
            return
        self._unsent = None
        with trio.move_on_after(self._write_timeout):
            await self._send_from(data, 0)
            return
        raise trio.BrokenResourceError("the client did not read its answer in time")

    async def receive_some(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` bytes; ``b""`` at end of stream."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        sock = self.sock
        if self._sent:
            self._sent = False
            self._unyielded = 0  # both ways below are schedule points
            if self._eager <= 0:
                # A cancel point only every _YIELD_EVERY-th time: trio's
                # checkpoint() is a cancel-shielded one plus a look at the
                # task's cancel status.
                self._unchecked += 1
                if self._unchecked >= _YIELD_EVERY:
                    self._unchecked = 0
                    await checkpoint()
                else:
                    await _schedule_point()
                # (the batch has ended: a kept answer went, or left work for us)
                if self._held is not None or self._unsent is not None or self._failure is not None:
                    await self._finish_held()
                try:
                    data = sock.recv(max_bytes)
                except BlockingIOError:
                    self._eager = _EAGER_PAUSE
                except OSError as exc:
                    raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
                else:
                    return data
            else:
                self._eager -= 1
                # Waiting for the next request needs this answer out whole.
                await self._finish_held()
            await wait_readable(sock)
        while True:
            try:
                data = sock.recv(max_bytes)
            except BlockingIOError:
                # (waited for outside the handler: a coroutine suspended in an
                # except clause keeps the exception, its traceback and a
                # frame alive, four objects more per waiting connection)
                pass
            except OSError as exc:
                raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
            else:
                break
            self._unyielded = 0
            lane = self.lane
            if lane is None:
                await wait_readable(sock)
            else:
                head = self.head
                plan = head.head_gathering() if head is not None else None
                if plan is None:
                    await lane.wait_readable(sock)
                else:
                    gathered = await lane.gather(sock, max_bytes, plan)
                    if gathered is not None:
                        data = gathered
                        break
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY:
            self._unyielded = 0
            await checkpoint()
        return data

    async def send_all(self, data: bytes) -> None:
        """Send every byte of `data`, waiting for the socket as needed."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        if self._held is not None or self._unsent is not None or self._failure is not None:
            await self._finish_held()
        sock = self.sock
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        self._sent = True
        if sent == len(data):
            self._unyielded += 1
            if self._unyielded >= _YIELD_EVERY:
                self._unyielded = 0
                await checkpoint()
            return
        await self._send_from(data, sent)

    async def _send_from(self, data: bytes, sent: int) -> None:
        """Send `data` from byte `sent` on, waiting for room as needed."""
        sock = self.sock
        view = memoryview(data)
        while sent < len(data):
            self._unyielded = 0
            await wait_writable(sock)
            try:
                sent += sock.send(view[sent:])
            except BlockingIOError:
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"send failed: {exc}") from exc

    def send_nowait(self, data: bytes) -> int:
        """Send what the kernel takes of `data` now; how many bytes that was
        (0 while an earlier answer is not out whole: `send_all` sends it first)."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        if self._held is not None:
            self.release()
        if self._failure is not None:
            raise trio.BrokenResourceError(self._failure)
        if self._unsent is not None:
            return 0
        try:
            sent: int = self.sock.send(data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        self._sent = True
        return sent

    async def wait_peer(self) -> bool:
        """Wait until the peer sends more bytes (False; they stay unread) or
        closes its end or resets (True). For a stream whose head went out with
        `send_all` (so no answer is kept)."""
        sock = self.sock
        while True:
            await wait_readable(sock)
            gone = self.peer_gone()
            if gone is not None:
                return gone

    def peer_gone(self) -> bool | None:
        """Without waiting: whether the peer has closed its end or reset
        (True), sent bytes that stay unread (False), or neither yet (None)."""
        try:
            return not self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return None
        except OSError:
            return True

    async def send_eof(self) -> None:
        """Half-close: the peer reads end-of-stream after what was sent."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        await self._finish_held()
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise trio.BrokenResourceError(f"shutdown failed: {exc}") from exc
        await checkpoint()

    def interrupt(self) -> None:
        """End the reading side, from any task: a waiting `receive_some`
        wakes and, once what had arrived is read, returns ``b""``; sending
        still works. Only where `interrupt_wakes_readers()`."""
        try:
            self.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # (the peer reset it, or it is closed: its reader wakes anyway)

    def close(self) -> None:
        """Close now, from any task: a task waiting on the socket gets
        ``trio.ClosedResourceError``, and every later call too."""
        if not self._closed:
            self.release()  # (what the kernel takes of it now)
            self._closed = True
            if self.lane is not None:
                self.lane.forget(self.sock)
            notify_closing(self.sock)
            self.sock.close()

    async def aclose(self) -> None:
        self.close()
        await checkpoint()


@functools.cache
def interrupt_wakes_readers() -> bool:
    """Whether `SocketIO.interrupt` works here: ``shutdown(SHUT_RD)`` wakes
    a reader and reads as end of stream (Linux does; checked once, not
    assumed)."""
    try:
        a, b = socket.socketpair()
    except OSError:
        return False
    with a, b:
        try:
            a.setblocking(False)
            a.shutdown(socket.SHUT_RD)
            readable, _, _ = select.select([a], [], [], 0)
            return bool(readable) and a.recv(1) == b""
        except OSError:
            return False


async def bind_listeners(config: ServerConfig) -> list[socket.socket]:
    """Non-blocking listening sockets for every address `config.host` names."""
    try:
        infos = await trio.socket.getaddrinfo(
            config.host, config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {config.host}: {exc.strerror or exc}") from exc
    backlog = config.backlog or 0xFFFF  # the kernel caps it at somaxconn
    listeners: list[socket.socket] = []
    addr: Any = (config.host, config.port)
    try:
        for family, type_, proto, _, addr in infos:
            sock = socket.socket(family, type_, proto)
            listeners.append(sock)
            if hasattr(socket, "SO_REUSEADDR") and not _is_windows():
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if config.reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException as exc:
        for sock in listeners:
            sock.close()
        if isinstance(exc, OSError):
            where = f"[{addr[0]}]:{addr[1]}" if ":" in str(addr[0]) else f"{addr[0]}:{addr[1]}"
            raise StartupError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
        raise
    return listeners


def close_listener(sock: socket.socket) -> None:
    notify_closing(sock)
    sock.close()


def _is_windows() -> bool:
    import sys

    return sys.platform == "win32"
