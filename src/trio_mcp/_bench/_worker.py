"""One load-generating process: a plain ``select.epoll`` loop over non-blocking sockets.

Not trio and not asyncio, on purpose: a load generator's cost per request
decides whether it measures the server or itself, and a hand-written epoll loop
does per request only what the request needs (one ``send``, one ``recv``, a
find for the end of the head, a few substring tests), with request bytes built
once per connection. Latencies go into a list and reach the histograms in
batches ten times a second.

The parent (``_run.py``) starts one of these per ``--workers``, each with its
own connections and MCP sessions, and merges their results.

Scenarios run as operations made of steps (one HTTP exchange each): ``call``
and ``sse`` are one tools/call; ``initialize`` is initialize,
notifications/initialized and DELETE. Before its first operation a connection
runs its setup steps (a 2025 session: initialize + notifications/initialized).
The idle scenarios only run setup (and, for ``idle-streams``, open a GET
stream, or on 2026-07-28 a subscriptions/listen stream), then hold the
connection.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import heapq
import itertools
import select
import socket
import sys
import time
from collections import Counter
from typing import Any

import orjson

from .._errors import PeerProtocolError
from . import _histogram
from ._cleanup import delete_sessions
from ._plan import WorkerPlan, WorkerResult
from ._requests import FIRST_ID, RequestFactory, is_modern
from ._response import (
    STREAM as READER_STREAM,
)
from ._response import (
    ResponseReader,
    classify,
    session_id,
    sse_messages,
    status_error,
)

# steps
INIT, INITIALIZED, CALL, DELETE, STREAM = range(5)
# connection states
DOWN, CONNECTING, READY, BUSY, HOLDING = range(5)

TICK_S = 0.1
# Open loop: sleep until this long before a request is due, then poll without
# sleeping until it is. A sleeper wakes tens of microseconds late now and then
# (more in a VM), and that lateness would count as server latency.
SPIN_S = 0.0001
PR_SET_TIMERSLACK = 29
# One read takes up to this much, into the worker's own buffer (`recv_into`):
# a `recv` of this size would have malloc map and unmap fresh memory on every
# call (it is over glibc's mmap threshold), which was three quarters of the
# load generator's CPU time per request.
RECV_BYTES = 256 * 1024
MAX_BACKOFF_S = 1.0
GIVE_UP_AFTER = 3  # --requests: failed connects in a row, on every connection
IDLE_SCENARIOS = ("idle-sessions", "idle-streams")


class Conn:
    __slots__ = (
        "attempts",
        "counted",
        "fd",
        "in_setup",
        "intended",
        "next_id",
        "number",
        "op_start",
        "opened_at",
        "out",
        "parts",
        "reader",
        "resume",
        "retry_at",
        "sent_at",
        "session",
        "sock",
        "state",
        "step",
        "steps",
        "version",
    )

    def __init__(self, number: int, version: str) -> None:
        self.number = number
        self.sock: socket.socket | None = None
        self.fd = -1
        self.reader = ResponseReader()
        self.state = DOWN
        self.session: bytes | None = None
        self.version = version
        self.parts: tuple[bytes, ...] = ()
        self.steps: tuple[int, ...] = ()
        self.step = 0
        self.in_setup = False
        self.sent_at = 0.0
        self.intended = 0.0  # open loop: when the next operation is due
        self.op_start = 0.0  # what the running operation's latency is measured from
        self.opened_at = 0.0
        self.next_id = FIRST_ID
        self.out = b""
        self.retry_at = 0.0
        self.attempts = 0
        self.resume = False
        self.counted = False  # the running operation started in the measured phase


def wait_before(now: float, next_tick: float, first_due: float | None) -> tuple[float, bool]:
    """How long the loop may wait for the sockets, and whether the wait must be
    precise because a paced request is due after it.

    epoll_wait counts whole milliseconds (rounded up), which would make paced
    requests up to 1 ms late, a request due just after a tick included; a
    precise wait sleeps with select, to the microsecond, and then epoll collects
    what is ready. The last SPIN_S before a request is due is spent polling.
    """
    timeout = next_tick - now
    if first_due is None:
        return max(timeout, 0.0), False
    return max(min(timeout, first_due - now - SPIN_S), 0.0), True


class Worker:
    """The event loop of one worker process."""

    def __init__(self, plan: WorkerPlan, report: Any = None) -> None:
        self.plan = plan
        self.report = report  # a multiprocessing Connection to the parent, or None
        self.factory = RequestFactory(plan.target, plan.protocol, plan.tool, plan.arguments)
        self.modern = is_modern(plan.protocol)
        self.idle = plan.scenario in IDLE_SCENARIOS
        self.progress = plan.scenario == "sse"
        if plan.scenario == "initialize":
            self.setup_steps: tuple[int, ...] = ()
            self.op_steps: tuple[int, ...] = (INIT, INITIALIZED, DELETE)
        else:
            self.setup_steps = () if self.modern else (INIT, INITIALIZED)
            if plan.scenario == "idle-streams":
                self.setup_steps += (STREAM,)
            self.op_steps = () if self.idle else (CALL,)
        self.epoll = select.epoll()
        self.wakeup = [self.epoll.fileno()]
        self.received = memoryview(bytearray(RECV_BYTES))  # each read's bytes, copied out
        self.by_fd: dict[int, Conn] = {}
        n = plan.count if self.idle else plan.connections
        self.conns = [Conn(plan.first_connection + i, plan.protocol) for i in range(n)]
        self.address = plan.target.addresses[0]
        # results
        self.errors: Counter[str] = Counter()
        self.latency_sum_us = 0
        self.total = _histogram.new_histogram()
        self.second_histogram = _histogram.new_histogram()
        self.second = 0
        self.second_ok = 0
        self.second_errors = 0
        self.seconds: list[dict[str, Any]] = []
        self.ok = 0
        self.progress_events = 0
        self.opened = 0
        self.failed = 0
        self.dropped = 0
        self.last_open = 0.0
        self.last_done = 0.0  # when the last measured operation finished
        # schedule
        self.remaining = plan.requests  # operations left to start (None: until the end)
        self.timers: list[tuple[float, int, Conn]] = []
        self.sequence = itertools.count()
        self.interval = plan.total_connections / plan.rate if plan.rate else 0.0
        self.start = self.measure_start = 0.0
        self.end = float("inf")
        self.issuing = False
        self.stop = False
        self.interrupted = False
        self.gave_up = False
        self.idle_queue: list[Conn] = []
        self.opening = 0

    # -- running -----------------------------------------------------------------

    def poll(self, timeout: float) -> None:
        try:
            events = self.epoll.poll(timeout)
        except InterruptedError:
            return
        by_fd = self.by_fd
        for fd, mask in events:
            conn = by_fd.get(fd)
            if conn is None:
                continue
            if conn.state == CONNECTING:
                self.connected(conn, time.monotonic())
                continue
            if mask & select.EPOLLOUT and conn.out:
                self.flush(conn)
                if conn.sock is None:
                    continue
            if mask & (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP):
                self.readable(conn)

    def readable(self, conn: Conn) -> None:
        sock = conn.sock
        assert sock is not None
        received = self.received
        try:
            size = sock.recv_into(received)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(
                conn, "reset" if exc.errno != errno.ETIMEDOUT else "timeout", time.monotonic()
            )
            return
        now = time.monotonic()
        if not size:
            self.eof(conn, now)
            return
        data = received[:size].tobytes()
        if conn.state != BUSY:
            if conn.state == HOLDING and conn.reader.state == READER_STREAM:  # keepalives
                return
            self.fail(conn, "protocol", now)  # bytes nobody asked for
            return
        try:
            done = conn.reader.feed(data)
        except PeerProtocolError:
            self.fail(conn, "protocol", now)
            return
        if done:
            self.answered(conn, now)

    def eof(self, conn: Conn, now: float) -> None:
        if conn.state == BUSY:
            try:
                done = conn.reader.feed_eof()
            except PeerProtocolError:
                self.fail(conn, "reset", now)
                return
            if done:
                self.answered(conn, now)
                return
        if conn.state == HOLDING:
            self.dropped += 1
            self.close(conn)
            conn.state = DOWN
            conn.retry_at = float("inf")  # a dropped idle session is not reopened
            return
        # the server closed an idle keep-alive connection: reconnect, no error
        self.close(conn)
        self.connect(conn, now)

    # -- connections -------------------------------------------------------------

    def connect(self, conn: Conn, now: float) -> None:
        family, sockaddr = self.address
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sock = sock
        conn.fd = sock.fileno()
        conn.reader = ResponseReader()
        conn.out = b""
        conn.sent_at = now
        code = sock.connect_ex(sockaddr)
        if code not in (0, errno.EINPROGRESS):
            self.by_fd[conn.fd] = conn
            conn.state = CONNECTING
            self.fail(conn, "connect", now)
            return
        conn.state = CONNECTING
        self.by_fd[conn.fd] = conn
        self.epoll.register(conn.fd, select.EPOLLOUT)

    def connected(self, conn: Conn, now: float) -> None:
        sock = conn.sock
        assert sock is not None
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.fail(conn, "connect", now)
            return
        self.epoll.modify(conn.fd, select.EPOLLIN)
        conn.state = READY
        if conn.resume:  # the server closed in the middle of an operation: go on
            conn.resume = False
            self.send_step(conn, now)
        elif conn.session is None and self.setup_steps:
            self.begin(conn, self.setup_steps, setup=True, now=now)
        else:
            if not conn.parts:
                conn.parts = self.factory.call_parts(None, conn.version, progress=self.progress)
            if self.issuing:
                self.next_operation(conn, now)

    def close(self, conn: Conn) -> None:
        if conn.sock is not None:
            self.by_fd.pop(conn.fd, None)
            try:
                self.epoll.unregister(conn.fd)
            except (OSError, ValueError):
                pass
            conn.sock.close()
            conn.sock = None
            conn.fd = -1

    def fail(self, conn: Conn, kind: str, now: float) -> None:
        """Count an error on `conn`, drop the connection, retry it after a backoff."""
        state = conn.state
        outside_operation = (state == CONNECTING and not conn.resume) or conn.in_setup
        conn.resume = False
        self.close(conn)
        conn.state = DOWN
        if self.idle:
            conn.retry_at = float("inf")  # idle sessions are opened once, never again
            if state == HOLDING:
                self.dropped += 1
                return
            self.error(kind, now)
            self.failed += 1
            self.opening -= 1
            _open_more(self, now)
            return
        if conn.counted or outside_operation or not self.issuing:
            self.error(kind, now)
            self.last_done = max(self.last_done, now) if self.issuing else self.last_done
        conn.counted = False
        if kind in ("timeout", "protocol"):
            conn.retry_at = now  # the server is there; only this connection went bad
        else:
            conn.retry_at = now + min(MAX_BACKOFF_S, 0.05 * 2**conn.attempts)
            conn.attempts += 1
        if outside_operation and self.issuing and self.remaining:
            # a connection that cannot be set up uses up the request it would have
            # sent, so --requests N ends even when the server is gone
            self.remaining -= 1

    def error(self, kind: str, now: float) -> None:
        self.errors[kind] += 1
        if self.issuing and now >= self.measure_start:
            self.second_errors += 1

    def send(self, conn: Conn, data: bytes, now: float) -> None:
        conn.state = BUSY
        conn.sent_at = now
        sock = conn.sock
        assert sock is not None
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.fail(conn, "reset", now)
            return
        if sent < len(data):
            conn.out = data[sent:]
            self.epoll.modify(conn.fd, select.EPOLLIN | select.EPOLLOUT)

    def flush(self, conn: Conn) -> None:
        sock = conn.sock
        assert sock is not None
        try:
            sent = sock.send(conn.out)
        except BlockingIOError:
            return
        except OSError:
            self.fail(conn, "reset", time.monotonic())
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            self.epoll.modify(conn.fd, select.EPOLLIN)

    # -- operations --------------------------------------------------------------

    def begin(self, conn: Conn, steps: tuple[int, ...], *, setup: bool, now: float) -> None:
        conn.steps = steps
        conn.step = 0
        conn.in_setup = setup
        if setup:
            conn.opened_at = now
        self.send_step(conn, now)

    def send_step(self, conn: Conn, now: float) -> None:
        step = conn.steps[conn.step]
        reader = conn.reader
        if step == CALL:
            reader.reset()
            idb = b"%d" % conn.next_id
            conn.next_id += 1
            self.send(conn, idb.join(conn.parts), now)
            return
        factory = self.factory
        reader.reset(stream_head=step == STREAM)
        if step == INIT:
            data = factory.initialize()
        elif step == INITIALIZED:
            data = factory.initialized(conn.session, conn.version)
        elif step == DELETE:
            data = factory.delete(conn.session, conn.version)
        elif self.modern:  # no session, no GET stream: a subscriptions/listen stream
            data = factory.listen()
        else:
            data = factory.get_stream(conn.session, conn.version)
        self.send(conn, data, now)

    def answered(self, conn: Conn, now: float) -> None:
        """A response to the step in flight on `conn` is complete."""
        reader = conn.reader
        step = conn.steps[conn.step]
        if step == CALL:
            body = reader.body
            if (
                reader.status == 200
                and not reader.is_sse
                and b'"error"' not in body
                and b'"isError"' not in body
                and body[:1] == b"{"
            ):
                kind = None
            else:
                kind, progress = classify(reader)
                if now >= self.measure_start:
                    self.progress_events += progress
        elif step == INIT:
            kind = _initialized_session(self, conn)
        elif step == STREAM:
            kind = status_error(reader) or (None if reader.is_sse else "protocol")
        else:
            kind = status_error(reader)
        if kind is not None:
            if reader.status == 404 and conn.session is not None:
                conn.session = None  # the session is gone; the next setup opens another
            if conn.in_setup:
                self.fail(conn, kind, now)
                return
            if conn.counted:
                self.error(kind, now)
            self.done(conn, now, ok=False)
            return
        conn.step += 1
        if conn.step < len(conn.steps):
            if reader.close:  # the server ends the connection between two steps
                self.close(conn)
                conn.resume = True
                self.connect(conn, now)
                return
            self.send_step(conn, now)
            return
        if conn.in_setup:
            _setup_done(self, conn, now)
        else:
            self.done(conn, now, ok=True)

    def done(self, conn: Conn, now: float, *, ok: bool) -> None:
        """An operation on `conn` finished (ok or counted as an error)."""
        if conn.counted and now < self.end:
            self.last_done = now
            if ok:
                self.ok += 1
                self.second_ok += 1
                self.record(int((now - conn.op_start) * 1e6 + 0.5))
        conn.counted = False
        conn.state = READY
        if conn.reader.close:
            self.close(conn)
            conn.state = DOWN
            self.connect(conn, now)
            return
        self.next_operation(conn, now)

    def next_operation(self, conn: Conn, now: float) -> None:
        """Start `conn`'s next operation now (closed loop) or when it is due (open loop)."""
        if not self.issuing:
            return
        if self.interval and not conn.intended:
            # connections start evenly spread over one interval, as wrk2's do
            conn.intended = self.start + conn.number * self.interval / self.plan.total_connections
        if self.interval and conn.intended > now:
            heapq.heappush(self.timers, (conn.intended, next(self.sequence), conn))
        else:
            self.start_operation(conn, now)

    def fire_timers(self, now: float) -> None:
        timers = self.timers
        while timers and timers[0][0] <= now:
            due, _, conn = heapq.heappop(timers)
            if conn.state == READY and due == conn.intended:
                self.start_operation(conn, now)
            # else: stale, or the connection is down; it rejoins its schedule when back

    def start_operation(self, conn: Conn, now: float) -> None:
        remaining = self.remaining
        if now >= self.end:
            return
        counted = now >= self.measure_start
        if remaining is not None:
            if remaining <= 0:
                return
            if counted:
                self.remaining = remaining - 1
        conn.counted = counted
        if self.interval:
            # latency counts from when the request was due, not from when it could
            # be sent: corrected for coordinated omission
            conn.op_start = conn.intended
            conn.intended += self.interval
        else:
            conn.op_start = now
        self.begin(conn, self.op_steps, setup=False, now=now)

    # -- idle scenarios ----------------------------------------------------------

    def record(self, latency_us: int) -> None:
        # one record per request keeps the loop free of batch pauses that would
        # make paced requests late (a record costs well under a microsecond)
        self.latency_sum_us += latency_us
        self.second_histogram.record_value(min(latency_us, _histogram.HIGHEST_US))


def _initialized_session(worker: Worker, conn: Conn) -> str | None:
    reader = conn.reader
    kind = status_error(reader)
    if kind is not None:
        return kind
    conn.session = session_id(reader)  # None: a server without sessions
    body = reader.body
    if reader.is_sse:
        messages = sse_messages(body)
        body = messages[-1] if messages else b""
    try:
        message = orjson.loads(body)
        version = message["result"]["protocolVersion"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "protocol" if b'"error"' not in body else "jsonrpc initialize"
    if not isinstance(version, str):
        return "protocol"
    conn.version = version
    return None


def _setup_done(worker: Worker, conn: Conn, now: float) -> None:
    conn.in_setup = False
    conn.attempts = 0
    conn.parts = worker.factory.call_parts(conn.session, conn.version, progress=worker.progress)
    if worker.idle:
        conn.state = HOLDING
        worker.opened += 1
        worker.opening -= 1
        worker.last_open = now
        worker.record(int((now - conn.opened_at) * 1e6 + 0.5))
        _open_more(worker, now)
        return
    conn.state = READY
    if conn.reader.close:
        worker.close(conn)
        worker.connect(conn, now)
        return
    if worker.issuing:
        worker.next_operation(conn, now)


def _open_more(worker: Worker, now: float) -> None:
    while worker.idle_queue and worker.opening < worker.plan.connections:
        conn = worker.idle_queue.pop()
        worker.opening += 1
        conn.opened_at = now
        worker.connect(conn, now)


# -- bookkeeping -------------------------------------------------------------


def _expire(worker: Worker, now: float) -> None:
    """Time out requests and connects older than --timeout."""
    limit = now - worker.plan.timeout_s
    for conn in worker.conns:
        if conn.state in (BUSY, CONNECTING) and conn.sent_at < limit:
            worker.fail(conn, "timeout", now)


def prepare_worker(worker: Worker, deadline: float) -> int:
    """Connect and set up every connection of a load scenario; how many are ready."""
    if worker.idle:
        return 0
    now = time.monotonic()
    for conn in worker.conns:
        worker.connect(conn, now)
    while time.monotonic() < deadline and any(c.state in (CONNECTING, BUSY) for c in worker.conns):
        worker.poll(min(TICK_S, max(0.0, deadline - time.monotonic())))
        _expire(worker, time.monotonic())
    for conn in worker.conns:
        if conn.state in (CONNECTING, BUSY):
            worker.fail(conn, "timeout", time.monotonic())
    return sum(c.state == READY for c in worker.conns)


def run_worker(worker: Worker, start: float) -> WorkerResult:
    """The warm-up and measured phases, from monotonic time `start`."""
    plan = worker.plan
    worker.start = start
    worker.measure_start = start + (0.0 if worker.idle else plan.warmup_s)
    worker.end = (
        worker.measure_start + plan.duration_s if plan.duration_s is not None else float("inf")
    )
    wait = start - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    worker.issuing = True
    precise_timers()
    collecting = gc.isenabled()
    gc.disable()  # no collector pauses mid-run; the loop makes no reference cycles
    now = time.monotonic()
    if worker.idle:
        worker.idle_queue = list(reversed(worker.conns))
        _open_more(worker, now)
    else:
        for conn in worker.conns:
            if conn.state == READY:
                worker.next_operation(conn, now)
            elif conn.state == DOWN:
                conn.retry_at = now
    next_tick = now + TICK_S
    try:
        while not worker.stop:
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + TICK_S
                _tick(worker, now)
                if _finished(worker, now):
                    break
            timeout, precise = wait_before(
                now, next_tick, worker.timers[0][0] if worker.timers else None
            )
            if precise and timeout > 0 and not select.select(worker.wakeup, (), (), timeout)[0]:
                continue  # nothing to read: a tick, or a request within SPIN_S
            worker.poll(timeout)
            if worker.timers:
                worker.fire_timers(time.monotonic())
            if worker.remaining == 0 and _finished(worker, now):
                break
    except KeyboardInterrupt:
        worker.interrupted = True
    finally:
        if collecting:
            gc.enable()
    return worker_result(worker, time.monotonic())


def _finished(worker: Worker, now: float) -> bool:
    if now >= worker.end:
        return True
    if worker.idle:
        return not worker.idle_queue and not worker.opening
    if worker.remaining and all(
        c.state == DOWN and c.attempts >= GIVE_UP_AFTER for c in worker.conns
    ):
        # --requests N against a server that is gone would otherwise retry for
        # a long time; duration runs keep trying (a server may come back)
        worker.gave_up = True
        return True
    # --requests: every operation started and answered
    return worker.remaining == 0 and not any(c.state in (BUSY, CONNECTING) for c in worker.conns)


def _tick(worker: Worker, now: float) -> None:
    _expire(worker, now)
    if not worker.idle:
        for conn in worker.conns:
            if conn.state == DOWN and conn.retry_at <= now:
                if worker.remaining is not None and worker.remaining <= 0:
                    continue
                worker.connect(conn, now)
    if now >= worker.measure_start:
        second = int(now - worker.measure_start)
        if second != worker.second:
            _roll_second(worker)
            worker.second = second
    if worker.report is not None:
        if worker.report.poll():
            message = worker.report.recv()
            if message[0] == "stop":
                worker.stop = True
        done = worker.ok + worker.opened
        worker.report.send(("progress", worker.plan.index, done, sum(worker.errors.values())))


def _roll_second(worker: Worker) -> None:
    worker.total.add(worker.second_histogram)
    worker.seconds.append(
        {
            "second": worker.second,
            "ok": worker.second_ok,
            "errors": worker.second_errors,
            "histogram": _histogram.encode(worker.second_histogram),
        }
    )
    worker.second_histogram = _histogram.new_histogram()  # cheaper than reset()
    worker.second_ok = worker.second_errors = 0


def worker_result(worker: Worker, now: float) -> WorkerResult:
    if worker.second_ok or worker.second_errors or worker.second_histogram.get_total_count():
        _roll_second(worker)
    held = sum(c.state == HOLDING for c in worker.conns)
    for conn in worker.conns:
        worker.close(conn)
    worker.epoll.close()
    end = min(now, worker.end)
    if worker.plan.requests is not None and not worker.idle:
        end = max(worker.last_done, worker.measure_start)
    return WorkerResult(
        index=worker.plan.index,
        ok=worker.ok,
        errors=dict(worker.errors),
        histogram=_histogram.encode(worker.total),
        latency_sum_us=worker.latency_sum_us,
        seconds=worker.seconds,
        progress_events=worker.progress_events,
        measured_s=max(0.0, end - worker.measure_start),
        ready_connections=sum(c.state != DOWN for c in worker.conns),
        opened=worker.opened,
        failed=worker.failed,
        open_time_s=(worker.last_open - worker.start) if worker.opened else None,
        dropped=worker.dropped,
        held_at_end=held,
        interrupted=worker.interrupted,
        gave_up=worker.gave_up,
    )


def leave(worker: Worker) -> None:
    """Close a worker's connections (streams end first) and delete its sessions."""
    sessions = [(c.session, c.version) for c in worker.conns if c.session is not None]
    for conn in worker.conns:
        worker.close(conn)
    delete_sessions(worker.address, worker.factory, sessions)


def precise_timers() -> None:
    """Ask Linux for 1 ns timer slack instead of 50 us, so paced sends are on time."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def raise_file_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; the (soft, hard) now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


def worker_main(plan: WorkerPlan, pipe: Any) -> None:
    """Entry point of a worker process: prepare, report ready, wait for go, run, report."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent tells us to stop
    raise_file_limit()
    try:
        worker = Worker(plan, pipe)
        try:
            ready = prepare_worker(worker, time.monotonic() + plan.timeout_s + 1.0)
            pipe.send(("ready", plan.index, ready))
            message = pipe.recv()
            if message[0] != "go":
                pipe.send(("result", worker_result(worker, time.monotonic())))
                return
            pipe.send(("result", run_worker(worker, message[1])))
        finally:
            leave(worker)
    except (EOFError, BrokenPipeError):
        pass  # the parent went away
    except Exception as exc:  # a bug of ours: tell the parent, which reports it
        pipe.send(("crash", f"{type(exc).__name__}: {exc}"))
    finally:
        pipe.close()
