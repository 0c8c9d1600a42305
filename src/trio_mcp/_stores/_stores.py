"""`Stores`: the four seams together, as an endpoint takes them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from .._config import MCPConfig
from .._protocol._events import EventLimits
from .._protocol._sessions import new_session_id
from ._bus import Bus, MemoryBus
from ._events import EventStore, MemoryEventStore
from ._requests import MemoryRequestRegistry, RequestRegistry
from ._sessions import MemorySessionStore, SessionStore


class PeerNotices(Protocol):
    """What passes this process's broadcasts to other processes, and theirs
    here (a ``--workers`` group's ``_trio._peer_broadcast.PeerBroadcast``,
    or ``_redis_broadcast.RedisBroadcast``)."""

    #: Notifications that did not reach the others (a queue full, a peer gone).
    dropped: int
    #: Where the others' notifications go.
    on_message: Callable[[bytes], None]

    def send(self, message: bytes) -> int:
        """Pass `message` (``_mcp._fanout.peer_message``) on; how many took it."""
        ...


@dataclass(frozen=True, slots=True)
class Stores:
    """Where an endpoint keeps its shared state (see ``_stores/__init__.py``)."""

    sessions: SessionStore
    events: EventStore
    bus: Bus
    requests: RequestRegistry
    #: What connects shared stores while the endpoint runs (their client,
    #: their subscription); None for stores that need nothing.
    opened: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    #: Whether other processes see these stores too (Redis): then any process
    #: serves any session, and none passes a request to its session's owner.
    shared: bool = False
    #: What takes this process's broadcasts to the other processes sharing
    #: the stores, and brings theirs (`PeerNotices`); None: no other process.
    broadcast: PeerNotices | None = None


def memory_stores(
    config: MCPConfig, grace_s: float, new_id: Callable[[], str] = new_session_id
) -> Stores:
    """The in-memory stores with `config`'s bounds; `grace_s` is how far the
    sweeper's clock readings may lag the clock; `new_id` mints session ids."""
    return Stores(
        MemorySessionStore(
            config.max_sessions,
            config.session_idle_timeout_s,
            grace_s,
            config.sessions_per_client,
            new_id,
        ),
        MemoryEventStore(event_limits(config)),
        MemoryBus(),
        MemoryRequestRegistry(
            config.max_requests_per_session, config.max_client_requests_per_session
        ),
    )


def event_limits(config: MCPConfig) -> EventLimits:
    """The bounds of the event buffers `config` sets."""
    return EventLimits(
        config.event_buffer_events,
        config.event_buffer_bytes,
        config.event_buffer_age_s,
        config.event_buffer_session_bytes,
    )
