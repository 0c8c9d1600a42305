"""``trio-mcp run TARGET --workers N``: a supervisor and N worker processes on one port.

Where it starts: `supervise`. The supervisor binds the listening sockets
itself and each worker inherits its own: on Linux one ``SO_REUSEPORT``
socket per worker, so the kernel spreads new connections evenly; elsewhere
one socket that every worker accepts from. Since the supervisor keeps every
socket open until it stops, a worker that stops or dies never takes a
socket's queue of connections down with it: a rolling restart's new worker
accepts from the socket its predecessor used, and a dead worker's queue
waits for its replacement. (Had each worker bound its own socket, a worker
closing it would reset the connections queued in it unless the
``net.ipv4.tcp_migrate_req`` sysctl is on.)

Workers are new interpreters (`_worker.py`), spawned with their whole
configuration, secrets included, over their control channel
(`_control.py`); never forked from a process that runs trio. The
supervisor runs trio for its own waiting only: processes, signals,
heartbeats.

- Readiness: a worker reports once it listens; when every worker has, the
  supervisor logs the start-up line once, naming ``N processes``.
- Heartbeat: pinged every `heartbeat_interval_s`, answered by a task in the
  worker's trio run; a worker silent for ``worker_heartbeat_timeout_s`` (its
  scheduler blocked) is killed (SIGKILL) and replaced, and the log says why.
- A worker that exits, is killed, or does not listen within
  ``worker_start_timeout_s`` is replaced: at once the first time, then after
  `FIRST_BACKOFF_S`, doubled for each further failure of the same worker
  within `CRASH_WINDOW_S` (0.5, 1, 2 s); the `CRASH_LIMIT`-th there stops
  the group (exit status 1, one line saying why).
- SIGHUP: a rolling restart, one worker at a time: its successor starts,
  and once it listens the old one gets SIGTERM and drains.
- SIGTERM or SIGINT: every worker gets SIGTERM and drains; one still running
  after its drain (``drain_delay_s`` + ``shutdown_timeout_s``) plus
  `STOP_MARGIN_S` is killed. A second signal kills them all at once.
- With no ``request_state_keys``, the supervisor mints one key and hands it
  to every worker, so a 2026 requestState sealed by one opens on any other.
- Metrics (``metrics_path``): each pong carries the worker's metrics and
  each ping the others' latest, which the worker adds into its own, so one
  scrape of any worker counts the whole group (up to two heartbeat
  intervals old for the others).
- Each worker gets its ``owner_name`` (``w1`` .. ``wN``, or the configured
  name with ``-1`` .. ``-N``) and ``peer_sockets_dir`` (a private directory
  the supervisor makes and removes); a replacement keeps the name.
- With ``worker_connection_slack`` (the default), the supervisor makes the
  group's connection counts in that directory and hands each worker its
  slot; a worker holding more connections than another passes new ones to
  it (`_trio._spread`). When a worker exits, its slot is marked free.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections import deque
from typing import Any, Final

import trio

from ._config import RunConfig
from ._control import LineBuffer, encode
from ._mcp._startup import announce_group
from ._settings import config_values
from ._trio._socketio import bind_listeners
from ._trio._spread import SUFFIX as SPREAD_SUFFIX
from ._trio._spread import SpreadCounts

logger = logging.getLogger("trio_mcp.workers")

#: Failures of one worker within `CRASH_WINDOW_S` that stop the group: a
#: worker that cannot start, or dies again as soon as it serves, will not
#: get better by being started for ever.
CRASH_LIMIT: Final = 5
CRASH_WINDOW_S: Final = 60.0
#: The wait before a failed worker's second restart within the window,
#: doubled for each further one (its first restart is at once).
FIRST_BACKOFF_S: Final = 0.5
#: What a draining worker gets beyond its own drain before it is killed.
STOP_MARGIN_S: Final = 5.0
#: The most an owner name may be (it rides in every session id).
OWNER_NAME_BYTES: Final = 16
#: Each worker in a process group of its own, so that a terminal's Ctrl-C
#: reaches the supervisor only, which drains the workers once; but in the
#: supervisor's session where Python can (3.11), since a session of its own
#: is a scheduling group of its own where Linux's autogroups are on: the
#: kernel then shares the CPU between each worker and everything else as
#: if they were separate desktop programs, and a worker wakes for fewer
#: requests at a time than one process does, each costing more CPU.
_OWN_PROCESS_GROUP: Final[dict[str, Any]] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)


#: Linux's option that ties a listening socket to a CPU (``SO_INCOMING_CPU``,
#: named by Python from 3.11): in a ``SO_REUSEPORT`` group where any socket
#: has it, the kernel gives a new connection to a socket tied to the CPU that
#: received it, if there is one (Linux 6.2 and later; before, the hash alone).
SO_INCOMING_CPU: Final = getattr(socket, "SO_INCOMING_CPU", 49)


def worker_cpus(workers: int) -> list[int]:
    """Each worker slot's CPU (``worker_cpu_affinity``): the CPUs this process
    may use, in order, in turn."""
    allowed = sorted(os.sched_getaffinity(0))
    return [allowed[index % len(allowed)] for index in range(workers)]


def steer(sockets: list[socket.socket], cpu: int) -> bool:
    """Ask the kernel to give `sockets` the connections `cpu` receives;
    whether it took the option (it may refuse, or not know it)."""
    try:
        for sock in sockets:
            sock.setsockopt(socket.SOL_SOCKET, SO_INCOMING_CPU, cpu)
    except OSError as exc:
        logger.warning(
            "worker_cpu_affinity: the kernel does not steer connections to the "
            "worker on their CPU (SO_INCOMING_CPU: %s); the workers are pinned all "
            "the same",
            exc,
        )
        return False
    return True


def heartbeat_interval_s(timeout_s: float) -> float:
    """How often workers are pinged: several pings fit in the timeout, and
    an idle group costs one small message a second per worker at most."""
    return min(1.0, timeout_s / 4)


def owner_name(base: str, index: int) -> str:
    """Worker `index`'s owner name: ``w<index>``, or ``<base>-<index>``
    shortened to fit."""
    if not base:
        return f"w{index}"
    suffix = f"-{index}"
    return base[: OWNER_NAME_BYTES - len(suffix)] + suffix


def mint_request_state_key() -> str:
    """A requestState key as strong as one a lone process generates
    (`StateSealer`: 32 random bytes), as text a configuration holds."""
    return secrets.token_urlsafe(32)


#: Linux's switch for moving a closed listener's queued connections to
#: another socket of its ``SO_REUSEPORT`` group (5.14 and later).
MIGRATE_SYSCTL: Final = "/proc/sys/net/ipv4/tcp_migrate_req"


def warn_if_queues_reset(path: str = MIGRATE_SYSCTL) -> bool:
    """For a process that binds its own ``SO_REUSEPORT`` socket
    (``--reuse-port`` without ``--workers``), on Linux: warn when a socket
    that closes resets its queued connections instead of handing them to
    the others (the sysctl is 0, or missing on kernels before 5.14).
    Whether it warned."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open(path, encoding="ascii") as file:
            if file.read().strip() != "0":
                return False
    except OSError:
        pass
    logger.warning(
        "reuse_port is on and net.ipv4.tcp_migrate_req is off: when a process on this "
        "port stops, the connections queued for it are reset; turn it on with "
        "`sysctl net.ipv4.tcp_migrate_req=1` (--workers needs no such setting)"
    )
    return True


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "is running"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Worker:
    """One worker process, from its spawn to its exit."""

    def __init__(self, slot: Slot, process: trio.Process, channel: trio.SocketStream) -> None:
        self.slot = slot
        self.process = process
        self.channel = channel
        self.ready = trio.Event()
        self.exited = trio.Event()
        #: Replaced on purpose (a rolling restart): its exit is no failure.
        self.retired = False
        #: Why the supervisor killed it, or what it said when it could not start.
        self.reason: str | None = None
        self.last_pong = 0.0
        #: Its metrics at its last pong (with ``metrics_path``), for the others.
        self.metrics: list[Any] | None = None

    @property
    def label(self) -> str:
        return f"worker {self.slot.name} (pid {self.process.pid})"

    def kill(self, reason: str | None = None) -> None:
        if reason is not None and self.reason is None:
            self.reason = reason
        if self.process.returncode is None:
            self.process.kill()

    def terminate(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)


@dataclasses.dataclass(eq=False)
class Slot:
    """A place for one worker: its name, its sockets, its failures."""

    index: int
    name: str
    sockets: list[socket.socket]
    #: The CPU its worker runs on (``worker_cpu_affinity``; None: any).
    cpu: int | None = None
    current: Worker | None = None
    failures: deque[float] = dataclasses.field(default_factory=deque)


class Supervisor:
    """Runs, watches and replaces the workers (the module docstring has the rules)."""

    def __init__(self, config: RunConfig, *, shared_socket: bool | None = None) -> None:
        self.config = config
        #: One socket for all workers (not Linux), else one ``SO_REUSEPORT`` each.
        self.shared_socket = (
            shared_socket
            if shared_socket is not None
            else not (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT"))
        )
        self.slots: list[Slot] = []
        self.workers: set[Worker] = set()
        self.stopping = trio.Event()
        self.failure: str | None = None
        self.port = config.mcp.http.port
        self.peer_dir = ""
        #: The group's connection counts (None: ``worker_connection_slack`` off).
        self.counts: SpreadCounts | None = None
        self._announced = False
        self._rolling = False
        self._nursery: trio.Nursery | None = None

    # ---- the group's life ---------------------------------------------------

    async def main(self) -> None:
        http = self.config.mcp.http
        try:
            await self._listen()
        except Exception as exc:  # (StartupError: one line, exit 1)
            self.failure = str(exc)
            return
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._signals)
                for slot in self.slots:
                    await self._spawn(slot, current=True)
                await self.stopping.wait()
                await self._stop_all(http.drain_delay_s + http.shutdown_timeout_s)
                nursery.cancel_scope.cancel()
        finally:
            for slot in self.slots:
                for sock in slot.sockets:
                    sock.close()

    async def _listen(self) -> None:
        """Bind every slot's sockets; with port 0, every one on the port the
        first got."""
        http = self.config.mcp.http
        config = dataclasses.replace(http, reuse_port=not self.shared_socket)
        first = await bind_listeners(config)
        ports = {sock.getsockname()[1] for sock in first}
        if len(ports) > 1:  # (port 0 on a name of several addresses)
            for sock in first:
                sock.close()
            config = dataclasses.replace(config, port=min(ports))
            first = await bind_listeners(config)
        self.port = first[0].getsockname()[1]
        config = dataclasses.replace(config, port=self.port)
        workers = self.config.workers
        cpus = worker_cpus(workers) if self.config.worker_cpu_affinity else [None] * workers
        steering = not self.shared_socket
        for index, cpu in enumerate(cpus, start=1):
            sockets = first if index == 1 or self.shared_socket else await bind_listeners(config)
            if cpu is not None and steering:
                steering = steer(sockets, cpu)
            name = owner_name(self.config.mcp.owner_name, index)
            self.slots.append(Slot(index, name, sockets, cpu))

    def _worker_config(self, slot: Slot) -> RunConfig:
        mcp = self.config.mcp
        http = dataclasses.replace(mcp.http, port=self.port, reuse_port=not self.shared_socket)
        mcp = dataclasses.replace(
            mcp, http=http, owner_name=slot.name, peer_sockets_dir=self.peer_dir
        )
        return dataclasses.replace(self.config, mcp=mcp, workers=1)

    async def _spawn(self, slot: Slot, *, current: bool) -> Worker:
        """Start a worker for `slot` (its slot's current one, if `current`)."""
        ours, theirs = socket.socketpair()
        fds = [sock.fileno() for sock in slot.sockets]
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_mcp._worker", "--control-fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(), *fds),
                stdin=subprocess.DEVNULL,
                **_OWN_PROCESS_GROUP,
            )
        finally:
            theirs.close()
        channel = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        worker = Worker(slot, process, channel)
        self.workers.add(worker)
        if current:
            slot.current = worker
        hello: dict[str, Any] = {
            "config": config_values(self._worker_config(slot)),
            "fds": fds,
            "path": sys.path,
            "cpu": slot.cpu,
        }
        if self.counts is not None:
            hello["spread"] = {
                "counts": os.path.join(self.peer_dir, "connections"),
                "slot": slot.index - 1,
                "paths": [
                    os.path.join(self.peer_dir, other.name + SPREAD_SUFFIX) for other in self.slots
                ],
                "slack": self.config.worker_connection_slack,
                "local": self.config.worker_cpu_affinity,
            }
        assert self._nursery is not None
        self._nursery.start_soon(self._life, worker, encode(hello))
        if self.stopping.is_set():
            worker.terminate()
        return worker

    async def _life(self, worker: Worker, hello: bytes) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, worker, hello)
                nursery.start_soon(self._watch, worker)
                await worker.process.wait()
                nursery.cancel_scope.cancel()
        finally:
            worker.channel.socket.close()
            self.workers.discard(worker)
            worker.exited.set()
            self._exited(worker)

    async def _read(self, worker: Worker, hello: bytes) -> None:
        """Send the worker its configuration, then take what it says."""
        channel = worker.channel
        buffer = LineBuffer()
        try:
            await channel.send_all(hello)
            while data := await channel.receive_some(65536):
                for message in buffer.feed(data):
                    if "pong" in message:
                        worker.last_pong = trio.current_time()
                        worker.metrics = message.get("metrics")
                    elif "ready" in message:
                        worker.last_pong = trio.current_time()
                        worker.ready.set()
                        self._became_ready(worker)
                    elif "failed" in message:
                        worker.reason = f"could not start: {message['failed']}"
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
            pass  # (its exit tells the rest)

    async def _watch(self, worker: Worker) -> None:
        """Kill the worker if it does not listen in time, or later misses
        its heartbeats for ``worker_heartbeat_timeout_s``."""
        config = self.config
        with trio.move_on_after(config.worker_start_timeout_s):
            await worker.ready.wait()
        if not worker.ready.is_set():
            worker.kill(f"was not listening after {config.worker_start_timeout_s:g} s")
            return
        timeout = config.worker_heartbeat_timeout_s
        interval = heartbeat_interval_s(timeout)
        count = 0
        while True:
            await trio.sleep(interval)
            if trio.current_time() - worker.last_pong > timeout:
                worker.kill(
                    f"missed its heartbeats for {timeout:g} s (something blocks its "
                    "trio scheduler, such as a handler's blocking call)"
                )
                return
            count += 1
            ping: dict[str, Any] = {"ping": count}
            if self.config.mcp.metrics_path is not None:
                ping["peers"] = self._peer_metrics(worker)
            with trio.move_on_after(interval):
                try:
                    await worker.channel.send_all(encode(ping))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    def _peer_metrics(self, worker: Worker) -> list[Any]:
        """The latest metrics of the workers serving beside `worker`."""
        return [
            slot.current.metrics
            for slot in self.slots
            if slot is not worker.slot and slot.current is not None and slot.current.metrics
        ]

    def _became_ready(self, worker: Worker) -> None:
        if self._announced:
            logger.info("%s is serving", worker.label)
            return
        logger.debug("%s is serving", worker.label)
        slots = self.slots
        if all(slot.current is not None and slot.current.ready.is_set() for slot in slots):
            self._announced = True
            announce_group(self.config.mcp, self.port, len(slots))

    def _exited(self, worker: Worker) -> None:
        """A worker has exited: replace it, unless it was meant to go."""
        slot = worker.slot
        if self.counts is not None:
            self.counts.forget(slot.index - 1, worker.process.pid)
        what = worker.reason or _describe(worker.process.returncode)
        if worker.retired or self.stopping.is_set() or slot.current is not worker:
            logger.debug("%s %s", worker.label, what)
            return
        now = trio.current_time()
        failures = slot.failures
        failures.append(now)
        while failures[0] < now - CRASH_WINDOW_S:
            failures.popleft()
        if len(failures) >= CRASH_LIMIT:
            self._give_up(
                f"worker {slot.name} failed {len(failures)} times within "
                f"{CRASH_WINDOW_S:g} s (last: it {what}); stopping"
            )
            return
        delay = 0.0 if len(failures) == 1 else FIRST_BACKOFF_S * 2 ** (len(failures) - 2)
        logger.error("%s %s; starting another in %g s", worker.label, what, delay)
        assert self._nursery is not None
        self._nursery.start_soon(self._replace, slot, worker, delay)

    async def _replace(self, slot: Slot, dead: Worker, delay: float) -> None:
        await trio.sleep(delay)
        if not self.stopping.is_set() and slot.current is dead:
            await self._spawn(slot, current=True)

    def _give_up(self, message: str) -> None:
        if self.failure is None:
            self.failure = message
            logger.error("%s", message)
        self.stopping.set()

    # ---- signals ------------------------------------------------------------

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    if self.stopping.is_set() or self._rolling:
                        logger.warning("got SIGHUP: a restart or a stop is under way already")
                        continue
                    assert self._nursery is not None
                    self._nursery.start_soon(self._roll)
                elif not self.stopping.is_set():
                    logger.info(
                        "got signal %d: draining the workers (a second one stops at once)",
                        signum,
                    )
                    self.stopping.set()
                else:
                    logger.warning("got signal %d again: killing the workers", signum)
                    for worker in list(self.workers):
                        worker.kill()

    async def _roll(self) -> None:
        """A rolling restart: one worker at a time, its successor listening
        before it is asked to drain."""
        self._rolling = True
        logger.info("got SIGHUP: restarting the workers one at a time")
        try:
            for slot in self.slots:
                if self.stopping.is_set():
                    return
                new = await self._spawn(slot, current=False)
                async with trio.open_nursery() as race:
                    for event in (new.ready, new.exited, self.stopping):
                        race.start_soon(_wait_then_cancel, event, race.cancel_scope)
                if not new.ready.is_set() or new.exited.is_set():
                    new.kill()
                    if not self.stopping.is_set():
                        logger.error(
                            "rolling restart stopped: the new worker %s %s; the old one "
                            "keeps serving",
                            slot.name,
                            new.reason or _describe(new.process.returncode),
                        )
                    return
                old, slot.current = slot.current, new
                if old is not None:
                    old.retired = True
                    old.terminate()
                    assert self._nursery is not None
                    self._nursery.start_soon(self._kill_late, old)
            logger.info("rolling restart done: %d workers replaced", len(self.slots))
        finally:
            self._rolling = False

    async def _kill_late(self, worker: Worker) -> None:
        http = self.config.mcp.http
        with trio.move_on_after(http.drain_delay_s + http.shutdown_timeout_s + STOP_MARGIN_S):
            await worker.exited.wait()
        if not worker.exited.is_set():
            logger.warning("%s is still draining: killing it", worker.label)
            worker.kill()

    async def _stop_all(self, drain_s: float) -> None:
        """SIGTERM every worker; kill those still running after `drain_s`
        plus `STOP_MARGIN_S`."""
        for worker in list(self.workers):
            worker.terminate()
        # (the workers hold their own copies: queued connections are
        # served until the last of them closes its socket)
        for slot in self.slots:
            for sock in slot.sockets:
                sock.close()
        with trio.move_on_after(drain_s + STOP_MARGIN_S):
            await self._all_exited()
        for worker in list(self.workers):
            logger.warning("%s is still draining: killing it", worker.label)
            worker.kill()
        await self._all_exited()

    async def _all_exited(self) -> None:
        while self.workers:
            await next(iter(self.workers)).exited.wait()


async def _wait_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def supervise(config: RunConfig, *, shared_socket: bool | None = None) -> None:
    """Run ``config.workers`` workers serving ``config.app`` until SIGTERM or
    SIGINT (exit status 0), or until one fails `CRASH_LIMIT` times (a
    SystemExit with status 1 and one line). `shared_socket`: one listening
    socket for all (the default off Linux) instead of one each."""
    mcp = config.mcp
    if not mcp.request_state_keys:
        mcp = dataclasses.replace(mcp, request_state_keys=(mint_request_state_key(),))
    supervisor = Supervisor(dataclasses.replace(config, mcp=mcp), shared_socket=shared_socket)
    supervisor.peer_dir = tempfile.mkdtemp(prefix="trio-mcp-workers-")  # (mode 0700)
    try:
        if config.worker_connection_slack is not None:
            supervisor.counts = SpreadCounts.create(
                os.path.join(supervisor.peer_dir, "connections"), config.workers
            )
        trio.run(supervisor.main)
    finally:
        if supervisor.counts is not None:
            supervisor.counts.close()
        shutil.rmtree(supervisor.peer_dir, ignore_errors=True)
    if supervisor.failure is not None:
        raise SystemExit(f"trio-mcp: {supervisor.failure}")
