"""`RedisSessionStore`: the session records in Redis, shared by every process.

A record is a hash (``<prefix>:{<id>}:s``: principal key, revision, the
client's capabilities and info, log level, transport, owner) and a set of
its resource subscriptions (``<prefix>:{<id>}:u``); both carry the idle
timeout (plus the sweeper's grace) as their TTL, so Redis itself ends an
idle session. ``<prefix>:sessions`` (a sorted set scored by expiry time)
counts the live sessions and ``<prefix>:owner:<owner>`` one client's share,
both checked and updated by the create script in one step, so the bounds
hold across processes.

Each process keeps a copy of the records it created or read, and answers
from it without a round trip for ``redis_session_cache_s``; a change made
anywhere (`set_log_level`, `subscribe`, `unsubscribe`, `update`, `delete`)
publishes the session's id and every other process drops its copy at once.
When that message is lost (pub/sub down, Redis restarting) a copy is stale
for at most the cache time: a request may then see an old log level or old
subscriptions, or be served for a session just deleted elsewhere; nothing
else. Uses are written back in one batch at each sweep (`touch`), never one
round trip per request; `expire` asks Redis, once a sweep, which of the
sessions this process knows have ended, and reports each once here (with
those a read found gone meanwhile), so that the process releases what it
held for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import trio

from .._config import MCPConfig
from .._errors import SessionsFull
from .._json import dumps, loads
from .._protocol._sessions import Session, new_session_id
from ._redis import RedisLink, answering_503

#: now in milliseconds, by Redis's clock (one clock for every process)
_NOW = """local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: Lua: end session `id` of `owner` now (its record, its subscriptions and
#: its places in the indexes); the process that holds it finds it gone at
#: its next sweep (ENDED) and releases what it held.
_FINISH = """local function finish(prefix, id, owner)
  local record, subscriptions = prefix .. ':{' .. id .. '}:s', prefix .. ':{' .. id .. '}:u'
  for _, uri in ipairs(redis.call('SMEMBERS', subscriptions)) do
    redis.call('SREM', prefix .. ':uri:' .. uri, id)
  end
  redis.call('DEL', record, subscriptions)
  redis.call('ZREM', prefix .. ':sessions', id)
  redis.call('ZREM', prefix .. ':owner:' .. owner, id)
end
"""

#: KEYS: index, owner's share, record; ARGV: max, max per owner, ttl ms,
#: grace ms, prefix, channel, process, id, fields... {0, the id of the session
#: that made room or ''}, or a refusal {1 (table full) or 2 (owner's share
#: full), ms until room may come}. Room in a full table as `SessionTable`
#: makes it: the longest idle (of the 16 idle longest) of an owner holding two
#: sessions more, once idle past the grace; the scores are expiry times, the
#: last use written back plus the ttl.
CREATE = (
    _NOW
    + _FINISH
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ttl = tonumber(ARGV[3])
local ended = ''
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local prefix = ARGV[5]
  local heavier = redis.call('ZCARD', KEYS[2]) + 2
  local settled = now + ttl - tonumber(ARGV[4])
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 15, 'WITHSCORES')
  local wait = tonumber(oldest[2]) - now
  for i = 1, #oldest, 2 do
    local id, score = oldest[i], tonumber(oldest[i + 1])
    local owner = redis.call('HGET', prefix .. ':{' .. id .. '}:s', 'o')
    if owner and redis.call('ZCARD', prefix .. ':owner:' .. owner) >= heavier then
      if score >= settled then
        wait = math.min(wait, score - settled + 1)
        break
      end
      finish(prefix, id, owner)
      redis.call('PUBLISH', ARGV[6], ARGV[7] .. ' ' .. id)
      ended = id
      break
    end
  end
  if ended == '' then return {1, wait} end
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  return {2, tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]) - now}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[8])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[8])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('HSET', KEYS[3], unpack(ARGV, 9))
redis.call('PEXPIRE', KEYS[3], ttl)
return {0, ended}
"""
)

#: KEYS: index; ARGV: ttl ms, prefix, ids... Refreshes each live session's TTL.
TOUCH = (
    _NOW
    + """
local ttl = tonumber(ARGV[1])
for i = 3, #ARGV do
  local id = ARGV[i]
  local record = ARGV[2] .. ':{' .. id .. '}:s'
  if redis.call('PEXPIRE', record, ttl) == 1 then
    redis.call('PEXPIRE', ARGV[2] .. ':{' .. id .. '}:u', ttl)
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, id)
    local share = ARGV[2] .. ':owner:' .. redis.call('HGET', record, 'o')
    redis.call('ZADD', share, 'XX', now + ttl, id)
    redis.call('PEXPIRE', share, ttl)
  end
end
return 0
"""
)

#: KEYS: index; ARGV: prefix, ids... Which of the ids have ended.
ENDED = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ended = {}
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ':{' .. ARGV[i] .. '}:s') == 0 then
    ended[#ended + 1] = ARGV[i]
  end
end
return ended
"""
)

#: KEYS: record, subscriptions; ARGV: prefix, id, channel, message
DELETE = (
    _FINISH
    + """
local owner = redis.call('HGET', KEYS[1], 'o')
if not owner then return 0 end
finish(ARGV[1], ARGV[2], owner)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)

#: KEYS: record; ARGV: channel, message, fields...
CHANGE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""

#: KEYS: record, subscriptions, the URI's subscribers; ARGV: channel, message, id, uri, 1 or 0
SUBSCRIBE = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
if ARGV[5] == '1' then
  redis.call('SADD', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('SADD', KEYS[3], ARGV[3])
else
  redis.call('SREM', KEYS[2], ARGV[4])
  redis.call('SREM', KEYS[3], ARGV[3])
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""

#: ARGV: prefix, ids... The ids of the sessions whose maker (its record's
#: ``m``) is gone: its connection's subscription to its own channel is gone
#: (Redis sees a killed process's connection close at once), or its
#: ``alive`` key lapsed (a host gone, its connection left half open).
ORPHANS = """
local found = {}
for i = 2, #ARGV do
  local maker = redis.call('HGET', ARGV[1] .. ':{' .. ARGV[i] .. '}:s', 'm')
  if maker and (
      redis.call('EXISTS', ARGV[1] .. ':alive:' .. maker) == 0
      or redis.call('PUBSUB', 'NUMSUB', ARGV[1] .. ':process:' .. maker)[2] == 0) then
    found[#found + 1] = ARGV[i]
  end
end
return found
"""

#: ARGV: prefix, ids... Each record and its subscriptions, or false.
RECORDS = """
local found = {}
for i = 2, #ARGV do
  local base = ARGV[1] .. ':{' .. ARGV[i] .. '}:'
  local record = redis.call('HGETALL', base .. 's')
  if #record == 0 then
    found[#found + 1] = false
  else
    found[#found + 1] = {record, redis.call('SMEMBERS', base .. 'u')}
  end
end
return found
"""


class KeyedPrincipal:
    """A principal read from Redis, known by its key (`principal_key`): it
    equals every principal with the same key, so the endpoint's check that a
    session stays with its principal holds on every process."""

    __slots__ = ("key", "_key_of")

    def __init__(self, key: str, key_of: Callable[[object], str]) -> None:
        self.key = key
        self._key_of = key_of

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyedPrincipal):
            return other.key == self.key
        try:
            return self._key_of(other) == self.key
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"KeyedPrincipal({self.key!r})"


class RedisSessionStore:
    """Session records in Redis (see the module docstring)."""

    def __init__(
        self,
        link: RedisLink,
        config: MCPConfig,
        grace_s: float,
        principal_key: Callable[[object], str],
        new_id: Callable[[], str] = new_session_id,
    ) -> None:
        self.link = link
        #: mints session ids (with the owner hint, when this process has a name)
        self.new_id = new_id
        self.max_sessions = config.max_sessions
        self.max_per_owner = config.sessions_per_client
        #: a record's TTL: the idle timeout, plus how late a use may be written
        self.ttl_ms = max(1, math.ceil((config.session_idle_timeout_s + grace_s) * 1000))
        #: how long a session is idle, at least, before it makes room for
        #: another in a full store: the sweeps touch the busy ones more often
        self.grace_ms = math.ceil(grace_s * 1000)
        self.cache_s = config.redis_session_cache_s
        self.principal_key = principal_key
        #: the records this process created or read, and until when each is fresh
        self._copies: dict[str, Session] = {}
        self._fresh_until: dict[str, float] = {}
        #: the sessions being read from Redis now, and what their readers set
        self._reading: dict[str, trio.Event] = {}
        #: the sessions this process created (a broadcast's audience)
        self._created: set[str] = set()
        #: The sessions whose GET stream this process holds (the bus's
        #: `attached`, set by `redis_stores`): those whose maker is gone are
        #: in this process's audience too.
        self.held: Callable[[], list[str]] = list
        #: sessions used since the last `touch` (written back then)
        self._touched: set[str] = set()
        #: sessions this process knew that a read found gone, for `expire`
        self._lapsed: list[str] = []
        self._index = link.key("sessions")
        self._channel = link.key("changed").encode()
        link.handlers[self._channel] = self._changed
        link.resubscribed.append(self._forget_all)

    # ---- what other processes changed ------------------------------------------

    def _changed(self, message: bytes) -> None:
        """Another process changed or ended a session: read it again when next used."""
        process, _, session_id = message.decode("latin-1").partition(" ")
        if process != self.link.process:
            self._fresh_until.pop(session_id, None)

    def _forget_all(self) -> None:
        """The subscription was (re)made: messages may have been missed."""
        self._fresh_until.clear()

    def _message(self, session_id: str) -> str:
        return f"{self.link.process} {session_id}"

    # ---- the SessionStore protocol --------------------------------------------

    def tick(self, now: float) -> None:
        pass

    async def create(
        self,
        principal: object,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
        http_sse: bool = False,
        owner: str = "",
    ) -> Session:
        link = self.link
        session_id = self.new_id()
        fields = [
            "p",
            self.principal_key(principal),
            "v",
            protocol_version,
            "cc",
            dumps(client_capabilities),
            "ci",
            dumps(client_info),
            "l",
            "",
            "h",
            "1" if http_sse else "0",
            "o",
            owner,
            "m",
            link.process,
        ]
        bounds = [self.max_sessions, self.max_per_owner, self.ttl_ms, self.grace_ms]
        args = [*bounds, _prefix(link), self._channel, link.process, session_id, *fields]
        with answering_503(link):
            refused, detail = await link.script("create", CREATE)(
                keys=[self._index, link.key("owner", owner), link.session_key(session_id, "s")],
                args=args,
            )
        if refused:
            raise SessionsFull(max(1, math.ceil(int(detail) / 1000)), per_client=refused == 2)
        if detail:  # a session that made room: read again (gone) when next used here
            self._fresh_until.pop(detail.decode(), None)
        now = trio.current_time()
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
        self._keep(session, now)
        self._created.add(session_id)
        return session

    def create_nowait(self, *args: Any, **kwargs: Any) -> Session:
        raise trio.WouldBlock

    def get_nowait(self, session_id: str) -> Session | None:
        fresh_until = dict.get(self._fresh_until, session_id)
        if fresh_until is None or fresh_until < trio.current_time():
            raise trio.WouldBlock
        self._touched.add(session_id)
        return self._copies[session_id]

    async def get(self, session_id: str) -> Session | None:
        try:
            return self.get_nowait(session_id)
        except trio.WouldBlock:
            pass
        # One read per session at a time: the requests that find the copy
        # stale together wait for the first one's read.
        reading = self._reading.get(session_id)
        if reading is not None:
            await reading.wait()
            return await self.get(session_id)  # (fresh now, unless that read failed)
        reading = self._reading[session_id] = trio.Event()
        try:
            found = await self._read([session_id])
        finally:
            del self._reading[session_id]
            reading.set()
        return found[0]

    async def _read(self, session_ids: list[str]) -> list[Session | None]:
        """The records of these sessions, read from Redis (and kept here)."""
        link = self.link
        with answering_503(link):
            answers = await link.script("records", RECORDS)(
                keys=[], args=[_prefix(link), *session_ids]
            )
        now = trio.current_time()
        found: list[Session | None] = []
        for session_id, answer in zip(session_ids, answers, strict=True):
            if not answer:
                if session_id in self._copies:  # (what it held here is released)
                    self._lapsed.append(session_id)
                self._drop(session_id)
                found.append(None)
                continue
            session = self._decode(session_id, answer[0], answer[1], now)
            self._keep(session, now)
            self._touched.add(session_id)
            found.append(session)
        return found

    def _decode(
        self, session_id: str, flat: list[bytes], subscriptions: list[bytes], now: float
    ) -> Session:
        record = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
        known = self._copies.get(session_id)
        key = record["p"].decode()
        if known is not None and _key_or_none(self.principal_key, known.principal) == key:
            principal = known.principal  # (the object `authenticate` returned, here)
        elif key == "-":
            principal = None
        elif key.startswith("s:"):
            principal = key[2:]
        else:
            principal = KeyedPrincipal(key, self.principal_key)
        session = Session(
            session_id,
            principal,
            record["v"].decode(),
            loads(record["cc"]),
            loads(record["ci"]),
            now,
            record["h"] == b"1",
            record["o"].decode(),
        )
        session.log_level = record["l"].decode() or None
        session.subscriptions = {uri.decode() for uri in subscriptions}
        return session

    def _keep(self, session: Session, now: float) -> None:
        self._copies[session.id] = session
        self._fresh_until[session.id] = now + self.cache_s

    def _drop(self, session_id: str) -> None:
        self._copies.pop(session_id, None)
        self._fresh_until.pop(session_id, None)
        self._touched.discard(session_id)
        self._created.discard(session_id)

    async def update(
        self,
        session_id: str,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any],
    ) -> None:
        await self._change(
            session_id,
            ["v", protocol_version, "cc", dumps(client_capabilities), "ci", dumps(client_info)],
        )
        session = self._copies.get(session_id)
        if session is not None:
            session.protocol_version = protocol_version
            session.client_capabilities = client_capabilities
            session.client_info = client_info

    async def set_log_level(self, session_id: str, level: str) -> None:
        await self._change(session_id, ["l", level])
        session = self._copies.get(session_id)
        if session is not None:
            session.log_level = level

    async def _change(self, session_id: str, fields: list[Any]) -> None:
        link = self.link
        await link.script("change", CHANGE)(
            keys=[link.session_key(session_id, "s")],
            args=[self._channel, self._message(session_id), *fields],
        )

    async def subscribe(self, session_id: str, uri: str) -> None:
        await self._subscription(session_id, uri, True)
        session = self._copies.get(session_id)
        if session is not None:
            session.subscriptions.add(uri)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        await self._subscription(session_id, uri, False)
        session = self._copies.get(session_id)
        if session is not None:
            session.subscriptions.discard(uri)

    async def _subscription(self, session_id: str, uri: str, on: bool) -> None:
        link = self.link
        await link.script("subscribe", SUBSCRIBE)(
            keys=[
                link.session_key(session_id, "s"),
                link.session_key(session_id, "u"),
                link.key("uri", uri),
            ],
            args=[self._channel, self._message(session_id), session_id, uri, "1" if on else "0"],
        )

    async def delete(self, session_id: str) -> bool:
        link = self.link
        self._drop(session_id)
        with answering_503(link):
            ended = await link.script("delete", DELETE)(
                keys=[link.session_key(session_id, "s"), link.session_key(session_id, "u")],
                args=[_prefix(link), session_id, self._channel, self._message(session_id)],
            )
        return bool(ended)

    async def touch(self, session_ids: Iterable[str]) -> None:
        touched = self._touched
        touched.update(session_ids)
        if not touched:
            return
        self._touched = set()
        link = self.link
        try:
            await link.script("touch", TOUCH)(
                keys=[self._index], args=[self.ttl_ms, _prefix(link), *touched]
            )
        except BaseException:
            self._touched |= touched  # (written back at the next sweep instead)
            raise

    async def expire(self) -> list[str]:
        link = self.link
        known = list(self._copies)
        ended = await link.script("ended", ENDED)(keys=[self._index], args=[_prefix(link), *known])
        gone = [session_id.decode() for session_id in ended]
        for session_id in gone:
            self._drop(session_id)
        lapsed, self._lapsed = self._lapsed, []
        return gone + lapsed

    async def audience(self, uri: str | None) -> list[Session]:
        """The live sessions (subscribed to `uri`, when given) that hear this
        process's broadcasts: those it created, and those whose GET stream it
        holds and whose maker is gone (``_redis_broadcast.py``). Each session
        hears each notification from one process."""
        link = self.link
        audience = [s for s in self._copies if s in self._created]
        created = self._created
        adoptable = [s for s in self.held() if s not in created]
        if adoptable:
            with answering_503(link):
                orphans = await link.script("orphans", ORPHANS)(
                    keys=[], args=[_prefix(link), *adoptable]
                )
            audience += [orphan.decode() for orphan in orphans]
        found = [s for s in await self._read(audience) if s is not None] if audience else []
        return found if uri is None else [s for s in found if uri in s.subscriptions]

    def count(self) -> int:
        return len(self._copies)


def _prefix(link: RedisLink) -> str:
    return link.key()


def _key_or_none(principal_key: Callable[[object], str], principal: object) -> str | None:
    if isinstance(principal, KeyedPrincipal):
        return principal.key
    try:
        return principal_key(principal)
    except TypeError:
        return None
