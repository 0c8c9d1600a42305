"""`RedisEventStore`: a session's events in Redis streams, for resumption on
any process.

Each SSE stream of a session is one Redis stream (``<prefix>:{<id>}:v2:x:<n>``)
whose entry ids are the session's event sequence numbers (``<seq>-0``), so
a replay is one XRANGE after the client's last event. Beside them a hash
(``<prefix>:{<id>}:v2:e``) keeps the session's event tag, its last sequence
number, its POST streams numbered so far, the bytes it buffers (``MAXLEN``
counts entries, not bytes), per stream, the newest sequence written, the
newest dropped and its bytes and events as last written, and per POST
stream its producer, the ids of the requests it answers and its end mark
(``_redis_posts.py`` reads them); for the POST streams the session's byte
bound dropped whole (the oldest first), one watermark, the newest such
stream, so that the hash holds fields for the streams Redis still has only.

`append` is one script, one round trip: it numbers the event, adds it,
drops what the bounds (`EventLimits`: count, bytes, age; the session's bytes
over all its streams) no longer allow, remembering what it dropped,
refreshes the TTL, and, for the GET stream (0) of a session whose stream
another process holds (the bus's lease, ``<prefix>:{<id>}:holder``),
publishes the event to that process, which offers it to its stream. A
replay never hides a loss: events the bounds dropped, events older than the
age bound, a stream whose key lapsed before its session's hash (each key's
TTL is refreshed by its own writes), and a session whose events Redis no
longer has at all (Redis restarted without persistence) are `EventsLost`.

The events of a POST stream are numbered in the process instead, from a
block of sequence numbers its opening reserved (`SEQ_BLOCK`), and a task
tells Redis in batches all that is pending (`write`: one script for the
streams opened, the events numbered and the streams ended since the last
write, with the append's own bookkeeping), so that under load an SSE answer
shares one round trip with many others. An opening waits for its batch:
nothing of a stream reaches its client before its lease and request ids are
in Redis. A resume elsewhere may see the events a moment later (its
follower reads them as they come, ``_redis_posts.py``); events that could
not be written are marked lost, never left out silently.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from typing import Any, Final

import trio

from .._config import MCPConfig
from .._errors import EventsLost
from .._json import dumps
from .._protocol._events import EVENT_OVERHEAD, StoredEvent, parse_event_id
from ._events import RequestIds
from ._redis import EVENTS_LAYOUT, RedisLink, answering_503, logger
from ._stores import event_limits

#: How long the lease of a process producing POST streams lasts without
#: renewal (``_redis_posts.py`` renews it).
LEASE_MS: Final = 3000

#: The events' bookkeeping, shared by `APPEND` and `WRITE`: ARGV[1..6] are
#: max events, max bytes, max age ms, max session bytes, ttl ms, a new tag.
#: `add` applies an event's bounds exactly as if each event were its own
#: script (the memory store's `SessionEvents.store`), but keeps what it reads
#: (a session's tag and bytes, a stream's length, bytes and first entry) in
#: Lua tables for the rest of the call, and `flush` writes them back once, in
#: one HSET a session with what else the call has for its hash (a new
#: stream's field, request ids, end marks), so that an event costs its XADD
#: and little else. A session's POST streams with events are also a sorted
#: set (``xs``), in the order they were made (``made`` counts them), so that
#: the byte bound finds the oldest without reading the hash.
EVENTS_LIB = """
local call, format, match, len = redis.call, string.format, string.match, string.len
local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- (numbers go to redis.call as text made here: given a number, Redis formats
-- it with %.17g, which costs more than the command it goes to)
local function text(number) return format('%d', number) end
local now_text = text(now)
local max_events, max_bytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local oldest_allowed = now - tonumber(ARGV[3])
local max_cost, ttl, new_tag = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local sessions, touched = {}, {}

local function session(base)
  local s = sessions[base]
  if s then return s end
  local meta = base .. 'e'
  local got = call('HMGET', meta, 'tag', 'cost', 'lw', 'made')
  local tag = got[1]
  if not tag then
    tag = new_tag
    call('HSET', meta, 'tag', tag)
  end
  -- (ids: stream -> its request ids; ends: the streams to mark ended)
  s = {base = base, meta = meta, tag = tag, cost = tonumber(got[2] or '0'),
       lw = tonumber(got[3] or '0'), made = tonumber(got[4] or '0'), streams = {},
       ids = {}, ends = {}}
  sessions[base] = s
  touched[#touched + 1] = s
  return s
end

local function stream_of(s, n, seq)
  local st = s.streams[n]
  if st then return st end
  -- (every field it will have, so that the table is made at its size once)
  st = {key = s.base .. 'x:' .. n, n = n, count = 0, bytes = 0, dirty = false, last = false,
        lost = false, first_id = false, first_size = 0, first_time = 0}
  -- (a POST stream with events in Redis is in ``xs``: one that is not is new
  -- there, and goes in, in the order made)
  local held
  if n == '0' then
    held = call('HGET', s.meta, 'b:0')
  elseif call('ZADD', s.base .. 'xs', 'NX', text(s.made + 1), n) == 1 then
    s.made = s.made + 1
    -- (a stream the byte bound dropped whole, written again: what it had is lost)
    if tonumber(n) <= s.lw then st.lost = seq - 1 end
  else
    held = call('HGET', s.meta, 'b:' .. n)
  end
  if held then
    st.bytes = tonumber(match(held, '^%d+'))
    st.count = call('XLEN', st.key)
  end
  s.streams[n] = st
  return st
end

-- `other` is out of ``xs`` already (`shed` pops it)
local function drop_stream(s, other)
  local st = s.streams[other]
  local key = s.base .. 'x:' .. other
  local got = call('HMGET', s.meta, 'b:' .. other, 'a:' .. other)
  local count, held
  if st then
    count, held = st.count, st.bytes
  else
    -- (as counted when last written: the key may have lapsed since)
    local bytes, written = match(got[1] or '0', '^(%d+) ?(%d*)$')
    held = tonumber(bytes)
    count = tonumber(written) or call('XLEN', key)
  end
  if other == '0' then
    local last = call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
    if last then
      call('HSET', s.meta, 'l:0', match(last[1], '^(%d+)'))
    elseif st and st.lost then
      call('HSET', s.meta, 'l:0', text(st.lost))
    end
  else
    -- (one watermark for the POST streams dropped whole, oldest first: a
    -- field for each would grow the hash for the session's whole life)
    local number = tonumber(other)
    if number > s.lw then s.lw = number end
  end
  s.cost = s.cost - (held + count * OVERHEAD)
  call('DEL', key)
  if other == '0' then
    call('HDEL', s.meta, 'x:0', 'b:0')
  elseif got[2] then
    -- (ended: its request ids, producer and mark go with it)
    call('HDEL', s.meta, 'x:' .. other, 'b:' .. other, 'l:' .. other,
         'a:' .. other, 'r:' .. other, 'p:' .. other)
  else
    -- (still produced: it may be written again, and a resume of what comes
    -- then needs its request ids and producer; its end takes them if it has
    -- no events)
    call('HDEL', s.meta, 'x:' .. other, 'b:' .. other, 'l:' .. other)
  end
  s.streams[other] = nil
end

-- drop whole streams, the oldest first, the GET stream last, never `keep`
local function shed(s, keep)
  local made = s.base .. 'xs'
  while s.cost > max_cost do
    local oldest = call('ZPOPMIN', made)
    local other = oldest[1]
    if other == keep then
      other = call('ZPOPMIN', made)[1]
      call('ZADD', made, oldest[2], keep)  -- (back in its place)
    end
    if not other then
      if keep == '0' or not (s.streams['0'] or call('HEXISTS', s.meta, 'x:0') == 1) then
        return
      end
      other = '0'
    end
    drop_stream(s, other)
  end
end

-- (`seq` as text where it can: a number would be formatted for the entry's id;
-- `size` is the data's length, which the caller knows)
local function add(s, n, seq, data, size)
  local st = stream_of(s, n, seq)
  local id = seq .. '-0'
  call('XADD', st.key, id, 'd', data, 't', now_text)
  local count = st.count + 1
  if count == 1 then st.first_id, st.first_size, st.first_time = id, size, now end
  st.count = count
  st.bytes = st.bytes + size
  st.dirty = true
  st.last = seq
  s.cost = s.cost + size + OVERHEAD
  while st.count > 0 do
    local first_id = st.first_id
    if not first_id then
      local entry = call('XRANGE', st.key, '-', '+', 'COUNT', 1)[1]
      if not entry then break end
      first_id = entry[1]
      st.first_id, st.first_size, st.first_time = first_id, len(entry[2][2]), tonumber(entry[2][4])
    end
    if not (st.count > max_events or st.bytes > max_bytes or st.first_time < oldest_allowed) then
      break
    end
    call('XDEL', st.key, first_id)
    st.count = st.count - 1
    st.bytes = st.bytes - st.first_size
    s.cost = s.cost - (st.first_size + OVERHEAD)
    st.lost = tonumber(match(first_id, '^(%d+)'))
    st.first_id = false
  end
  if s.cost > max_cost then shed(s, n) end
end

-- (`producer`: the channel of the process producing the streams opened)
local function flush(producer)
  for _, s in ipairs(touched) do
    local fields = {'cost', text(s.cost), 'made', text(s.made), 'lw', text(s.lw)}
    local function put(field, value)
      fields[#fields + 1] = field
      fields[#fields + 1] = value
      if #fields >= 500 then  -- (unpack's stack is bounded)
        call('HSET', s.meta, unpack(fields))
        fields = {'cost', text(s.cost)}
      end
    end
    for n, st in pairs(s.streams) do
      if st.dirty then
        put('x:' .. n, tostring(st.last))
        put('b:' .. n, format('%d %d', st.bytes, st.count))
        if st.lost then put('l:' .. n, text(st.lost)) end
        call('PEXPIRE', st.key, ttl)
      end
    end
    for n, ids in pairs(s.ids) do
      put('r:' .. n, ids)
      put('p:' .. n, producer)
    end
    for _, n in ipairs(s.ends) do put('a:' .. n, '1') end
    call('HSET', s.meta, unpack(fields))
    call('PEXPIRE', s.meta, ttl)
    call('PEXPIRE', s.base .. 'xs', ttl)
  end
end
""".replace("OVERHEAD", str(EVENT_OVERHEAD))

#: KEYS: meta, stream, holder; ARGV: the six of `EVENTS_LIB`, data, n, this
#: process's channel, session id. Numbers the event and adds it; for the
#: GET stream (0) of a session whose stream another process holds, publishes
#: it to that process. Returns {tag, seq}.
APPEND = (
    EVENTS_LIB
    + """
local n, data = ARGV[8], ARGV[7]
local s = session(string.sub(KEYS[1], 1, -2))
local seq = call('HINCRBY', s.meta, 'seq', 1)
add(s, n, seq, data, string.len(data))
flush()
if n == '0' then
  local holder = call('GET', KEYS[3])
  if holder and holder ~= ARGV[9] then
    call('PUBLISH', holder, ARGV[10] .. ' ' .. seq .. ' ' .. s.tag .. '-0-' .. seq
               .. ' ' .. data)
  end
end
return {s.tag, seq}
"""
)

#: One call for all this process has to tell Redis: ARGV: the six of
#: `EVENTS_LIB`, this process's channel, the key prefix, the lease ms, the
#: sequence numbers a stream reserves; then four lists of numbers, and one
#: string that holds the rest, one after the other (a few arguments rather
#: than four an event: the client's cost is per argument): the lengths of the
#: session ids (each once; the lists below name a session by its place in
#: this one, from 1), the streams to open (per stream: its session and the
#: length of its request ids, JSON or empty), the events numbered here (the
#: session, n, seq, the length of the data) and the POST streams that ended
#: here (the session, n).
#: Opening a stream numbers it, reserves its sequence numbers and, with
#: request ids, writes them and its producer (this process's channel) and
#: sets this process's lease (one key for all its streams, named by the
#: channel). An ended stream with events gets its mark; one without (nothing
#: of it reached Redis, so nobody can resume it) leaves no field behind. The
#: request ids, the producer and the mark are fields of the session's hash,
#: as long-lived as its events and dropped with the stream
#: (``_redis_posts.py`` reads them). Returns {n, tag, first seq} for each
#: stream opened.
WRITE = (
    EVENTS_LIB
    + """
local channel, prefix, lease, block = ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])
local blob, at = ARGV[15], 1
local function take(length)
  local part = string.sub(blob, at, at + length - 1)
  at = at + length
  return part
end
-- (keyed by the place as text, as the lists below give it)
local bases, listed = {}, 0
for id_length in string.gmatch(ARGV[11], '%d+') do
  listed = listed + 1
  bases[text(listed)] = prefix .. ':{' .. take(tonumber(id_length)) .. '}:LAYOUT:'
end
-- (the streams to open: their sessions' bases and their request ids, side by side)
local open_bases, open_ids, opened, answer, live = {}, {}, {}, {}, false
for i, ids_length in string.gmatch(ARGV[12], '(%d+) (%d+)') do
  local base = bases[i]
  open_bases[#open_bases + 1] = base
  open_ids[#open_ids + 1] = take(tonumber(ids_length))
  opened[base] = (opened[base] or 0) + 1
end
for base, count in pairs(opened) do
  local s = session(base)
  s.opened = call('HINCRBY', s.meta, 'opened', text(count)) - count
  s.seq = call('HINCRBY', s.meta, 'seq', text(count * block)) - count * block
end
for k, base in ipairs(open_bases) do
  local ids = open_ids[k]
  local s = sessions[base]
  s.opened = s.opened + 1
  if ids ~= '' then
    s.ids[text(s.opened)] = ids
    live = true
  end
  answer[#answer + 1] = s.opened
  answer[#answer + 1] = s.tag
  answer[#answer + 1] = s.seq + 1
  s.seq = s.seq + block
end
for i, n, seq, length in string.gmatch(ARGV[13], '(%d+) (%d+) (%d+) (%d+)') do
  length = tonumber(length)
  add(session(bases[i]), n, seq, take(length), length)
end
for i, n in string.gmatch(ARGV[14], '(%d+) (%d+)') do
  local s = sessions[bases[i]]
  if s and s.streams[n] then
    s.ends[#s.ends + 1] = n
  else
    local meta = bases[i] .. 'e'
    local got = call('HMGET', meta, 'tag', 'x:' .. n, 'l:' .. n)
    if not got[1] then
      -- (the session's events are gone: no field, which would have no TTL)
    elseif got[2] or got[3] then
      if s then s.ends[#s.ends + 1] = n else call('HSET', meta, 'a:' .. n, '1') end
    else
      if s then s.ids[n] = nil end
      call('HDEL', meta, 'r:' .. n, 'p:' .. n)
    end
  end
end
-- (the producer's liveness, with the streams whose ids name it: in Redis
-- before any of their events reaches a client)
if live then call('SET', channel, '1', 'PX', lease) end
flush(channel)
return answer
"""
).replace("LAYOUT", EVENTS_LAYOUT)

#: KEYS: meta, stream; ARGV: n, after, max age ms. Returns a status and the entries:
#: {'gone'}, {'none'}, {'lost'} or {'ok', tag, entries}.
REPLAY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta = KEYS[1]
local tag = redis.call('HGET', meta, 'tag')
if not tag then return {'gone'} end
local n, after = ARGV[1], tonumber(ARGV[2])
if after > tonumber(redis.call('HGET', meta, 'seq') or '0') then return {'none'} end
local opened = tonumber(redis.call('HGET', meta, 'opened') or '0')
local lost = redis.call('HGET', meta, 'l:' .. n)
if tonumber(n) > opened and redis.call('HEXISTS', meta, 'x:' .. n) == 0 and not lost then
  return {'none'}
end
if lost and tonumber(lost) > after then return {'lost'} end
if n ~= '0' and redis.call('HEXISTS', meta, 'x:' .. n) == 0
   and tonumber(n) <= tonumber(redis.call('HGET', meta, 'lw') or '0') then
  return {'lost'}
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. after .. '-0', '+')
-- (the stream's key lapsed before the hash, or with it: what came after `after` is gone)
local newest = tonumber(redis.call('HGET', meta, 'x:' .. n) or '0')
if newest > after and #entries == 0 then return {'lost'} end
local oldest_allowed = now - tonumber(ARGV[3])
for _, entry in ipairs(entries) do
  if tonumber(entry[2][4]) < oldest_allowed then return {'lost'} end
end
return {'ok', tag, entries}
"""

#: KEYS: meta; ARGV: n, the newest sequence lost. Marks events that never
#: reached Redis as dropped, so that a resume is told (410), never shown less.
LOST = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local lost = tonumber(redis.call('HGET', KEYS[1], 'l:' .. ARGV[1]) or '0')
if tonumber(ARGV[2]) > lost then redis.call('HSET', KEYS[1], 'l:' .. ARGV[1], ARGV[2]) end
return 0
"""

#: Sequence numbers a POST stream reserves when it opens: its events are
#: numbered here and written to Redis by `RedisEventStore.write`, in batches,
#: without a round trip each; an event past them is numbered by Redis.
SEQ_BLOCK: Final = 64

#: KEYS: meta. Ends every stream of the session.
DROP = """
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local n = string.match(field, '^x:(%d+)$')
  if n then redis.call('DEL', (string.gsub(KEYS[1], ':e$', ':x:' .. n))) end
end
redis.call('DEL', KEYS[1], (string.gsub(KEYS[1], ':e$', ':xs')))
return 0
"""


class Opening:
    """The streams waiting for the next `RedisEventStore.write` to open them."""

    __slots__ = ("streams", "done", "answer", "error")

    def __init__(self) -> None:
        #: (session id, request ids) of each
        self.streams: list[tuple[str, bytes]] = []
        self.done = trio.Event()
        #: the script's answer: (n, tag, first seq) of each, flattened
        self.answer: list[Any] = []
        self.error: BaseException | None = None


class RedisEventStore:
    """Event buffers in Redis (see the module docstring)."""

    def __init__(self, link: RedisLink, config: MCPConfig, grace_s: float) -> None:
        self.link = link
        self.limits = limits = event_limits(config)
        self._max_age_ms = max(1, math.ceil(limits.max_age_s * 1000))
        #: the buffers live as long as their session may
        self.ttl_ms = max(1, math.ceil((config.session_idle_timeout_s + grace_s) * 1000))
        #: the bounds every script about events takes first (events, bytes,
        #: age ms, the session's bytes, the TTL ms), in that order
        self._bounds = [
            limits.max_events,
            limits.max_bytes,
            self._max_age_ms,
            limits.max_session_bytes,
            self.ttl_ms,
        ]
        #: POST streams produced here: (session id, n) -> [tag, next seq, last seq]
        self._blocks: dict[tuple[str, int], list[Any]] = {}
        #: events numbered here, not yet in Redis: (session id, n, seq, data)
        self._unwritten: list[tuple[str, int, int, bytes]] = []
        #: streams to open at the next write
        self._opening = Opening()
        #: POST streams ended here whose mark is not written yet: (session id, n)
        self._ended: list[tuple[str, int]] = []
        self._wake = trio.Event()
        self._writing = trio.Lock()
        #: whether `_write_loop` runs (else an opening writes by itself)
        self._writer_running = False
        link.tasks.append(self._write_loop)

    def append_nowait(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        """A POST stream's event numbered from its block, written at the next
        write; ``trio.WouldBlock`` when the block is used up (or the stream has
        none), and `append` takes a round trip."""
        block = self._blocks.get((session_id, stream)) if stream else None
        if block is None:
            raise trio.WouldBlock
        tag, seq, last = block
        if seq > last:
            raise trio.WouldBlock
        block[1] = seq + 1
        self._unwritten.append((session_id, stream, seq, data))
        self._wake.set()
        return f"{tag}-{stream}-{seq}"

    def open_stream_nowait(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        raise trio.WouldBlock  # (an opening waits for the write that holds its lease)

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        if stream and (session_id, stream) in self._blocks:
            try:
                return self.append_nowait(session_id, stream, data, now)
            except trio.WouldBlock:
                del self._blocks[session_id, stream]
                await self.write()  # (what was numbered here goes first)
        keys, args = self._append_call(session_id, stream, data)
        tag, seq = await self.link.script("append", APPEND)(keys=keys, args=args)
        return f"{tag.decode()}-{stream}-{seq}"

    def closed_stream(self, session_id: str, stream: int) -> None:
        """POST stream `stream` has ended: number no more of its events here,
        and mark its end in Redis (after its events) at the next write."""
        self._blocks.pop((session_id, stream), None)
        self._ended.append((session_id, stream))
        self._wake.set()

    async def _write_loop(self) -> None:
        """Write what is pending, as it comes, until cancelled."""
        self._writer_running = True
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                await self.write()
        finally:
            self._writer_running = False

    async def write(self) -> None:
        """Tell Redis, in one round trip, all that is pending: the streams to
        open, the events numbered here, the ends of streams. Events that cannot
        be written (Redis is away) are marked lost there, so that a resume is
        told (410) rather than shown less; the openings fail (503); the ends
        wait for the next write."""
        async with self._writing:  # (a stream's events go in order)
            batch, self._unwritten = self._unwritten, []
            opening, self._opening = self._opening, Opening()
            ended, self._ended = self._ended, []
            try:
                if batch or opening.streams or ended:
                    await self._write(batch, opening, ended)
            finally:
                if not opening.done.is_set():  # (cancelled)
                    opening.error = opening.error or OSError("the Redis writer stopped")
                    opening.done.set()

    async def _write(
        self,
        batch: list[tuple[str, int, int, bytes]],
        opening: Opening,
        ended: list[tuple[str, int]],
    ) -> None:
        link = self.link
        # (each session id once, first in the blob; the lists name it by its place)
        places: dict[str, str] = {}

        def place(session_id: str) -> str:
            found = places.get(session_id)
            if found is None:
                found = places[session_id] = str(len(places) + 1)
            return found

        opens = [f"{place(opened_in)} {len(ids)}" for opened_in, ids in opening.streams]
        events = [f"{place(sid)} {stream} {seq} {len(data)}" for sid, stream, seq, data in batch]
        ends = [f"{place(session_id)} {stream}" for session_id, stream in ended]
        session_ids = [session_id.encode() for session_id in places]
        parts = session_ids + [ids for _, ids in opening.streams]
        parts += [data for _, _, _, data in batch]
        args = [
            *self._bounds,
            secrets.token_hex(4),
            link.process_channel,
            link.key(),
            LEASE_MS,
            SEQ_BLOCK,
            " ".join(str(len(session_id)) for session_id in session_ids),
            " ".join(opens),
            " ".join(events),
            " ".join(ends),
            b"".join(parts),
        ]
        try:
            opening.answer = await link.script("write", WRITE)(keys=[], args=args)
        except Exception as error:
            logger.warning("Redis: %d events not written: %r", len(batch), error)
            opening.error = error
            opening.done.set()
            self._ended[:0] = ended  # (next time)
            lost = {(s, n): seq for s, n, seq, _ in batch}
            with contextlib.suppress(Exception):
                async with link.client.pipeline(transaction=False) as pipeline:
                    for (session_id, stream), seq in lost.items():
                        link.script("lost", LOST)(
                            keys=[link.events_key(session_id, "e")],
                            args=[stream, seq],
                            client=pipeline,
                        )
            return
        opening.done.set()

    async def append_many(
        self, session_ids: list[str], stream: int, data: bytes, now: float
    ) -> list[str]:
        """One pipeline for them all: one round trip (two when Redis must be
        given the script again)."""
        link = self.link
        script = link.script("append", APPEND)
        async with link.client.pipeline(transaction=False) as pipeline:
            for session_id in session_ids:
                keys, args = self._append_call(session_id, stream, data)
                script(keys=keys, args=args, client=pipeline)
        return [f"{tag.decode()}-{stream}-{seq}" for tag, seq in pipeline.results or ()]

    def _append_call(
        self, session_id: str, stream: int, data: bytes
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the append script."""
        link = self.link
        keys = [
            link.events_key(session_id, "e"),
            link.events_key(session_id, f"x:{stream}"),
            link.session_key(session_id, "holder"),
        ]
        args = [
            *self._bounds,
            secrets.token_hex(4),
            data,
            stream,
            link.process_channel,
            session_id,
        ]
        return keys, args

    def settle(self) -> None:
        pass

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return None
        tag, stream, sequence = parsed
        link = self.link
        with answering_503(link):
            answer: list[Any] = await link.script("replay", REPLAY)(
                keys=[
                    link.events_key(session_id, "e"),
                    link.events_key(session_id, f"x:{stream}"),
                ],
                args=[stream, sequence, self._max_age_ms],
            )
        status = answer[0]
        if status == b"gone" or status == b"lost":
            raise EventsLost(stream)
        if status == b"none" or answer[1].decode() != tag:
            return None
        events = []
        last = sequence
        for entry_id, fields in answer[2]:
            last = int(entry_id.split(b"-", 1)[0])
            events.append(StoredEvent(f"{tag}-{stream}-{last}", fields[1]))
        # (the bus catches up from here once it holds or follows the stream)
        link.replayed[session_id, stream] = (last, tag)
        return stream, events

    async def drop_session(self, session_id: str) -> None:
        link = self.link
        await link.script("drop", DROP)(keys=[link.events_key(session_id, "e")], args=[])

    def prune(self, now: float) -> None:
        pass  # (Redis drops old events as it adds new ones, and the TTL does the rest)

    async def open_stream(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        """Numbered by the next write, with the other streams opened meanwhile
        and the events numbered here: one round trip for them all."""
        ids = dumps(list(request_ids())) if request_ids is not None else b""
        opening = self._opening
        index = len(opening.streams) * 3
        opening.streams.append((session_id, ids))
        if self._writer_running:
            self._wake.set()
        else:
            await self.write()
        await opening.done.wait()
        if opening.error is not None:
            with answering_503(self.link):
                raise opening.error
        opened, tag, first = opening.answer[index : index + 3]
        self._blocks[session_id, opened] = [tag.decode(), first, first + SEQ_BLOCK - 1]
        return int(opened)

    def buffered_bytes(self) -> int:
        return 0  # (nothing is buffered in this process)

    def buffered_sessions(self) -> int:
        return 0
