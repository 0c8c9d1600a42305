"""The open-loop schedule and its correction for coordinated omission, without sockets."""

from __future__ import annotations

import pytest

from trio_mcp._bench._plan import WorkerPlan
from trio_mcp._bench._target import resolve
from trio_mcp._bench._worker import BUSY, READY, SPIN_S, Conn, Worker, wait_before


def worker(rate: float | None, connections: int = 1, total: int | None = None) -> Worker:
    plan = WorkerPlan(
        index=0,
        target=resolve("http://127.0.0.1:9/mcp"),
        scenario="call",
        protocol="2026-07-28",
        tool="echo",
        arguments={},
        connections=connections,
        first_connection=0,
        total_connections=total or connections,
        rate=rate,
        requests=None,
        count=0,
        warmup_s=0.0,
        duration_s=100.0,
        timeout_s=10.0,
    )
    w = Worker(plan)
    w.start = w.measure_start = 1000.0
    w.end = 1100.0
    w.issuing = True
    sent: list[tuple[int, float]] = []

    def begin(conn: Conn, steps: tuple[int, ...], *, setup: bool, now: float) -> None:
        conn.state = BUSY
        sent.append((conn.number, now))

    w.begin = begin  # type: ignore[method-assign]
    w.sent = sent  # type: ignore[attr-defined]
    for conn in w.conns:
        conn.state = READY
    return w


def answer(w: Worker, conn: Conn, now: float) -> None:
    w.done(conn, now, ok=True)


def recorded(w: Worker) -> list[int]:
    """Every latency (us) recorded so far, in ascending order."""
    values: list[int] = []
    for item in w.second_histogram.get_recorded_iterator():
        values += [item.value_iterated_to] * item.count_at_value_iterated_to
    return values


def test_connections_start_spread_over_one_interval() -> None:
    w = worker(rate=400.0, connections=4)  # 100/s per connection: one every 10 ms
    for conn in w.conns:
        w.next_operation(conn, 1000.0)
    assert w.interval == pytest.approx(0.01)
    assert w.sent == [(0, 1000.0)]  # due now: sent at once
    assert [round(t, 6) for t, _, _ in sorted(w.timers)] == [1000.0025, 1000.005, 1000.0075]
    w.fire_timers(1000.006)  # the first three are due
    assert [n for n, _ in w.sent] == [0, 1, 2]
    assert w.conns[3].state == READY


def test_an_answered_connection_waits_for_its_next_slot() -> None:
    w = worker(rate=100.0)
    conn = w.conns[0]
    w.next_operation(conn, 1000.0)
    assert w.sent == [(0, 1000.0)]
    answer(w, conn, 1000.002)  # fast answer: the next request is due at 1000.010
    assert w.sent == [(0, 1000.0)]
    assert w.timers[0][0] == pytest.approx(1000.01)
    w.fire_timers(1000.0101)
    assert len(w.sent) == 2
    assert recorded(w) == [2000]


def test_a_stall_is_charged_to_every_request_that_was_due() -> None:
    """A 300 ms stall at 100 req/s delays 30 requests; each counts from when it was due."""
    w = worker(rate=100.0)
    conn = w.conns[0]
    w.next_operation(conn, 1000.0)
    answer(w, conn, 1000.300)  # the server stalled 300 ms
    # the requests that fell due meanwhile go out at once, back to back, each
    # measured from its own intended time
    now = 1000.300
    while len(w.sent) < 31:
        now += 0.0001
        answer(w, conn, now)
    latencies = recorded(w)[::-1]  # HdrHistogram: 3 significant digits
    assert len(latencies) == 30  # the 31st is in flight
    assert latencies[0] == pytest.approx(300_000, rel=1e-3)
    assert latencies[1] == pytest.approx(290_100, rel=1e-3)
    assert latencies[10] == pytest.approx(201_000, rel=1e-3)
    assert latencies[-1] == pytest.approx(12_900, rel=1e-2)  # due at 290 ms, done at 302.9
    # back on schedule: the next one waits for its slot
    assert (len(w.sent) == 31 and not w.timers) or w.timers[0][0] > now


def test_closed_loop_measures_from_the_send() -> None:
    w = worker(rate=None)
    conn = w.conns[0]
    w.next_operation(conn, 1000.0)
    answer(w, conn, 1000.300)
    assert recorded(w) == [pytest.approx(300_000, rel=1e-3)]
    assert w.sent == [(0, 1000.0), (0, 1000.3)]  # the next one at once
    answer(w, conn, 1000.301)
    assert recorded(w)[0] == 1000


def test_warm_up_and_the_end_are_not_recorded() -> None:
    w = worker(rate=None)
    w.measure_start = 1001.0
    conn = w.conns[0]
    w.next_operation(conn, 1000.5)  # started in the warm-up
    answer(w, conn, 1001.2)  # finished in the measured phase: not counted
    assert w.ok == 0 and recorded(w) == []
    answer(w, conn, 1001.3)  # started at 1001.2: counted
    assert w.ok == 1
    w.end = 1001.35
    answer(w, conn, 1001.4)  # finished after the end: not counted, and nothing new starts
    assert w.ok == 1
    assert w.sent[-1] == (0, 1001.3)


def test_a_wait_before_a_paced_request_is_precise_even_when_a_tick_bounds_it() -> None:
    # epoll_wait rounds up to whole milliseconds: a request due 200 µs after the
    # tick would be sent up to 1 ms late if the wait until the tick went to epoll.
    now, tick = 10.0, 10.0 + 200e-6
    timeout, precise = wait_before(now, tick, first_due=tick + 200e-6)
    assert precise and timeout == pytest.approx(200e-6)
    timeout, precise = wait_before(now, tick, first_due=now + 150e-6)
    assert precise and timeout == pytest.approx(150e-6 - SPIN_S)
    assert wait_before(now, tick, first_due=now + SPIN_S / 2) == (0.0, True)  # poll
    assert wait_before(now, tick, first_due=None) == (pytest.approx(200e-6), False)
    assert wait_before(now, now - 1e-3, first_due=None) == (0.0, False)
