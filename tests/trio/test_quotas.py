"""The connections a server takes: a cap below the file-descriptor limit, a
share per client address, and a head time limit that shortens while many
heads are slow. Refusals are 503 before any task runs, with a Retry-After
the server can keep: when a held connection (or one of the client's own)
must end."""

from __future__ import annotations

import ipaddress
import itertools
import resource
import subprocess
import sys

import pytest
import trio
from _support import Client, free_port, start_ok_server
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import ServerConfig
from trio_mcp._http._addresses import address_group
from trio_mcp._http._connection import HTTP11Connection
from trio_mcp._trio._connection import Connection
from trio_mcp._trio._limits import CANCELS_PER_TURN
from trio_mcp._trio._quotas import (
    OPEN_ENDED_RETRY_S,
    ConnectionQuota,
    connection_cap,
    head_limit,
    retry_after_s,
    slow_heads_threshold,
)
from trio_mcp._trio._socketio import interrupt_wakes_readers

GET = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def connect_from(port: int, source: str = "127.0.0.1") -> Client:
    sock = trio.socket.socket()
    try:
        await sock.bind((source, 0))
        await sock.connect(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return Client(trio.SocketStream(sock))


async def status_of(client: Client) -> int:
    await client.send(GET)
    with trio.fail_after(5):
        return (await client.read_reply()).status


def test_address_groups() -> None:
    assert address_group("192.0.2.7") == "192.0.2.7"
    assert address_group("2001:db8:1:2:aaaa::1") == address_group("2001:db8:1:2::ffff")
    assert address_group("2001:db8:1:2::1") != address_group("2001:db8:1:3::1")
    assert address_group("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_group("fe80::1%eth0") == address_group("fe80::2")
    assert address_group("/run/mcp.sock") == "/run/mcp.sock"


def group_by_parsing(host: str) -> str:
    """`address_group` as it reads, with no shortcut for IPv4 text."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@given(
    st.one_of(
        st.ip_addresses().map(str),
        st.ip_addresses(v=4).map(lambda a: str(a) + "%x"),
        st.text(alphabet="0123456789.:%abcdefx/ ", max_size=24),
        st.text(max_size=24),
    )
)
def test_the_ipv4_shortcut_groups_as_parsing_does(host: str) -> None:
    assert address_group(host) == group_by_parsing(host)


def test_the_cap_stays_below_the_descriptor_limit() -> None:
    assert connection_cap(ServerConfig(), limit=1024) == 1024 - 102
    assert connection_cap(ServerConfig(), limit=300) == 300 - 64
    assert connection_cap(ServerConfig(max_connections=100), limit=1024) == 100
    assert connection_cap(ServerConfig(max_connections=10**6), limit=1024) == 922


def test_the_slow_heads_threshold_is_half_the_cap_by_default() -> None:
    assert slow_heads_threshold(ServerConfig(), cap=18_000) == 9_000
    assert slow_heads_threshold(ServerConfig(), cap=3) == 2
    assert slow_heads_threshold(ServerConfig(slow_heads_threshold=512), cap=18_000) == 512


def test_a_quota_counts_per_address_group() -> None:
    quota = ConnectionQuota(ServerConfig(max_connections=3, max_connections_per_address=2))
    first = quota.admit("10.0.0.1")
    assert first == "10.0.0.1" and quota.admit("10.0.0.1") == first
    assert quota.admit("10.0.0.1") is None  # the address's share
    assert quota.admit("10.0.0.2") == "10.0.0.2"
    assert quota.admit("10.0.0.3") is None  # the server's cap
    quota.leave(first)
    assert quota.admit("10.0.0.3") == "10.0.0.3"
    for group in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        quota.leave(group)
    assert (quota.held, quota.groups()) == (0, 0)


def retry_of(refusal: bytes) -> int:
    head = refusal.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 503 ")
    (value,) = [line[13:] for line in head.split(b"\r\n") if line.startswith(b"retry-after: ")]
    return int(value)


def test_a_refusal_says_when_capacity_frees() -> None:
    assert retry_after_s(12.2, now=10.0) == 3  # (whole seconds, rounded up)
    assert retry_after_s(10.5, now=10.0) == retry_after_s(3.0, now=10.0) == 1
    assert retry_after_s(float("inf"), now=10.0) == OPEN_ENDED_RETRY_S
    quota = ConnectionQuota(ServerConfig(max_connections=3, max_connections_per_address=2))
    assert retry_of(quota.refusal("10.0.0.1", 0.0)) == OPEN_ENDED_RETRY_S  # no tick yet
    quota.noted(40.0, 25.0, {})
    assert quota.admit("10.0.0.1") and quota.admit("10.0.0.1")
    # the address's share is full: its connections were not looked at yet,
    # so the server's soonest is the hint, and the next tick looks at them
    assert retry_of(quota.refusal("10.0.0.1", 10.0)) == 30
    assert quota.crowded == {"10.0.0.1"}
    quota.noted(40.0, 25.0, {"10.0.0.1": 70.0})
    assert quota.crowded == {"10.0.0.1"}  # (still at its share: looked at again)
    assert retry_of(quota.refusal("10.0.0.1", 10.0)) == 60
    assert quota.admit("10.0.0.2")
    assert retry_of(quota.refusal("10.0.0.3", 10.0)) == 30  # the server's cap
    quota.leave("10.0.0.1")
    quota.noted(40.0, 25.0, {"10.0.0.1": 70.0})
    assert quota.crowded == set()  # below its share: no longer looked at
    assert retry_of(quota.bodies_refusal(10.0)) == 15
    quota.noted(40.0, float("inf"), {})
    assert retry_of(quota.bodies_refusal(10.0)) == 31  # (body_timeout_s + a tick)
    assert quota.bodies_refusal(10.0).endswith(b"\r\n\r\ntoo many bodies being received")


def test_a_refusal_declares_the_length_of_its_text() -> None:
    """The bodies' 503 once said 29 bytes of its 30: the last went out as
    the start of another response."""
    quota = ConnectionQuota(ServerConfig())
    for refusal in (quota.refusal("10.0.0.1", 0.0), quota.bodies_refusal(0.0)):
        head, text = refusal.split(b"\r\n\r\n", 1)
        (length,) = [
            line[16:] for line in head.split(b"\r\n") if line.startswith(b"content-length")
        ]
        assert int(length) == len(text)


def test_the_head_limit_shortens_under_pressure() -> None:
    assert head_limit(0, 100, 10.0) == head_limit(50, 100, 10.0) == 10.0
    assert head_limit(75, 100, 10.0) == 5.0
    assert head_limit(99, 100, 10.0) == 1.0  # (never below the floor)
    assert head_limit(100, 100, 10.0) == head_limit(10**6, 100, 10.0) == 1.0
    assert head_limit(100, 100, 0.5) == 0.5  # a floor above the limit is the limit


async def test_a_connection_beyond_the_cap_gets_503(nursery: trio.Nursery) -> None:
    server = await start_ok_server(
        nursery, max_connections=2, max_connections_per_address=2, idle_timeout_s=20.0
    )
    port = server.ports[0]
    held = [await connect_from(port) for _ in range(2)]
    assert [await status_of(client) for client in held] == [200, 200]
    await trio.sleep(3 * server.timeout_tick_s)  # (the sweeper has seen them idle)
    extra = await connect_from(port)
    await extra.send(GET)
    with trio.fail_after(5):
        refused = await extra.read_reply()
    # the held connections are idle: they end within their 20 s idle limit
    assert refused.status == 503
    assert 17 <= int(refused.header(b"retry-after")) <= 21
    assert server.statistics().connections_refused == 1
    await extra.stream.aclose()
    await held[0].stream.aclose()
    with trio.fail_after(5):
        while server.quota.held > 1:
            await trio.sleep(0.01)
    again = await connect_from(port)
    assert await status_of(again) == 200
    for client in [*held[1:], again]:
        await client.stream.aclose()


async def test_one_address_has_its_share_and_others_theirs(nursery: trio.Nursery) -> None:
    server = await start_ok_server(nursery, max_connections_per_address=2)
    port = server.ports[0]
    mine = [await connect_from(port, "127.0.0.1") for _ in range(2)]
    assert [await status_of(client) for client in mine] == [200, 200]
    refused = await connect_from(port, "127.0.0.1")
    assert await status_of(refused) == 503
    other = await connect_from(port, "127.0.0.2")
    assert await status_of(other) == 200
    for client in [*mine, refused, other]:
        await client.stream.aclose()


async def test_a_refused_address_is_told_when_its_own_connections_end(
    nursery: trio.Nursery,
) -> None:
    server = await start_ok_server(
        nursery, max_connections_per_address=2, idle_timeout_s=60.0, head_timeout_s=5.0
    )
    port = server.ports[0]
    mine = [await connect_from(port, "127.0.0.1") for _ in range(2)]
    assert [await status_of(client) for client in mine] == [200, 200]  # idle: 60 s
    slow = await connect_from(port, "127.0.0.2")
    await slow.send(b"GET / HTTP/1.1\r\n")  # a head that must end within 5 s
    await trio.sleep(3 * server.timeout_tick_s)

    async def refusal() -> int:
        client = await connect_from(port, "127.0.0.1")
        await client.send(GET)
        with trio.fail_after(5):
            reply = await client.read_reply()
        await client.stream.aclose()
        assert reply.status == 503
        return int(reply.header(b"retry-after"))

    assert await refusal() <= 6  # the server's soonest, before a look at the address
    await trio.sleep(3 * server.timeout_tick_s)
    assert 55 <= await refusal() <= 61  # its own connections' idle limit
    for client in [*mine, slow]:
        await client.stream.aclose()


async def test_slow_heads_get_a_shorter_limit_under_pressure(nursery: trio.Nursery) -> None:
    server = await start_ok_server(nursery, slow_heads_threshold=4, head_timeout_s=20.0)
    port = server.ports[0]
    slow = [await connect_from(port) for _ in range(4)]
    for client in slow:
        await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # (no end of head)
    started = trio.current_time()
    complete = await connect_from(port)
    assert await status_of(complete) == 200  # a whole request is served meanwhile
    with trio.fail_after(5):  # (not the 20 s of the head limit)
        statuses = [(await client.read_reply()).status for client in slow]
    assert statuses == [408] * 4
    assert trio.current_time() - started < 5
    for client in [*slow, complete]:
        await client.stream.aclose()


class EndingsPerBatch(trio.abc.Instrument):
    """How many of `connections` have been told to end (interrupted or
    cancelled), at each scheduler batch's end."""

    def __init__(self, connections: list[Connection]) -> None:
        self.connections = connections
        self.counts: list[int] = []

    def before_io_wait(self, timeout: float) -> None:
        self.counts.append(
            sum(conn.overdue or conn.timer.cancel_called for conn in self.connections)
        )


async def test_the_sweeper_ends_a_few_overdue_connections_per_batch(
    nursery: trio.Nursery,
) -> None:
    """Forty heads due in one tick end over several scheduler batches, so that
    no batch holds all their endings ahead of the other requests."""
    server = await start_ok_server(nursery, head_timeout_s=1.0)
    slow = [await connect_from(server.ports[0]) for _ in range(40)]
    for client in slow:
        await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    with trio.fail_after(5):
        while len(server._connections) < 40:
            await trio.sleep(0.01)
    counts = EndingsPerBatch(list(server._connections))
    trio.lowlevel.add_instrument(counts)
    try:
        with trio.fail_after(5):
            statuses = [(await client.read_reply()).status for client in slow]
    finally:
        trio.lowlevel.remove_instrument(counts)
    assert statuses == [408] * 40
    steps = [after - before for before, after in itertools.pairwise(counts.counts)]
    assert counts.counts[-1] == 40
    assert max(steps) <= CANCELS_PER_TURN
    if interrupt_wakes_readers():  # (each head was interrupted: no cancel, no exception)
        assert not any(conn.timer.cancel_called for conn in counts.connections)
    for client in slow:
        await client.stream.aclose()


class FakeSocket:
    def __init__(self) -> None:
        self.interrupts = 0

    def interrupt(self) -> None:
        self.interrupts += 1

    def send_nowait(self, data: bytes) -> int:
        return len(data)

    def close(self) -> None:
        pass


def connection_in(phase_bytes: bytes, socket: FakeSocket | None) -> Connection:
    http = HTTP11Connection(ServerConfig())
    http.receive_data(phase_bytes)
    http.next_event()
    return Connection(http, trio.CancelScope(), socket)


async def test_an_overdue_head_is_interrupted_once_then_cancelled() -> None:
    """The sweeper's first word to an overdue head over a socket is an
    interrupt; a head still there at the next tick is cancelled."""
    socket = FakeSocket()
    conn = connection_in(b"GET / HTTP/1.1\r\nHost: x\r\n", socket)
    conn.end_overdue()
    assert (socket.interrupts, conn.overdue, conn.timer.cancel_called) == (1, True, False)
    conn.end_overdue()
    assert (socket.interrupts, conn.timer.cancel_called) == (1, True)


@pytest.mark.parametrize("socket", [None, FakeSocket()], ids=["no socket", "socket"])
async def test_other_overdue_phases_are_cancelled(socket: FakeSocket | None) -> None:
    """Only a head is interrupted: an idle connection (or one without an
    interruptible socket) is cancelled at once."""
    conn = connection_in(b"" if socket is not None else b"GET / HTTP/1.1\r\n", socket)
    conn.end_overdue()
    assert conn.timer.cancel_called and not conn.overdue
    assert socket is None or socket.interrupts == 0


SERVE_WITH_FEW_DESCRIPTORS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
from trio_mcp import Response, ServerConfig, run

async def ok(request):
    return Response(200, [], b"ok")

run(ok, ServerConfig(port=int(sys.argv[1])))
"""


@pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 512, reason="the test needs 400 descriptors"
)
async def test_accept_never_runs_out_of_descriptors() -> None:
    """With 128 descriptors, 200 clients: the server refuses those beyond its
    cap with 503 and logs no failed accept (it once logged EMFILE in a loop)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_WITH_FEW_DESCRIPTORS, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with trio.fail_after(20):
            while True:
                try:
                    probe = await connect_from(port)
                    break
                except OSError:
                    await trio.sleep(0.05)
            assert await status_of(probe) == 200
            await probe.stream.aclose()
            statuses = []
            held = []
            for _ in range(200):
                client = await connect_from(port)
                held.append(client)
                statuses.append(await status_of(client))
            # the cap is 128 - 64, and one address has half of it
            assert statuses.count(200) == (128 - 64) // 2 and set(statuses) == {200, 503}
            for client in held:
                await client.stream.aclose()
            await trio.sleep(0.3)
            again = await connect_from(port)
            assert await status_of(again) == 200
            await again.stream.aclose()
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
    assert b"accept failed" not in output
    assert b"Too many open files" not in output


async def test_bodies_being_received_share_a_budget(nursery: trio.Nursery) -> None:
    """100 connections each holding an almost complete 4 MiB body once pinned
    +410 MB for the whole body timeout."""
    server = await start_ok_server(nursery, max_receiving_bytes=1000, max_body_bytes=800)
    port = server.ports[0]

    def head(length: int) -> bytes:
        return b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % length

    first = await connect_from(port)
    await first.send(head(600) + b"x" * 100)  # (the rest comes later)
    await trio.sleep(3 * server.timeout_tick_s)  # (the sweeper has seen it)
    second = await connect_from(port)
    await second.send(head(600) + b"y" * 100)
    with trio.fail_after(5):
        refused = await second.read_reply()
    # the body being received must be whole within its 30 s limit
    assert refused.status == 503 and 28 <= int(refused.header(b"retry-after")) <= 31
    await first.send(b"x" * 500)
    with trio.fail_after(5):
        assert (await first.read_reply()).status == 200
    third = await connect_from(port)  # the budget is free again
    await third.send(head(600) + b"z" * 100)
    await trio.sleep(0.2)
    await third.send(b"z" * 500)
    with trio.fail_after(5):
        assert (await third.read_reply()).status == 200
    assert server.quota.bodies == 0
    for client in (first, second, third):
        await client.stream.aclose()
