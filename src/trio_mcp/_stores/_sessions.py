"""The `SessionStore` seam: the records of the 2025 sessions.

A record (`Session`) is the whole of what the protocol remembers about a
session: its principal, negotiated revision, the client's capabilities and
info, its log level and resource subscriptions, and when it was last used.
What only the process serving a session knows (its running requests, its open
streams) is not in it: that is the request registry's and the bus's.

Contract (what a store must give, so that a shared one can take the memory
one's place without a change to the endpoint):

- A record handed out is a snapshot: the endpoint never changes one; every
  change is a call (`update`, `set_log_level`, `subscribe`, `unsubscribe`),
  each atomic on its own, and a later `get` sees it.
- `create` checks the bound and adds the session atomically (SessionsFull
  when there is no room, even after expiring what has expired and making
  room as `SessionTable._make_room` does); a session that made room is
  reported by `expire` like an expired one.
- `get` refreshes the session's last use; `touch` does so for the sessions
  the caller is busy with. A session unused for the idle timeout expires:
  `get` no longer finds it, and `expire` reports it exactly once to one
  caller, who releases what it held (a shared store may expire by TTL and
  report through a subscription or a sorted set).
- `delete` reports whether this call ended the session, so only one caller
  releases it.
- `audience` may be eventually consistent: a broadcast may miss a session
  made a moment ago, never one that is gone.
- Every call that may need a round trip is async. `get_nowait` and
  `create_nowait` are the same calls for a store that can answer at once (a
  memory store, or a shared store's local cache): they raise
  ``trio.WouldBlock`` when it cannot, and the endpoint then awaits `get` or
  `create`. The endpoint tries them first on the paths every request takes,
  so that the memory store costs no await.
- `tick` is not async: the sweeper gives the store its latest clock reading,
  which a store may use as "now" between sweeps (the memory store does, so a
  request reads no clock; its grace of two sweep intervals keeps that from
  ending a session early).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .._protocol._sessions import Session, SessionTable, new_session_id


class SessionStore(Protocol):
    """Where the session records live (see the module docstring)."""

    def tick(self, now: float) -> None:
        """The sweeper's clock reading, given at each sweep."""
        ...

    async def create(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        """A new session's record, with a new unguessable id; SessionsFull when
        the store, or `owner`'s share of it (`session_owner`), is full.
        `http_sse`: a session of the 2024-11-05 HTTP+SSE transport."""
        ...

    async def get(self, session_id: str) -> Session | None:
        """The live session's record (its last use refreshed), or None."""
        ...

    def get_nowait(self, session_id: str) -> Session | None:
        """`get` without waiting; ``trio.WouldBlock`` when that needs a round trip."""
        ...

    def create_nowait(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        """`create` without waiting; ``trio.WouldBlock`` when that needs a round trip."""
        ...

    async def update(
        self,
        session_id: str,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
    ) -> None:
        """What a late initialize negotiated (the 2024-11-05 HTTP+SSE transport)."""
        ...

    async def set_log_level(self, session_id: str, level: str) -> None: ...

    async def subscribe(self, session_id: str, uri: str) -> None: ...

    async def unsubscribe(self, session_id: str, uri: str) -> None: ...

    async def delete(self, session_id: str) -> bool:
        """End the session now; whether this call ended it."""
        ...

    async def touch(self, session_ids: Iterable[str]) -> None:
        """These sessions are in use (requests running, streams open)."""
        ...

    async def expire(self) -> list[str]:
        """The sessions that expired since the last call, each reported once."""
        ...

    async def audience(self, uri: str | None) -> list[Session]:
        """The sessions a notification goes to: those subscribed to resource
        `uri`, or every live session when it is None."""
        ...

    def count(self) -> int:
        """How many sessions this store holds in this process (for statistics)."""
        ...


class MemorySessionStore:
    """Session records in this process's memory (the default): a `SessionTable`.

    Its records are the table's own objects (no copy per call), which the
    endpoint treats as snapshots all the same.
    """

    __slots__ = ("table",)

    def __init__(
        self,
        max_sessions: int,
        idle_timeout_s: float,
        grace_s: float = 0.0,
        max_per_owner: int | None = None,
        new_id: Callable[[], str] = new_session_id,
    ) -> None:
        self.table = SessionTable(
            max_sessions, idle_timeout_s, new_id, grace_s=grace_s, max_per_owner=max_per_owner
        )

    def tick(self, now: float) -> None:
        self.table.now = now

    async def create(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        return self.create_nowait(
            principal, protocol_version, client_capabilities, client_info, http_sse, owner
        )

    def create_nowait(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        table = self.table
        return table.create(
            principal,
            protocol_version,
            client_capabilities,
            client_info,
            table.now,
            http_sse,
            owner,
        )

    async def get(self, session_id: str) -> Session | None:
        table = self.table
        return table.get(session_id, table.now)

    def get_nowait(self, session_id: str) -> Session | None:
        table = self.table
        return table.get(session_id, table.now)

    async def update(
        self,
        session_id: str,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
    ) -> None:
        session = self.table.get(session_id, self.table.now)
        if session is not None:
            session.protocol_version = protocol_version
            session.client_capabilities = client_capabilities
            session.client_info = client_info

    async def set_log_level(self, session_id: str, level: str) -> None:
        session = self.table.get(session_id, self.table.now)
        if session is not None:
            session.log_level = level

    async def subscribe(self, session_id: str, uri: str) -> None:
        session = self.table.get(session_id, self.table.now)
        if session is not None:
            session.subscriptions.add(uri)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        session = self.table.get(session_id, self.table.now)
        if session is not None:
            session.subscriptions.discard(uri)

    async def delete(self, session_id: str) -> bool:
        return self.table.delete(session_id) is not None

    async def touch(self, session_ids: Iterable[str]) -> None:
        self.table.touch(session_ids, self.table.now)

    async def expire(self) -> list[str]:
        return [session.id for session in self.table.expire(self.table.now)]

    async def audience(self, uri: str | None) -> list[Session]:
        table = self.table
        return table.live() if uri is None else table.subscribed(uri)

    def count(self) -> int:
        return len(self.table)
