"""The broadcasts between the workers of one group (`PeerBroadcast`), with
real unix sockets in a private directory: each message reaches every peer
once, as one line; a peer that reads too slowly, is gone, or sends too long
a line costs the sender nothing but the messages it drops, and counts them;
a replaced socket file (a restarted worker) is connected to again."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_mcp._trio._peer_broadcast import SUFFIX, LineReader, PeerBroadcast

# ---- the framing ---------------------------------------------------------------


def test_lines_come_out_whole_however_the_bytes_are_cut() -> None:
    data = b'["a",{}]\n["bb",{"x":1}]\n["c"]\n'
    for cut in range(1, len(data)):
        reader = LineReader(64)
        lines = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert lines == [b'["a",{}]', b'["bb",{"x":1}]', b'["c"]']
    byte_by_byte = LineReader(64)
    assert [line for i in range(len(data)) for line in byte_by_byte.feed(data[i : i + 1])] == [
        b'["a",{}]',
        b'["bb",{"x":1}]',
        b'["c"]',
    ]


def test_a_partial_line_waits_for_its_end() -> None:
    reader = LineReader(64)
    assert reader.feed(b"abc") == []
    assert reader.feed(b"def\ngh") == [b"abcdef"]
    assert reader.feed(b"\n") == [b"gh"]


def test_a_line_longer_than_the_bound_is_refused_before_its_end() -> None:
    reader = LineReader(8)
    assert reader.feed(b"12345678") == []
    with pytest.raises(ValueError):
        reader.feed(b"9")  # (no newline yet: refused as soon as it is too long)
    with pytest.raises(ValueError):
        LineReader(8).feed(b"ok\n123456789\n")
    with pytest.raises(ValueError):
        LineReader(8).feed(b"ok\n123456789")
    assert LineReader(8).feed(b"12345678\n") == [b"12345678"]


# ---- sockets --------------------------------------------------------------------


@pytest.fixture
def group_dir(tmp_path: Path) -> str:
    directory = tmp_path / "peers"
    directory.mkdir(mode=0o700)
    return str(directory)


class Peer:
    def __init__(self, directory: str, name: str, queue_bytes: int = 64 * 1024) -> None:
        self.got: list[bytes] = []
        self.arrived = trio.Event()
        self.broadcast = PeerBroadcast(directory, name, queue_bytes, self._on_message)

    def _on_message(self, message: bytes) -> None:
        self.got.append(message)
        self.arrived.set()

    async def until(self, count: int) -> list[bytes]:
        while len(self.got) < count:
            self.arrived = trio.Event()
            await self.arrived.wait()
        return self.got


async def start(nursery: trio.Nursery, directory: str, name: str, **kw: int) -> Peer:
    peer = Peer(directory, name, **kw)
    await nursery.start(peer.broadcast.run)
    return peer


async def test_a_message_reaches_every_other_peer_once(
    nursery: trio.Nursery, group_dir: str
) -> None:
    w1, w2, w3 = [await start(nursery, group_dir, f"w{i}") for i in (1, 2, 3)]
    assert sorted(os.listdir(group_dir)) == [f"w{i}{SUFFIX}" for i in (1, 2, 3)]
    with trio.fail_after(5):
        assert w1.broadcast.send(b'["one"]') == 2
        assert w2.broadcast.send(b'["two"]') == 2
        assert await w2.until(1) == [b'["one"]']
        assert await w3.until(2) == [b'["one"]', b'["two"]']
        assert await w1.until(1) == [b'["two"]']
    await trio.testing.wait_all_tasks_blocked()
    assert (len(w1.got), len(w2.got), len(w3.got)) == (1, 1, 2)
    assert w1.broadcast.dropped == w1.broadcast.unreachable == 0


async def test_a_peer_that_does_not_read_costs_only_its_own_messages(
    nursery: trio.Nursery, group_dir: str
) -> None:
    """A wedged worker: its socket accepts but nobody reads. The sender
    never waits: what does not fit in the queue (bytes) is dropped and
    counted, and a live peer still gets every message."""
    queue_bytes = 16 * 1024
    wedged = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    wedged.bind(os.path.join(group_dir, "w2" + SUFFIX))
    wedged.listen(8)
    try:
        w1 = await start(nursery, group_dir, "w1", queue_bytes=queue_bytes)
        w3 = await start(nursery, group_dir, "w3", queue_bytes=queue_bytes)
        message = b'["' + b"x" * 1000 + b'"]'
        sent = 2000  # about 2 MB: more than the kernel's buffers and the queue
        with trio.fail_after(20):
            for _ in range(sent):
                w1.broadcast.send(message)  # (synchronous: it cannot wait)
                await trio.lowlevel.checkpoint()
            await w3.until(sent)
        link = w1.broadcast.links["w2"]
        assert link.queued_bytes <= queue_bytes
        assert w1.broadcast.dropped == link.dropped > 0
        assert w3.got == [message] * sent
        assert w1.broadcast.links["w3"].dropped == 0
    finally:
        wedged.close()


async def test_a_gone_peer_is_counted_and_the_others_still_get_it(
    nursery: trio.Nursery, group_dir: str
) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(group_dir, "w2" + SUFFIX))
    stale.close()  # the file of a worker killed with SIGKILL: nobody listens
    w1 = await start(nursery, group_dir, "w1")
    w3 = await start(nursery, group_dir, "w3")
    with trio.fail_after(5):
        assert w1.broadcast.send(b'["a"]') == 1
        assert w1.broadcast.send(b'["b"]') == 1
        assert await w3.until(2) == [b'["a"]', b'["b"]']
    assert w1.broadcast.unreachable == 2
    assert w1.broadcast.dropped == 0


async def test_a_peer_that_dies_after_connecting_is_dropped_without_harm(
    nursery: trio.Nursery, group_dir: str
) -> None:
    w1 = await start(nursery, group_dir, "w1")
    scope = trio.CancelScope()
    w2 = Peer(group_dir, "w2")

    async def run_w2(task_status: trio.TaskStatus[None]) -> None:
        with scope:
            await w2.broadcast.run(task_status=task_status)

    await nursery.start(run_w2)
    with trio.fail_after(5):
        w1.broadcast.send(b'["before"]')
        await w2.until(1)
        scope.cancel()  # its listener and connections close; its file stays
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            assert w1.broadcast.send(b'["after"]') == 0
    assert w1.broadcast.unreachable == 3
    assert w2.got == [b'["before"]']


async def test_a_restarted_peer_is_connected_to_again(
    nursery: trio.Nursery, group_dir: str
) -> None:
    """A successor binds the same name (a rolling restart, a replacement):
    its file replaces the old one, and the next message goes to it, even
    while the old process still listens (it drains)."""
    w1 = await start(nursery, group_dir, "w1")
    old = await start(nursery, group_dir, "w2")
    with trio.fail_after(5):
        w1.broadcast.send(b'["1"]')
        await old.until(1)
        new = await start(nursery, group_dir, "w2")
        w1.broadcast.send(b'["2"]')
        assert await new.until(1) == [b'["2"]']
    await trio.testing.wait_all_tasks_blocked()
    assert old.got == [b'["1"]']


async def test_too_long_a_line_ends_that_connection_only(
    nursery: trio.Nursery, group_dir: str
) -> None:
    w1 = await start(nursery, group_dir, "w1", queue_bytes=4096)
    with trio.fail_after(5):
        rogue = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await rogue.connect(os.path.join(group_dir, "w1" + SUFFIX))
        await rogue.send(b"x" * 5000)
        assert await rogue.recv(10) == b""  # closed by w1
        rogue.close()
        w2 = await start(nursery, group_dir, "w2", queue_bytes=4096)
        w2.broadcast.send(b'["fine"]')
        assert await w1.until(1) == [b'["fine"]']


async def test_a_message_larger_than_the_queue_is_not_sent(
    nursery: trio.Nursery, group_dir: str
) -> None:
    w1 = await start(nursery, group_dir, "w1", queue_bytes=4096)
    w2 = await start(nursery, group_dir, "w2", queue_bytes=4096)
    assert w1.broadcast.send(b"y" * 4096) == 0  # (with its newline: 4097)
    assert w1.broadcast.dropped == 1
    with trio.fail_after(5):
        assert w1.broadcast.send(b"y" * 4095) == 1
        assert await w2.until(1) == [b"y" * 4095]
