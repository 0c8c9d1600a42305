"""MCP sessions of the 2025 revisions: the records, minted on initialize,
bounded, expiring when idle.

Sans-IO: "now" is an argument and ids come from a given source of
randomness, so expiry and the size bound are tested without clocks. A
session is never a credential: it records the principal that created it, and
the endpoint refuses it to anyone else. A `Session` is the record a store
keeps (``_stores/_sessions.py``); what only the process serving it knows
(running requests, open streams) lives in the endpoint's registry and bus.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from typing import Any, Final

from .._errors import SessionsFull
from .._http._addresses import address_group

#: 128 random bits per session id.
_ID_BYTES: Final = 16
#: Ids cut from one read of the system's random source.
_IDS_PER_READ: Final = 256


class SessionIds:
    """Session ids: 128 bits from ``os.urandom`` as 32 hex digits (visible
    ASCII, unguessable).

    The random bytes are read 256 ids at a time: one ``getrandom`` call and
    no Python frames per id, where ``secrets.token_hex`` costs four frames
    and a system call per session. A forked child drops the bytes it
    inherited (its parent may still hand them out) and reads its own.
    """

    __slots__ = ("_pool", "_next")

    def __init__(self) -> None:
        self._pool = b""
        self._next = 0

    def __call__(self) -> str:
        start = self._next
        if start >= len(self._pool):
            self._pool = os.urandom(_ID_BYTES * _IDS_PER_READ)
            start = 0
        self._next = start + _ID_BYTES
        return self._pool[start : start + _ID_BYTES].hex()

    def forget(self) -> None:
        """Drop the unused bytes: the next id comes from a fresh read."""
        self._pool = b""
        self._next = 0


#: The process's source of session ids.
new_session_id: Final = SessionIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=new_session_id.forget)


def session_owner(principal: object, client: str, principal_key: Callable[[object], str]) -> str:
    """Whose share of the session table a new session counts in: its
    principal's (by the application's stable key), or, without a principal
    (or one the key cannot name), its client address's group."""
    if principal is not None:
        try:
            return "principal " + principal_key(principal)
        except TypeError:
            pass
    return "address " + address_group(client)


class Session:
    """One session's record: who it belongs to, what was negotiated, and what
    the client asked for since (its log level, its resource subscriptions).

    A store hands these out as snapshots: change one through the store's
    methods, never by assigning to it.
    """

    __slots__ = (
        "id",
        "principal",
        "protocol_version",
        "client_capabilities",
        "client_info",
        "log_level",
        "subscriptions",
        "last_active",
        "http_sse",
        "owner",
    )

    def __init__(
        self,
        id: str,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        now: float,
        http_sse: bool = False,
        owner: str = "",
    ) -> None:
        self.id = id
        self.principal = principal
        self.protocol_version = protocol_version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        #: The level set by ``logging/setLevel``; None sends everything.
        self.log_level: str | None = None
        #: Resource URIs the client subscribed to.
        self.subscriptions: set[str] = set()
        self.last_active = now
        #: A session of the 2024-11-05 HTTP+SSE transport: valid on its POST
        #: URL only, as a streamable HTTP session is on the endpoint only.
        self.http_sse = http_sse
        #: Whose share of the table the session counts in (`session_owner`).
        self.owner = owner

    def copy(self) -> Session:
        """A copy that shares no mutable part with this record."""
        twin = Session(
            self.id,
            self.principal,
            self.protocol_version,
            dict(self.client_capabilities),
            dict(self.client_info),
            self.last_active,
            self.http_sse,
            self.owner,
        )
        twin.log_level = self.log_level
        twin.subscriptions = set(self.subscriptions)
        return twin

    def __repr__(self) -> str:
        return f"<Session {self.id[:8]}… {self.protocol_version}>"


class SessionTable:
    """The session records of one process, bounded in number, expiring when idle.

    A session expires when it has not been used for `idle_timeout_s` (plus
    `grace_s`); its owner keeps a session that is busy (a request running, a
    stream open) from expiring by touching it (`touch`) at least once per
    `grace_s` (the memory store's grace is two sweeps, and each sweep touches
    the busy ones). A full table makes room for a light owner's new session
    (`_make_room`).
    """

    __slots__ = (
        "_sessions",
        "max_sessions",
        "max_per_owner",
        "_owned",
        "idle_timeout_s",
        "grace_s",
        "_new_id",
        "_ended",
        "_next_expiry",
        "now",
    )

    def __init__(
        self,
        max_sessions: int,
        idle_timeout_s: float,
        new_id: Callable[[], str] = new_session_id,
        grace_s: float = 0.0,
        max_per_owner: int | None = None,
    ) -> None:
        self._sessions: dict[str, Session] = {}
        self.max_sessions = max_sessions
        #: One owner's share of the table (None: the whole table).
        self.max_per_owner = max_sessions if max_per_owner is None else max_per_owner
        #: How many sessions each owner holds (owners holding none are absent).
        self._owned: dict[str, int] = {}
        self.idle_timeout_s = idle_timeout_s
        #: Idle time allowed beyond `idle_timeout_s`, for an owner whose "now"
        #: lags the clock by up to this much: no session then ends early.
        self.grace_s = grace_s
        self._new_id = new_id
        # Sessions that expired and were not reported by `expire` yet.
        self._ended: list[Session] = []
        # No session expires before this (a bound, not the time: sessions used
        # since may expire later), so that creates at a full table, the ones
        # a flood makes, need no look at every session to find none expired.
        self._next_expiry = math.inf
        #: The owner's latest reading of its clock, for callers that pass "now"
        #: without reading the clock themselves (`grace_s` covers how far it lags).
        self.now = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    def create(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        now: float,
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        """A new session for `owner`; SessionsFull when the table, or the
        owner's share of it, is full and nothing in it has expired."""
        owned = self._owned
        if len(self._sessions) >= self.max_sessions or (
            dict.get(owned, owner, 0) >= self.max_per_owner
        ):
            self._expire(now)
            if len(self._sessions) >= self.max_sessions:
                self._make_room(owner, now)
            if dict.get(owned, owner, 0) >= self.max_per_owner:
                raise SessionsFull(self._first_expiry_s(now, owner), per_client=True)
        session_id = self._new_id()
        while session_id in self._sessions:  # pragma: no cover - 2**-128
            session_id = self._new_id()
        session = Session(
            session_id,
            principal,
            protocol_version,
            client_capabilities,
            client_info,
            now,
            http_sse,
            owner,
        )
        self._sessions[session_id] = session
        owned[owner] = dict.get(owned, owner, 0) + 1
        expiry = now + self.idle_timeout_s + self.grace_s
        if expiry < self._next_expiry:
            self._next_expiry = expiry
        return session

    def _make_room(self, owner: str, now: float) -> None:
        """Room in the full table for a session of `owner`, or SessionsFull.

        The longest-idle session of an owner holding at least two sessions
        more than `owner` ends, if it has been idle for longer than the grace:
        the table's owner touches the sessions in use at least that often, so
        such a session has nothing running. (One more would leave `owner` as
        heavy as the other was: no fairer.) Without this, clients from many
        addresses, each within its share, could fill the table with sessions
        they never use and keep every other client out until those expire.
        The ended session is reported by `expire` like an expired one.
        """
        owned = self._owned
        heavier = dict.get(owned, owner, 0) + 2
        settled = now - self.grace_s
        victim: Session | None = None
        oldest = math.inf
        for session in self._sessions.values():
            last = session.last_active
            if last < oldest:
                oldest = last
            if owned[session.owner] >= heavier and (victim is None or last < victim.last_active):
                victim = session
        if victim is None or victim.last_active >= settled:
            # when the first could expire, or the victim pass the grace
            wait = oldest + self.idle_timeout_s + self.grace_s - now
            if victim is not None:
                wait = min(wait, victim.last_active - settled)
            raise SessionsFull(max(1, math.ceil(wait)))
        del self._sessions[victim.id]
        self._removed(victim)
        self._ended.append(victim)

    def _first_expiry_s(self, now: float, owner: str) -> int:
        """Whole seconds until the first session of `owner` could expire, if it
        stays idle: when a client refused for its share may try again."""
        oldest = min(s.last_active for s in self._sessions.values() if s.owner == owner)
        wait = oldest + self.idle_timeout_s + self.grace_s - now
        return max(1, math.ceil(wait))

    def _removed(self, session: Session) -> None:
        owned = self._owned
        left = owned[session.owner] - 1
        if left:
            owned[session.owner] = left
        else:
            del owned[session.owner]

    def owners(self) -> int:
        """How many owners hold sessions (for statistics)."""
        return len(self._owned)

    def get(self, session_id: str, now: float) -> Session | None:
        """The live session with this id, or None (unknown, ended or expired)."""
        session = dict.get(self._sessions, session_id)
        if session is None:
            return None
        if now - session.last_active > self.idle_timeout_s + self.grace_s:
            del self._sessions[session_id]
            self._removed(session)
            self._ended.append(session)
            return None
        session.last_active = now
        return session

    def live(self) -> list[Session]:
        """The sessions in the table (a snapshot, safe to iterate while it changes)."""
        return list(self._sessions.values())

    def subscribed(self, uri: str) -> list[Session]:
        """The sessions subscribed to resource `uri`."""
        return [s for s in self._sessions.values() if uri in s.subscriptions]

    def delete(self, session_id: str) -> Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._removed(session)
        return session

    def touch(self, session_ids: Iterable[str], now: float) -> None:
        """Mark these sessions used at `now` (the ones that are busy)."""
        sessions = self._sessions
        for session_id in session_ids:
            session = dict.get(sessions, session_id)
            if session is not None:
                session.last_active = now

    def expire(self, now: float) -> list[Session]:
        """Drop every expired session; returns them, with the ones `get` found
        expired since the last call (each session once)."""
        self._expire(now)
        ended, self._ended = self._ended, []
        return ended

    def _expire(self, now: float) -> None:
        if now <= self._next_expiry:
            return  # (none idle long enough yet)
        limit = self.idle_timeout_s + self.grace_s
        gone = []
        oldest = math.inf
        for session in self._sessions.values():
            last = session.last_active
            if now - last > limit:
                gone.append(session)
            elif last < oldest:
                oldest = last
        self._next_expiry = oldest + limit
        for session in gone:
            del self._sessions[session.id]
            self._removed(session)
        self._ended.extend(gone)
