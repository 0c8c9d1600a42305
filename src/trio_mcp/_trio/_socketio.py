"""Listening sockets and a lean byte stream over a connected socket.

`SocketIO` talks to a non-blocking stdlib socket directly and waits with
``trio.lowlevel.wait_readable``/``wait_writable`` only when the kernel says it
would block. Going through ``trio.SocketStream`` costs a conflict detector,
two context managers and a scheduler round trip on every call, which was a
quarter of the server's time per request; this class does the same job for the
one task that owns the connection.

One deliberate departure from trio's rule that every async call is a
checkpoint: a call that completes without waiting does not yield, except every
`_YIELD_EVERY`-th such call. A connection whose client keeps it busy (say, by
pipelining) therefore still yields and sees cancellation within a few
requests, while the common case pays for no extra trip through the scheduler.

And one shortcut: after an answer, a busy server's next read yields first and
then reads, instead of registering the socket with epoll and waiting for
readiness (trio re-arms the registration on every wait, a system call each).
By the time the other runnable connections have had their turn, the client's
next request has usually arrived; when it has not, the connection waits
normally for the next two answers before it tries again. On the echo benchmark
this took the server from 16.0 to 13.0 µs of CPU per request.

The pause is short because a waiting connection is read after every eager one
of the next batch: answered last in a batch, it stays last while it waits, and
each of its requests then waits about two batches instead of one (a pause of
16 answers gave 3% less throughput and a 7% higher p99 under 64 busy
connections).

The yield after an answer is a schedule point but, like the calls above, a
cancel point only every few answers (`_scheduling.schedule_point`, trio's
``cancel_shielded_checkpoint`` without its wrappers, then a full
``checkpoint`` when one is due): a connection kept busy sees
cancellation within `_YIELD_EVERY` calls.
"""

from __future__ import annotations

import errno
import socket
from typing import Final

import trio
from trio.lowlevel import (
    checkpoint,
    notify_closing,
    wait_readable,
    wait_writable,
)

from .._config import ServerConfig
from ._scheduling import schedule_point

_YIELD_EVERY: Final = 8
_EAGER_PAUSE: Final = 2
# Accept errors that mean "out of resources": wait and retry rather than crash.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class SocketIO:
    """The byte stream of one accepted TCP connection (owned by one task)."""

    __slots__ = ("sock", "_unyielded", "_unchecked", "_closed", "_sent", "_eager")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
                # task's cancel status (schedule_point: trio's trap, yielded
                # directly).
                self._unchecked += 1
                if self._unchecked >= _YIELD_EVERY:
                    self._unchecked = 0
                    await checkpoint()
                else:
                    await schedule_point()
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
            await wait_readable(sock)
        while True:
            try:
                data = sock.recv(max_bytes)
            except BlockingIOError:
                self._unyielded = 0
                await wait_readable(sock)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
            self._unyielded += 1
            if self._unyielded >= _YIELD_EVERY:
                self._unyielded = 0
                await checkpoint()
            return data

    async def send_all(self, data: bytes) -> None:
        """Send every byte of `data`, waiting for the socket as needed."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
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
        """Send what the kernel takes of `data` now; how many bytes that was."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
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
        closes its end or resets (True)."""
        sock = self.sock
        while True:
            await wait_readable(sock)
            try:
                return not sock.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                continue
            except OSError:
                return True

    async def send_eof(self) -> None:
        """Half-close: the peer reads end-of-stream after what was sent."""
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise trio.BrokenResourceError(f"shutdown failed: {exc}") from exc
        await checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            notify_closing(self.sock)
            self.sock.close()
        await checkpoint()


async def bind_listeners(config: ServerConfig) -> list[socket.socket]:
    """Non-blocking listening sockets for every address `config.host` names."""
    infos = await trio.socket.getaddrinfo(
        config.host, config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    backlog = config.backlog or 0xFFFF  # the kernel caps it at somaxconn
    listeners: list[socket.socket] = []
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
    except BaseException:
        for sock in listeners:
            sock.close()
        raise
    return listeners


def close_listener(sock: socket.socket) -> None:
    notify_closing(sock)
    sock.close()


def _is_windows() -> bool:
    import sys

    return sys.platform == "win32"
