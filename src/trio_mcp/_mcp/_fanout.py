"""Fan-out and sweeping: what reaches many streams, and what ends sessions.

`Broadcaster` takes the application's notifications (list changes, resource
updates, log messages not tied to a request) and delivers each to every
interested stream: the GET streams of the 2025 sessions (numbered and kept
for resumption, for the sessions that have had one: `Bus.resumable`) and the
2026-07-28 subscriptions/listen streams. It goes through the sessions a
slice per turn (`_trio/_turns.py`), so a broadcast to thousands delays no
request by more than a slice's work. It also numbers and keeps the events
of the sessions' POST streams (`publish`, `priming_event`, `open_stream`:
the `EventPublisher` the streams are given).
In a ``--workers`` group without a shared store, each notification the
application broadcasts here also goes once to every other worker (`peers`,
before this worker's own fan-out), which delivers it to its own streams
(`on_peer_message`) and passes it on no further.
`Sweeper` expires idle sessions and old events on a timer, and `release`
frees what an ended session held, for every way a session ends. Both reach
shared state only through the stores.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import trio

from .._config import MCPConfig
from .._json import dumps, loads
from .._protocol._logging import LOG_LEVELS
from .._protocol._sessions import Session
from .._speedups import format_event
from .._stores._stores import PeerNotices, Stores
from .._trio._tasks import guarded
from .._trio._turns import take_turn
from ._streams import MESSAGE, Keepalives, PostStream

if TYPE_CHECKING:
    from .._observe import Observer

logger = logging.getLogger("trio_mcp.endpoint")

#: Notifications waiting for the broadcaster; beyond, new ones are dropped (and logged).
BROADCAST_QUEUE: Final = 1024
# Sessions per event-store call, and per scheduler step, when a notification
# goes to every session.
_BROADCAST_SLICE: Final = 256
#: Sessions a sweep releases in one turn.
_RELEASE_SLICE: Final = 64
#: Which subscriptions/listen flag lets each notification onto a listen stream.
LISTEN_METHODS: Final = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
    "notifications/resources/updated": "resourceSubscriptions",
}


#: How a listen stream's notification frame ends: its params, the message, the event.
_LISTEN_FRAME_END: Final = b"}}\n\n"


def listen_frame_start(head: bytes) -> bytes:
    """The frame of a notification whose JSON starts with `head`, up to the
    listener's ``_meta``: JSON has no line breaks, so the frame is one data
    line, and ``format_event(head + meta + b"}}", event=MESSAGE)`` is this,
    the meta and `_LISTEN_FRAME_END`."""
    return format_event(head, event=MESSAGE)[:-2]


#: A notification for the broadcaster: (method, params, the resource URI of
#: a resources/updated, whether it came from this process).
_Notice = tuple[str, dict[str, Any], str | None, bool]
#: What the application broadcasts (`Server._notify`): all a peer may send.
PEER_METHODS: Final = frozenset({*LISTEN_METHODS, "notifications/message"})


def peer_message(method: str, params: dict[str, Any], uri: str | None) -> bytes:
    """A notification as the other workers of the group receive it: JSON text
    (one line, since JSON holds no raw newline)."""
    return dumps([method, params, uri])


def read_peer_message(message: bytes) -> _Notice | None:
    """What `peer_message` wrote, or None when it is not that."""
    try:
        method, params, uri = loads(message)
        if (
            type(method) is not str
            or method not in PEER_METHODS
            or type(params) is not dict
            or not (uri is None or type(uri) is str)
            or (method == "notifications/message" and params.get("level") not in LOG_LEVELS)
        ):
            return None
    except (ValueError, TypeError):  # (not JSON, not three items, an unhashable level)
        return None
    return method, params, uri, False


class Broadcaster:
    """Delivers notifications to the streams that want them (module docstring)."""

    __slots__ = ("config", "sessions", "events", "bus", "_send", "_now", "keepalives", "peers")

    def __init__(self, config: MCPConfig, stores: Stores) -> None:
        self.config = config
        #: Writes the idle GET and listen streams' keepalives (the endpoint runs it).
        self.keepalives = Keepalives(config.keepalive_s)
        self.sessions = stores.sessions
        self.events = stores.events
        self.bus = stores.bus
        #: Where the application's notifications wait, while `run` runs, with
        #: whether they go to the other workers too (they came from here).
        self._send: trio.MemorySendChannel[_Notice] | None = None
        #: trio.current_time; the run's clock itself (two calls fewer) while running.
        self._now = trio.current_time
        #: The other processes, which get each of this one's notifications
        #: once: the workers of a ``--workers`` group on this host, or every
        #: process sharing the Redis (None: no other process).
        self.peers: PeerNotices | None = None

    def on_app_event(self, method: str, params: dict[str, Any], uri: str | None) -> None:
        """Called synchronously by the app; the broadcaster's task does the sending."""
        if self._send is None:
            return
        try:
            self._send.send_nowait((method, params, uri, True))
        except trio.WouldBlock:
            logger.warning("notification backlog full: dropped %s", method)

    def on_peer_message(self, message: bytes) -> None:
        """A notification another worker of the group broadcast (`peer_message`):
        delivered to this worker's streams, and not passed on again."""
        notice = read_peer_message(message)
        if notice is None:
            logger.warning("a malformed broadcast from another worker: ignored")
            return
        if self._send is None:
            return
        try:
            self._send.send_nowait(notice)
        except trio.WouldBlock:
            logger.warning("notification backlog full: dropped %s", notice[0])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver the application's notifications until cancelled."""
        send, receive = trio.open_memory_channel[_Notice](BROADCAST_QUEUE)
        self._send = send
        self._now = trio.lowlevel.current_clock().current_time
        try:
            task_status.started()
            async for method, params, uri, ours in receive:
                with guarded(f"the broadcast of {method}"):
                    # (the other workers first: they fan out while this one does)
                    if ours and self.peers is not None:
                        self.peers.send(peer_message(method, params, uri))
                    self.deliver_to_listeners(method, params, uri)
                    await self._deliver_to_sessions(method, params, uri)
        finally:
            self._send = None
            self._now = trio.current_time
            send.close()

    async def _deliver_to_sessions(
        self, method: str, params: dict[str, Any], uri: str | None
    ) -> None:
        data = dumps({"jsonrpc": "2.0", "method": method, "params": params})
        is_log = method == "notifications/message"
        targets = [
            session.id
            for session in await self.sessions.audience(uri)
            if not (
                is_log
                and session.log_level is not None
                and LOG_LEVELS[params["level"]] < LOG_LEVELS[session.log_level]
            )
        ]
        now = self._now()  # one clock reading per broadcast
        events = self.events
        bus = self.bus
        # One store call per slice of sessions, each slice in a turn of its
        # own (`_trio/_turns.py`): few calls, the first streams get the event
        # before the last ones are numbered, and requests run first. A slice
        # is taken after its turn, so a session that ended meanwhile is
        # no longer `resumable` (the memory store would make it a buffer
        # again). The buffers are written after the last frame is out.
        try:
            for start in range(0, len(targets), _BROADCAST_SLICE):
                await take_turn()
                part = bus.resumable(targets[start : start + _BROADCAST_SLICE])
                if part:
                    event_ids = await events.append_many(part, 0, data, now)
                    await bus.deliver(part, event_ids, data, now)
        finally:
            events.settle()

    def deliver_to_listeners(self, method: str, params: dict[str, Any], uri: str | None) -> None:
        """Offer a notification to every listen stream that subscribed to it."""
        flag = dict.get(LISTEN_METHODS, method)
        if flag is None:
            return  # log messages and progress never go on a listen stream
        # Each listener's copy differs only in its _meta: frame the rest once,
        # and give every listener the same start and end around its own _meta.
        head = b'{"jsonrpc":"2.0","method":' + dumps(method) + b',"params":{'
        inner = dumps({k: v for k, v in params.items() if k != "_meta"})[1:-1]
        if inner:
            head += inner + b","
        start = listen_frame_start(head)
        now = self._now()
        bus = self.bus
        if uri is not None:
            listeners = bus.subscribers(uri)
        else:
            listeners = [ear for ear in bus.listeners() if dict.get(ear.honored, flag)]
        for listener in listeners:
            if not listener.outbox.offer((start, listener.meta, _LISTEN_FRAME_END), now):
                bus.unlisten(listener)  # too slow: the client must listen again

    async def publish(
        self, session: Session, number: int, data: bytes, now: float | None = None
    ) -> bytes:
        """Store `data` as the next event of stream `number`; returns its SSE frame.

        For the GET stream (0) the event also goes to the attached client, if
        any; one that cannot keep up is detached and must resume. `now`, when
        the caller knows it, saves reading the clock.
        """
        if now is None:
            now = self._now()
        event_id = await self.events.append(session.id, number, data, now)
        if number == 0:
            await self.bus.send(session.id, event_id, data, now)
        return format_event(data, event_id=event_id.encode(), event=MESSAGE)

    def publish_nowait(self, session: Session, number: int, data: bytes) -> bytes:
        """`publish` for a POST stream (`number` > 0) whose event store answers
        at once; ``trio.WouldBlock`` otherwise (the caller awaits `publish`)."""
        if not number:
            raise trio.WouldBlock  # (the GET stream's event also goes to the bus)
        event_id = self.events.append_nowait(session.id, number, data, self._now())
        return format_event(data, event_id=event_id.encode(), event=MESSAGE)

    async def priming_event(self, session: Session, number: int) -> bytes:
        """SEP-1699: an event with an id (and the retry hint) and no data, so a
        client can resume stream `number` even before its first real event."""
        event_id = await self.events.append(session.id, number, b"", self._now())
        return format_event(b"", event_id=event_id.encode(), retry_ms=self.config.sse_retry_ms)

    def priming_event_nowait(self, session: Session, number: int) -> bytes:
        """`priming_event`, done at once, or ``trio.WouldBlock``."""
        event_id = self.events.append_nowait(session.id, number, b"", self._now())
        return format_event(b"", event_id=event_id.encode(), retry_ms=self.config.sse_retry_ms)

    def open_stream_nowait(self, session: Session, stream: PostStream) -> int:
        """`open_stream`, done at once, or ``trio.WouldBlock``."""
        number = self.events.open_stream_nowait(session.id, stream.request_ids)
        self.bus.producing(session.id, number, stream)
        return number

    async def open_stream(self, session: Session, stream: PostStream) -> int:
        """Number the session's next POST stream; a GET that resumes it while it
        is produced gets its live events."""
        number = await self.events.open_stream(session.id, stream.request_ids)
        self.bus.producing(session.id, number, stream)
        return number

    def close_stream(self, session: Session, number: int) -> None:
        self.bus.produced(session.id, number)


class Sweeper:
    """Expires idle sessions and old events, and frees what ended sessions held."""

    __slots__ = ("sessions", "events", "bus", "requests", "interval_s", "observer")

    def __init__(self, config: MCPConfig, stores: Stores) -> None:
        self.sessions = stores.sessions
        self.events = stores.events
        self.bus = stores.bus
        self.requests = stores.requests
        #: How often idle sessions and old events are swept; the session
        #: store's grace of two intervals covers how far its clock reading lags.
        self.interval_s = sweep_interval_s(config)
        #: Told when a session ends (None: metrics are off).
        self.observer: Observer | None = None

    async def run(self) -> None:
        """Sweep until cancelled."""
        self.sessions.tick(trio.current_time())
        while True:
            await trio.sleep(self.interval_s)
            with guarded("a sweep"):
                await self._sweep(trio.current_time())

    async def _sweep(self, now: float) -> None:
        sessions = self.sessions
        sessions.tick(now)
        # sessions with a request running or a stream open here are in use
        await sessions.touch(self.requests.busy() | set(self.bus.attached()))
        ended = await sessions.expire()
        # (a flood's sessions expire together: a slice of them per turn)
        for start in range(0, len(ended), _RELEASE_SLICE):
            await take_turn()
            for session_id in ended[start : start + _RELEASE_SLICE]:
                await self.release(session_id)
        self.events.prune(now)

    async def release(self, session_id: str) -> None:
        """Free everything a session that ended holds: its running requests,
        its streams, its event buffers. Every way a session ends comes here."""
        if self.observer is not None:
            self.observer.session_ended(session_id)
        self.requests.release(session_id)
        self.bus.release(session_id)
        await self.events.drop_session(session_id)


def sweep_interval_s(config: MCPConfig) -> float:
    """How often an endpoint with `config` sweeps (at most every 10 s)."""
    return min(
        config.session_idle_timeout_s / 4,
        config.event_buffer_age_s / 4,
        10.0,
    )
