"""The Redis event store keeps the memory store's bounds, event for event: the
same appends (GET stream and POST streams, written one by one or in batches
of many streams) leave the same events to replay and the same losses (410)
under the count, byte and session-byte bounds, checked for every event id
handed out, against a real redis-server. (One difference, on the safe side:
see `test_the_bounds_drop_what_the_memory_store_drops`.) What it keeps beside
the events (a POST stream's request ids and end mark) goes with the stream,
and every key it leaves has a TTL."""

from __future__ import annotations

import random

import pytest
import trio
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis, event_store

from trio_mcp import MCPConfig
from trio_mcp._errors import EventsLost
from trio_mcp._protocol._events import EVENT_OVERHEAD, EventLimits
from trio_mcp._stores._events import MemoryEventStore, RequestIds
from trio_mcp._stores._redis import RedisLink
from trio_mcp._stores._redis_events import LEASE_MS, SEQ_BLOCK, RedisEventStore
from trio_mcp._stores._redis_posts import ABANDON, FOLLOW, RENEW_S, PostLeases
from trio_mcp._stores._stores import event_limits

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

Outcome = str | list[bytes] | None


async def outcome(store: MemoryEventStore | RedisEventStore, event_id: str) -> Outcome:
    """What a resume from `event_id` gets: "lost" (410), the data after it, or None."""
    try:
        found = await store.replay("s", event_id, 0.0)
    except EventsLost:
        return "lost"
    return None if found is None else [event.data for event in found[1]]


def answering(request_id: int) -> RequestIds:
    """What a POST stream answering `request_id` gives `open_stream`."""
    return lambda: ([request_id], False)


async def both_stores(
    start_redis: StartRedis, config: MCPConfig
) -> tuple[RedisLink, RedisEventStore, MemoryEventStore]:
    """A link to a new redis-server, and a Redis and a memory event store of `config`."""
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    return link, RedisEventStore(link, config, 0.0), MemoryEventStore(event_limits(config))


@pytest.mark.parametrize("seed", range(6))
async def test_the_bounds_drop_what_the_memory_store_drops(
    start_redis: StartRedis, seed: int
) -> None:
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    per_event = 40 + EVENT_OVERHEAD
    config = MCPConfig(
        event_buffer_events=4,
        event_buffer_bytes=120,
        event_buffer_session_bytes=9 * per_event,
    )
    limits = event_limits(config)
    assert limits == EventLimits(4, 120, limits.max_age_s, 9 * per_event)
    memory = MemoryEventStore(limits)
    events = RedisEventStore(link, config, 0.0)
    rng = random.Random(seed)
    # (event ids of both stores, side by side: stream, memory id, Redis id)
    issued: list[tuple[int, str, str]] = []
    async with link.opened():
        streams = [0]  # (those still produced)
        ended: set[int] = set()

        async def append(stream: int, data: bytes) -> None:
            if stream == 0:
                # (the GET stream's events go to Redis at once, those numbered
                # here later: the same order for both stores takes a write)
                await events.write()
            memory_id = await memory.append("s", stream, data, 0.0)
            issued.append((stream, memory_id, await events.append("s", stream, data, 0.0)))

        for step in range(120):
            if rng.random() < 0.2 and len(streams) < 30:
                opened = await events.open_stream("s", answering(step))
                assert opened == await memory.open_stream("s")
                streams.append(opened)
                await append(opened, b"")  # (a priming event: streams begin in order)
            stream = rng.choice(streams[-4:] + [0])
            await append(stream, b"%d:" % step + b"x" * rng.choice((0, 5, 30, 40, 70)))
            if rng.random() < 0.3:
                await events.write()  # (else the next write takes a bigger batch)
            if stream and rng.random() < 0.1:
                events.closed_stream("s", stream)
                streams.remove(stream)
                ended.add(stream)
        await events.write()
        watermark = int(await link.client.hget(link.events_key("s", "e"), "lw") or 0)
        lost = 0
        for stream, memory_id, redis_id in issued:
            expected = await outcome(memory, memory_id)
            got = await outcome(events, redis_id)
            # (the one difference: of a POST stream dropped whole, Redis keeps
            # only the watermark, not its last event, so a resume from that
            # last event is told of a loss too; never the reverse)
            if got != expected:
                assert got == "lost" and 0 < stream <= watermark, (stream, memory_id, got)
            lost += expected == "lost"
        assert 0 < lost < len(issued)  # (the bounds did drop, and not everything)
        await kept_beside_the_events(link, produced=set(streams), ended=ended)


async def kept_beside_the_events(link: RedisLink, produced: set[int], ended: set[int]) -> None:
    """A POST stream's request ids, producer and end mark are there while its
    events are, the ids and producer also while it is produced, and nothing
    else of it is; every key has a TTL (a key without one would outlive its
    session)."""
    fields = await link.client.hgetall(link.events_key("s", "e"))
    kept = {int(field[2:]) for field in fields if field.startswith(b"x:")} - {0}
    for stream in kept:
        assert b"r:%d" % stream in fields
        assert fields[b"p:%d" % stream] == link.process_channel
        assert (b"a:%d" % stream in fields) == (stream in ended)
    for field in fields:
        kind, _, number = field.partition(b":")
        if kind in (b"r", b"p"):
            assert int(number) in kept | produced, field
        if kind == b"a":
            assert int(number) in kept, field
    keys = await link.client.keys("*")
    assert keys and all([await link.client.pttl(key) > 0 for key in keys])


async def test_a_post_stream_dropped_whole_then_written_again_tells_a_resume_of_its_loss(
    start_redis: StartRedis,
) -> None:
    link, events, memory = await both_stores(
        start_redis, MCPConfig(event_buffer_session_bytes=4 * (100 + EVENT_OVERHEAD))
    )
    async with link.opened():
        for store in (events, memory):
            slow = await store.open_stream("s")
            first = await store.append("s", slow, b"a" * 100, 0.0)
            await store.append("s", slow, b"a" * 100, 0.0)
            for _ in range(3):  # (other streams push the slow one out, whole)
                other = await store.open_stream("s")
                await store.append("s", other, b"b" * 100, 0.0)
            later = await store.append("s", slow, b"c" * 10, 0.0)
            if store is events:
                await events.write()
            with pytest.raises(EventsLost):
                await store.replay("s", first, 0.0)
            found = await store.replay("s", later, 0.0)
            assert found is not None and found[1] == []


async def test_a_dead_producer_s_stream_is_marked_once_and_never_in_a_hash_that_is_gone(
    start_redis: StartRedis,
) -> None:
    link, events = await event_store(start_redis)
    async with link.opened():
        number = await events.open_stream("s", answering(1))
        await events.append("s", number, b"", 0.0)
        await events.write()
        meta, lease = link.events_key("s", "e"), link.process_channel
        abandon = link.script("abandon", ABANDON)
        assert await abandon(keys=[meta], args=[number]) == 0  # (its producer's lease is held)
        await link.client.delete([lease])  # (it lapsed: the producer died)
        assert await abandon(keys=[meta], args=[number]) == 1
        assert await abandon(keys=[meta], args=[number]) == 0  # (once)
        await kept_beside_the_events(link, produced=set(), ended={number})
        await events.drop_session("s")
        assert await abandon(keys=[meta], args=[number]) == 0
        assert not await link.client.keys("*")


async def test_an_opening_returns_once_its_producer_and_the_producer_s_lease_are_in_redis(
    start_redis: StartRedis,
) -> None:
    link, events = await event_store(start_redis)
    async with link.opened():
        follow = link.script("follow", FOLLOW)
        meta = link.events_key("s", "e")
        assert await link.client.exists([link.process_channel]) == 0
        number = await events.open_stream("s", answering(1))
        assert 0 < await link.client.pttl(link.process_channel) <= LEASE_MS
        assert await link.client.hget(meta, f"p:{number}") == link.process_channel
        held, *_ = await follow(keys=[meta, link.events_key("s", f"x:{number}")], args=[number, 0])
        assert held == 1
        # (another process's stream, whose producer's lease lapsed: not held)
        await link.client.hset(meta, {f"p:{number}": b"trio-mcp:process:gone"})
        held, *_ = await follow(keys=[meta, link.events_key("s", f"x:{number}")], args=[number, 0])
        assert held == 0


async def test_the_producer_s_lease_is_renewed_while_it_produces_a_stream_and_only_then(
    start_redis: StartRedis,
) -> None:
    link, events = await event_store(start_redis)
    leases = PostLeases(link, events)
    async with link.opened():
        number = await events.open_stream("s", answering(1))
        leases.producing("s", number)
        await link.client.delete([link.process_channel])  # (as if it had lapsed)
        await trio.sleep(RENEW_S * 1.5)
        assert 0 < await link.client.pttl(link.process_channel) <= LEASE_MS
        leases.produced("s", number)
        await link.client.delete([link.process_channel])
        await trio.sleep(RENEW_S * 1.5)
        assert await link.client.exists([link.process_channel]) == 0


async def test_a_stream_s_bytes_field_holds_its_bytes_and_events(
    start_redis: StartRedis,
) -> None:
    # (so that the byte bound drops a stream without counting its entries)
    link, events = await event_store(start_redis)
    async with link.opened():
        await events.append("s", 0, b"listed", 0.0)
        number = await events.open_stream("s", answering(1))
        await events.append("s", number, b"progress", 0.0)
        await events.write()
        fields = await link.client.hgetall(link.events_key("s", "e"))
        assert fields[b"b:0"] == b"6 1"
        assert fields[b"b:%d" % number] == b"8 1"


async def test_a_stream_over_the_session_bound_alone_or_oldest_keeps_its_place(
    start_redis: StartRedis,
) -> None:
    link, events, memory = await both_stores(
        start_redis, MCPConfig(event_buffer_session_bytes=2 * (100 + EVENT_OVERHEAD))
    )
    issued: dict[int, list[tuple[str, str]]] = {}  # (stream's memory and Redis ids)
    async with link.opened():

        async def append(stream: int, size: int) -> None:
            issued.setdefault(stream, []).append(
                (
                    await memory.append("s", stream, b"m" * size, 0.0),
                    await events.append("s", stream, b"m" * size, 0.0),
                )
            )
            await events.write()

        alone = await events.open_stream("s", answering(1))
        assert alone == await memory.open_stream("s")
        for _ in range(3):  # (over the bound with no other stream to drop)
            await append(alone, 100)
        other = await events.open_stream("s", answering(2))
        assert other == await memory.open_stream("s")
        await append(other, 10)  # (drops the first stream, whole)
        await append(alone, 10)  # (written again: newest, and told of its loss)
        await append(other, 100)  # (the oldest now, kept: the first goes again)
        await append(other, 10)
        for stream, ids in issued.items():
            for memory_id, redis_id in ids:
                expected = await outcome(memory, memory_id)
                got = await outcome(events, redis_id)
                assert got == expected or (got == "lost" and stream == alone), (stream, got)
        assert await outcome(events, issued[other][-1][1]) == []
        await kept_beside_the_events(link, produced={alone, other}, ended=set())


async def test_a_stream_whose_key_lapsed_before_its_session_s_tells_a_resume_of_its_loss(
    start_redis: StartRedis,
) -> None:
    # (a stream's key has its TTL refreshed by its own events only, the
    # session's hash by every stream's: a stream left quiet lapses first)
    link, events, _ = await both_stores(start_redis, MCPConfig(session_idle_timeout_s=0.4))
    async with link.opened():
        quiet = await events.open_stream("s", answering(1))
        before = await events.append("s", quiet, b"", 0.0)
        last = await events.append("s", quiet, b"progress", 0.0)
        get_before = await events.append("s", 0, b"", 0.0)
        get_last = await events.append("s", 0, b"listed", 0.0)
        busy = await events.open_stream("s", answering(2))
        await events.write()
        follow = link.script("follow", FOLLOW)
        meta = link.events_key("s", "e")
        for _ in range(12):  # (the session stays alive; the quiet streams' keys lapse)
            await events.append("s", busy, b"more", 0.0)
            await events.write()
            await trio.sleep(0.1)
        assert await link.client.exists([meta]) == 1
        assert await link.client.exists([link.events_key("s", f"x:{quiet}")]) == 0
        assert await link.client.exists([link.events_key("s", "x:0")]) == 0
        assert await outcome(events, before) == "lost"
        assert await outcome(events, get_before) == "lost"
        # (nothing came after the last event: nothing was lost either)
        assert await outcome(events, last) == []
        assert await outcome(events, get_last) == []
        # (a process following the quiet stream for a resume elsewhere is told too)
        *_, lost, entries = await follow(
            keys=[meta, link.events_key("s", f"x:{quiet}")],
            args=[quiet, before.rsplit("-", 1)[1]],
        )
        assert entries == [] and int(lost) >= int(last.rsplit("-", 1)[1])


async def test_a_post_stream_s_events_are_numbered_at_once_from_its_block_and_past_it(
    start_redis: StartRedis,
) -> None:
    # (`append_nowait` is what a POST stream tries first: it answers from the
    # block its opening reserved and says WouldBlock once that is used up, or
    # for the GET stream; `append` then takes a round trip per event)
    link, events = await event_store(start_redis)
    async with link.opened():
        with pytest.raises(trio.WouldBlock):
            events.append_nowait("s", 0, b"listed", 0.0)
        number = await events.open_stream("s", answering(1))
        ids = []
        waited = []
        for n in range(2 * SEQ_BLOCK + 5):
            data = b"event %d" % n
            try:
                ids.append(events.append_nowait("s", number, data, 0.0))
            except trio.WouldBlock:
                waited.append(n)
                ids.append(await events.append("s", number, data, 0.0))
        assert waited == list(range(SEQ_BLOCK, 2 * SEQ_BLOCK + 5))  # (a round trip each)
        sequences = [int(event_id.rsplit("-", 1)[1]) for event_id in ids]
        assert sequences == sorted(set(sequences))
        await events.write()
        found = await events.replay("s", ids[0], 0.0)
        assert found is not None
        assert [event.event_id for event in found[1]] == ids[1:]
        assert [event.data for event in found[1]] == [
            b"event %d" % n for n in range(1, 2 * SEQ_BLOCK + 5)
        ]
