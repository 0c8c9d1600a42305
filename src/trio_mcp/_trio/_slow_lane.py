"""The slow lane: where the reads of slow request heads wait, woken a few
per turn (`_turns.py`).

A request head that did not come whole in one read is slow
(`Connection.limit_head`): a client's head comes in one packet, a slowloris
trickles it a line at a time. Each trickled line wakes its connection's
task, and an attacker's lines come in bursts: hundreds of heads woken in
one scheduler batch, each step parsing a line, ahead of every well-behaved
request of that batch. So a slow head's `SocketIO` waits here instead of in
trio's epoll (`SocketIO.receive_some`), until the sweeper sees its head in
and moves it back (`TimeLimits.look`). `SlowLane` keeps an epoll of its
own, registered in trio's as one readable file, and its task wakes at most
`WAKES_PER_TURN` of the waiting reads per turn (`_turns.py`), in the order the kernel
reports them. The others stay ready in the lane's epoll for the next
batches, so a burst of lines becomes many small batches and a request
waits behind a few lines, not hundreds.

A read whose head has its request line in (`HTTP11Connection.head_gathering`)
is not woken for each line: the lane reads the lines itself (`Gathering`)
and wakes the read once, with all of them, when the head's end is in, the
head is too large, the end search refuses a line, or the peer is gone. A
slowloris line then costs the lane a read and a search, not a task step.
A new connection's first head that was not whole at the accept waits here
with no task at all (`arrive`, ``_arrivals.py``) until its parser has
something to say.

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
from typing import Final, Protocol

import trio
from outcome import Error, Value
from trio.lowlevel import Abort, Task, current_task, reschedule, wait_task_rescheduled

from .._errors import RemoteProtocolError
from .._speedups import find_head_end
from ._turns import take_turn

#: How many waiting reads the lane wakes per turn: a slow head's
#: line costs about 20 µs of the batch it runs in.
WAKES_PER_TURN: Final = 16

_ARMED: Final = getattr(select, "EPOLLIN", 0) | getattr(select, "EPOLLONESHOT", 0)


class Arrival(Protocol):
    """A new connection whose first head arrives with no task
    (`_arrivals.Arrival`), as the lane sees it."""

    sock: socket.socket | None

    def read(self) -> bool:
        """Read what came; whether to wait for more."""
        ...

    def close(self) -> None: ...


class Gathering:
    """The rest of a head read by the lane for a waiting read
    (`SlowLane.gather`), from `HTTP11Connection.head_gathering`'s plan."""

    __slots__ = ("task", "sock", "max_bytes", "buf", "seeded", "scan", "room")

    def __init__(
        self,
        task: Task | None,
        sock: socket.socket | None,
        max_bytes: int,
        plan: tuple[bytes, int, int],
    ) -> None:
        seed, scan, room = plan
        self.task = task
        self.sock = sock
        #: What one read may take (the connection's chunk size).
        self.max_bytes = max_bytes
        #: The head's last bytes held by its connection, then what was read.
        self.buf = bytearray(seed)
        self.seeded = len(seed)
        #: Where the search for the head's end resumes.
        self.scan = scan
        #: How many bytes may be read before the head is too large.
        self.room = room

    def add(self, data: bytes) -> bool:
        """Keep `data`; whether the read must now be handed over (the head's
        end is in, a line is refused, or the head is too large)."""
        buf = self.buf
        buf += data
        try:
            done = find_head_end(buf, self.scan) >= 0
        except RemoteProtocolError:
            return True
        if len(buf) - 3 > self.scan:
            self.scan = len(buf) - 3
        return done or len(buf) - self.seeded > self.room

    def gathered(self) -> bytes:
        """What was read."""
        return bytes(memoryview(self.buf)[self.seeded :])


class SlowLane:
    """An epoll of its own for slow heads' reads (module docstring); its task
    (`run`) must run while reads wait here."""

    __slots__ = ("_epoll", "_waiting", "_gathering", "_arriving", "_no_arrivals", "wakes_per_turn")

    def __init__(self, wakes_per_turn: int = WAKES_PER_TURN) -> None:
        self._epoll = select.epoll()
        #: The task waiting to read each registered file descriptor.
        self._waiting: dict[int, Task] = {}
        #: The reads whose heads the lane reads itself, by file descriptor.
        self._gathering: dict[int, Gathering] = {}
        #: The new connections whose first head is arriving, with no task.
        self._arriving: dict[int, Arrival] = {}
        #: Set when the last arrival leaves, while `arrivals_gone` waits.
        self._no_arrivals: trio.Event | None = None
        self.wakes_per_turn = wakes_per_turn

    @property
    def waiting(self) -> int:
        """How many reads wait here now (arrivals' too)."""
        return len(self._waiting) + len(self._gathering) + len(self._arriving)

    @property
    def arriving(self) -> int:
        """How many new connections' first heads are arriving here now."""
        return len(self._arriving)

    def _arm(self, fd: int) -> None:
        epoll = self._epoll
        try:
            epoll.modify(fd, _ARMED)  # (waited here before: re-arm)
        except FileNotFoundError:
            epoll.register(fd, _ARMED)

    async def wait_readable(self, sock: socket.socket) -> None:
        """Wait until `sock` is readable (or cancelled), woken by the lane's task."""
        fd = sock.fileno()
        epoll = self._epoll
        if epoll.closed:  # (the lane has stopped: the server is being cancelled)
            await trio.lowlevel.wait_readable(sock)
            return
        self._arm(fd)
        waiting = self._waiting
        waiting[fd] = current_task()

        def abort(_: object) -> Abort:
            # (still armed: if it fires, no task is waiting and nothing wakes)
            waiting.pop(fd, None)
            return Abort.SUCCEEDED

        await wait_task_rescheduled(abort)

    async def gather(
        self, sock: socket.socket, max_bytes: int, plan: tuple[bytes, int, int]
    ) -> bytes | None:
        """Wait while the lane reads the rest of a head from `sock` (`Gathering`,
        `plan` from `HTTP11Connection.head_gathering`); what it read, b"" at
        the end of the stream, or None (the lane has stopped: read again).
        Raises ``trio.BrokenResourceError`` if a read failed with nothing
        read before it."""
        fd = sock.fileno()
        if self._epoll.closed:
            await trio.lowlevel.wait_readable(sock)
            return None
        self._arm(fd)
        gathering = self._gathering
        record = gathering[fd] = Gathering(current_task(), sock, max_bytes, plan)

        def abort(_: object) -> Abort:
            # (what was read goes with the read: the connection is ending)
            if gathering.get(fd) is record:
                del gathering[fd]
            return Abort.SUCCEEDED

        gathered: bytes | None = await wait_task_rescheduled(abort)
        return gathered

    def arrive(self, arrival: Arrival) -> None:
        """Read for `arrival` when its socket is readable (`Arrival.read`)."""
        assert arrival.sock is not None
        fd = arrival.sock.fileno()
        try:
            self._epoll.register(fd, _ARMED)  # (a new socket: not here before)
        except FileExistsError:
            self._epoll.modify(fd, _ARMED)
        self._arriving[fd] = arrival

    async def arrivals_gone(self) -> None:
        """Until no arrival waits here (at a drain: each gets its task, or
        ends at its time limit)."""
        while self._arriving:
            self._no_arrivals = trio.Event()
            await self._no_arrivals.wait()

    def _arrival_left(self, fd: int) -> None:
        arriving = self._arriving
        if arriving.pop(fd, None) is not None and not arriving and self._no_arrivals is not None:
            self._no_arrivals.set()

    def _read_for(self, fd: int, record: Gathering) -> None:
        """Read what came for a gathering read, and wake it if it is done."""
        assert record.sock is not None and record.task is not None
        try:
            data = record.sock.recv(record.max_bytes)
        except BlockingIOError:
            self._arm(fd)
            return
        except OSError as exc:
            del self._gathering[fd]
            gathered = record.gathered()
            # (what was read goes first: the read after it fails again, or ends)
            reschedule(
                record.task,
                Value(gathered)
                if gathered
                else Error(trio.BrokenResourceError(f"receive failed: {exc}")),
            )
            return
        if data and not record.add(data):
            self._arm(fd)
            return
        del self._gathering[fd]
        # (at the end of the stream with nothing read: b"", the end)
        reschedule(record.task, Value(record.gathered()))

    def forget(self, sock: socket.socket) -> None:
        """`sock` is about to close, or an arrival's task takes it over: stop
        watching it, and a read waiting on it gets ``trio.ClosedResourceError``."""
        fd = sock.fileno()
        if fd < 0:
            return
        # (never registered here, gone already, or the lane has stopped)
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(fd)
        self._arrival_left(fd)
        task = self._waiting.pop(fd, None)
        record = self._gathering.pop(fd, None)
        if record is not None:
            task = record.task
        if task is not None:
            reschedule(task, Error(trio.ClosedResourceError("the connection was closed")))

    async def run(self) -> None:
        """Wake the reads whose sockets are ready, `wakes_per_turn` per
        turn, until cancelled; then close the arrivals still here and the
        lane's epoll."""
        epoll = self._epoll
        waiting = self._waiting
        gathering = self._gathering
        arriving = self._arriving
        most = self.wakes_per_turn
        try:
            while True:
                await trio.lowlevel.wait_readable(epoll.fileno())
                while True:
                    # (the reads woken last time run in the batch after it;
                    # more wait for a turn of their own)
                    await take_turn()
                    events = epoll.poll(0, most)
                    for fd, _ in events:
                        task = waiting.pop(fd, None)
                        if task is not None:
                            reschedule(task)
                        else:
                            record = gathering.get(fd)
                            if record is not None:
                                self._read_for(fd, record)
                            else:
                                arrival = arriving.get(fd)
                                if arrival is not None and arrival.read():
                                    self._arm(fd)
                    if len(events) < most:
                        break
        finally:
            for arrival in list(arriving.values()):
                arrival.close()
            trio.lowlevel.notify_closing(epoll.fileno())
            epoll.close()


def slow_lane() -> SlowLane | None:
    """A new lane, or None where there is no epoll."""
    if not hasattr(select, "epoll"):
        return None
    return SlowLane()
