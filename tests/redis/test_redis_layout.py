"""The layout of a session's event keys is part of their names
(``EVENTS_LAYOUT``): a version that lays them out otherwise never reads the
other's keys, so that a rolling upgrade across such a change tells a resume
its events are gone (410) rather than misreading them; and every event key
this version writes names its layout."""

from __future__ import annotations

import time

import pytest
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis, event_store

from trio_mcp._errors import EventsLost
from trio_mcp._stores._redis import EVENTS_LAYOUT, PREFIX

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

#: Where the layout before (no version in the names) kept session "s"'s events.
BEFORE = f"{PREFIX}:{{s}}:"


async def test_events_kept_in_the_layout_before_are_told_gone_not_read(
    start_redis: StartRedis,
) -> None:
    link, events = await event_store(start_redis)
    async with link.opened():
        now_ms = str(int(time.time() * 1000))
        for seq in (1, 2, 3):
            await link.client.xadd(
                BEFORE + "x:0", {b"d": b"{}", b"t": now_ms}, identifier=f"{seq}-0"
            )
        await link.client.hset(
            BEFORE + "e", {"tag": "old", "seq": "3", "x:0": "3", "b:0": "6", "cost": "6"}
        )
        # (events 2 and 3 follow old-0-1 there: this version does not look there)
        with pytest.raises(EventsLost):
            await events.replay("s", "old-0-1", 0.0)
        # ...and what this version writes there leaves the layout before alone
        await events.append("s", 0, b"{}", 0.0)
        assert await link.client.hget(BEFORE + "e", "seq") == b"3"
        assert await link.client.xlen(BEFORE + "x:0") == 3


async def test_every_event_key_this_version_writes_names_its_layout(
    start_redis: StartRedis,
) -> None:
    link, events = await event_store(start_redis)
    async with link.opened():
        await events.append("s", 0, b"listed", 0.0)
        number = await events.open_stream("s", lambda: ([1], False))
        await events.append("s", number, b"progress", 0.0)
        events.closed_stream("s", number)
        await events.write()
        keys = {key.decode() for key in await link.client.keys("*")}
        layout = f"{PREFIX}:{{s}}:{EVENTS_LAYOUT}:"
        assert keys == {
            layout + "e",
            layout + "x:0",
            layout + f"x:{number}",
            layout + "xs",
            link.process_channel.decode(),  # (the producer's lease: not a session's)
        }
