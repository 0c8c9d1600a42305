"""The slow lane: where the reads of slow request heads wait, woken a few
per scheduler batch.

A request head that did not come whole in one read is slow
(`Connection.limit_head`): a client's head comes in one packet, a slowloris
trickles it a line at a time. Each trickled line wakes its connection's
task, and an attacker's lines come in bursts: hundreds of heads woken in
one scheduler batch, each step parsing a line, ahead of every well-behaved
request of that batch. So a slow head's `SocketIO` waits here instead of in
trio's epoll (`SocketIO.receive_some`), until the sweeper sees its head in
and moves it back (`TimeLimits.look`). `SlowLane` keeps an epoll of its
own, registered in trio's as one readable file, and its task wakes at most
`WAKES_PER_BATCH` of the waiting reads per batch, in the order the kernel
reports them. The others stay ready in the lane's epoll for the next
batches, so a burst of lines becomes many small batches and a request
waits behind a few lines, not hundreds.

What still reaches a read waiting here: its bytes (or end of stream, a
reset, the sweeper's interrupt: all make the socket readable), and a cancel
(the connection's time limit, the server's shutdown), which stops the wait
at once. `forget` wakes a read whose socket is being closed, as trio's
``notify_closing`` does for its own waits. Each registration is one-shot
(``EPOLLONESHOT``, re-armed when the read waits again), so a socket that
stays readable is reported once per wait, not at every poll; a socket
closed while registered leaves the lane's epoll with its file.

Linux only (``select.epoll``); elsewhere `slow_lane` gives None and slow
heads wait in trio's epoll like any other read.
"""

from __future__ import annotations

import contextlib
import select
import socket
from typing import Final

import trio
from outcome import Error
from trio.lowlevel import Abort, Task, current_task, reschedule, wait_task_rescheduled

#: How many waiting reads the lane wakes per scheduler batch: a slow head's
#: line costs about 20 µs of the batch it runs in.
WAKES_PER_BATCH: Final = 16

_ARMED: Final = getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLONESHOT", 0)


class SlowLane:
    """An epoll of its own for slow heads' reads (module docstring); its task
    (`run`) must run while reads wait here."""

    __slots__ = ("_epoll", "_waiting", "wakes_per_batch")

    def __init__(self, wakes_per_batch: int = WAKES_PER_BATCH) -> None:
        self._epoll = select.epoll()
        #: The task waiting to read each registered file descriptor.
        self._waiting: dict[int, Task] = {}
        self.wakes_per_batch = wakes_per_batch

    @property
    def waiting(self) -> int:
        """How many reads wait here now."""
        return len(self._waiting)

    async def wait_readable(self, sock: socket.socket) -> None:
        """Wait until `sock` is readable (or cancelled), woken by the lane's task."""
        fd = sock.fileno()
        epoll = self._epoll
        if epoll.closed:  # (the lane has stopped: the server is being cancelled)
            await trio.lowlevel.wait_readable(sock)
            return
        try:
            epoll.modify(fd, _ARMED)  # (waited here before: re-arm)
        except FileNotFoundError:
            epoll.register(fd, _ARMED)
        waiting = self._waiting
        waiting[fd] = current_task()

        def abort(_: object) -> Abort:
            # (still armed: if it fires, no task is waiting and nothing wakes)
            waiting.pop(fd, None)
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    def forget(self, sock: socket.socket) -> None:
        """`sock` is about to close: stop watching it, and a read waiting on it
        gets ``trio.ClosedResourceError``."""
        fd = sock.fileno()
        if fd < 0:
            return
        # (never registered here, gone already, or the lane has stopped)
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(fd)
        task = self._waiting.pop(fd, None)
        if task is not None:
            reschedule(task, Error(trio.ClosedResourceError("the connection was closed")))

    async def run(self) -> None:
        """Wake the reads whose sockets are ready, `wakes_per_batch` per
        scheduler batch, until cancelled; then close the lane's epoll."""
        epoll = self._epoll
        waiting = self._waiting
        most = self.wakes_per_batch
        try:
            while True:
                await trio.lowlevel.wait_readable(epoll.fileno())
                while True:
                    events = epoll.poll(0, most)
                    for fd, _ in events:
                        task = waiting.pop(fd, None)
                        if task is not None:
                            reschedule(task)
                    if len(events) < most:
                        break
                    # (the woken reads run in the next batch; so do we, for more)
                    await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            trio.lowlevel.notify_closing(epoll.fileno())
            epoll.close()


def slow_lane() -> SlowLane | None:
    """A new lane, or None where there is no epoll."""
    if not hasattr(select, "epoll"):
        return None
    return SlowLane()
