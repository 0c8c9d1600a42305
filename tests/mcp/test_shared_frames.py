"""A broadcast frames its data once and shares it across the streams it
reaches; each stream keeps its own event id (a GET stream) or its own
``_meta`` (a listen stream). A resource update finds its listeners by URI.

The pieces a stream is given must write exactly the bytes `format_event`
gives for the whole frame: generated data and ids check that, and the
memory tests check that streams which queue a broadcast hold one copy.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp._config import MCPConfig
from trio_mcp._mcp._fanout import Broadcaster
from trio_mcp._mcp._streams import Listener, Outbox
from trio_mcp._protocol._events import MESSAGE_EVENT
from trio_mcp._speedups import format_event
from trio_mcp._stores._bus import (
    MemoryBus,
    frame_bytes,
    frame_size,
    shared_event,
    with_event_id,
)
from trio_mcp._stores._stores import memory_stores

MIB = 1024 * 1024
_EVENT_IDS = st.text(
    st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=40
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@given(data=st.binary(), event_id=_EVENT_IDS)
def test_an_event_in_pieces_writes_the_bytes_of_its_whole_frame(data: bytes, event_id: str) -> None:
    frame = with_event_id(event_id, shared_event(data))
    whole = format_event(data, event_id=event_id.encode(), event=MESSAGE_EVENT)
    assert frame_bytes(frame) == whole and frame_size(frame) == len(whole)


def _meta(number: int) -> bytes:
    return b'"_meta":' + orjson.dumps({"subscriptionId": number})


def _listener(number: int, honored: dict[str, Any]) -> Listener:
    return Listener(number, honored, _meta(number))


def _broadcaster() -> Broadcaster:
    config = MCPConfig()
    return Broadcaster(config, memory_stores(config, grace_s=0.0))


def _message(frame: bytes) -> Any:
    assert frame.startswith(b"event: message\ndata: ") and frame.endswith(b"\n\n")
    line = frame[len(b"event: message\ndata: ") : -2]
    assert b"\n" not in line and b"\r" not in line
    return orjson.loads(line)


@given(params=st.dictionaries(st.text(), _JSON, max_size=4))
async def test_a_listen_frame_in_pieces_is_the_notification_with_each_listeners_meta(
    params: dict[str, Any],
) -> None:
    broadcaster = _broadcaster()
    listening = [_listener(number, {"toolsListChanged": True}) for number in range(2)]
    for listener in listening:  # (not pumped: what they are offered queues)
        broadcaster.bus.listen(listener)
    broadcaster.deliver_to_listeners("notifications/tools/list_changed", params, None)
    pieces = [listener.outbox._queue[0] for listener in listening]
    expected = {k: v for k, v in params.items() if k != "_meta"}
    for number, frame in enumerate(pieces):
        whole = frame_bytes(frame)
        assert whole == format_event(whole[len(b"event: message\ndata: ") : -2], event=b"message")
        assert _message(whole) == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {**expected, "_meta": {"subscriptionId": number}},
        }
    assert type(pieces[0]) is tuple and pieces[0][0] is pieces[1][0]  # shared


def _growth(action: Any) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


async def test_unread_get_streams_queue_one_copy_of_a_broadcast() -> None:
    bus = MemoryBus()
    sessions = [f"s{i}" for i in range(30)]
    outboxes = [Outbox(limit_bytes=64 * MIB) for _ in sessions]  # not pumped: all queue
    for session_id, outbox in zip(sessions, outboxes, strict=True):
        assert await bus.attach(session_id, outbox)
    data = orjson.dumps({"jsonrpc": "2.0", "method": "m", "params": {"blob": "x" * MIB}})

    def deliver() -> None:
        coroutine = bus.deliver(sessions, [f"{s}-0-1" for s in sessions], data, 1.0)
        try:
            coroutine.send(None)  # (the memory bus never waits)
        except StopIteration:
            pass

    # one frame of the data, shared: 30 copies would be 30 MiB
    assert _growth(deliver) < 2 * MIB
    queued = [outbox._queue[0] for outbox in outboxes]
    assert all(frame_bytes(frame).endswith(data + b"\n\n") for frame in queued)
    assert frame_bytes(queued[3]).startswith(b"id: s3-0-1\n")


async def test_unread_listen_streams_queue_one_copy_of_a_resource_update() -> None:
    broadcaster = _broadcaster()
    uri = "x://" + "u" * MIB
    listeners = [
        _listener(number, {"resourceSubscriptions": [uri, "x://other"]}) for number in range(30)
    ]
    for listener in listeners:
        listener.outbox.limit_bytes = 64 * MIB
        broadcaster.bus.listen(listener)
    growth = _growth(
        lambda: broadcaster.deliver_to_listeners(
            "notifications/resources/updated", {"uri": uri}, uri
        )
    )
    assert growth < 3 * MIB  # 30 copies would be 30 MiB
    frames = [frame_bytes(listener.outbox._queue[0]) for listener in listeners]
    assert _message(frames[7])["params"] == {"uri": uri, "_meta": {"subscriptionId": 7}}


def test_a_resource_update_finds_its_listeners_by_uri() -> None:
    bus = MemoryBus()
    a = _listener(1, {"resourceSubscriptions": ["x://1", "x://2"]})
    b = _listener(2, {"resourceSubscriptions": ["x://2"]})
    c = _listener(3, {"toolsListChanged": True})
    for listener in (b, a, c, a):  # (listening twice changes nothing)
        bus.listen(listener)
    assert bus.subscribers("x://2") == [b, a]
    assert bus.subscribers("x://1") == [a]
    assert bus.subscribers("x://3") == []
    bus.unlisten(a)
    bus.unlisten(a)
    assert bus.subscribers("x://2") == [b] and bus.subscribers("x://1") == []
    bus.unlisten(b)
    bus.unlisten(c)
    assert bus.listeners() == [] and bus._by_uri == {}  # no empty entries left
