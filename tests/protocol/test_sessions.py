"""The session table: bounded, expiring when idle, never while a request runs."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp._protocol._sessions import SessionIds, SessionsFull, SessionTable, new_session_id


def table(max_sessions: int = 3, idle: float = 100.0) -> SessionTable:
    counter = itertools.count()
    return SessionTable(max_sessions, idle, new_id=lambda: f"s{next(counter)}")


def test_create_and_get() -> None:
    sessions = table()
    session = sessions.create("alice", "2025-11-25", {"roots": {}}, {"name": "c"}, now=0)
    assert sessions.get(session.id, now=1) is session
    assert (session.principal, session.protocol_version) == ("alice", "2025-11-25")
    assert sessions.get("unknown", now=1) is None


def test_idle_sessions_expire() -> None:
    sessions = table(idle=100)
    session = sessions.create(None, "2025-11-25", {}, {}, now=0)
    assert sessions.get(session.id, now=99) is session  # use renews it
    assert sessions.get(session.id, now=198) is session
    assert sessions.get(session.id, now=299) is None


def test_a_touched_session_does_not_expire() -> None:
    # the owner touches the sessions it is busy with (a request running, a
    # stream open) at each sweep
    sessions = table(idle=100)
    busy = sessions.create(None, "2025-11-25", {}, {}, now=0)
    idle = sessions.create(None, "2025-11-25", {}, {}, now=0)
    for now in range(50, 10_001, 50):
        sessions.touch([busy.id, "unknown"], now=now)
        assert sessions.expire(now=now) == ([idle] if now == 150 else [])
    assert sessions.get(busy.id, now=10_050) is busy
    assert sessions.expire(now=10_151) == [busy]


def test_a_session_found_expired_by_get_is_reported_once() -> None:
    sessions = table(idle=100)
    session = sessions.create(None, "2025-11-25", {}, {}, now=0)
    assert sessions.get(session.id, now=101) is None
    assert sessions.expire(now=101) == [session]
    assert sessions.expire(now=102) == []


def test_subscribed_and_copies() -> None:
    sessions = table()
    a = sessions.create(None, "2025-11-25", {"roots": {}}, {}, now=0)
    b = sessions.create(None, "2025-11-25", {}, {}, now=0)
    a.subscriptions.add("x://1")
    assert sessions.subscribed("x://1") == [a]
    twin = a.copy()
    twin.subscriptions.add("x://2")
    twin.client_capabilities["sampling"] = {}
    assert a.subscriptions == {"x://1"} and "sampling" not in a.client_capabilities
    assert (twin.id, twin.principal, twin.protocol_version) == (a.id, a.principal, "2025-11-25")
    assert sessions.subscribed("x://2") == [] and b not in sessions.subscribed("x://1")


def test_full_table_makes_room_from_expired_sessions_only() -> None:
    sessions = table(max_sessions=2, idle=100)
    first = sessions.create(None, "2025-11-25", {}, {}, now=0)
    sessions.create(None, "2025-11-25", {}, {}, now=50)
    with pytest.raises(SessionsFull):
        sessions.create(None, "2025-11-25", {}, {}, now=60)
    third = sessions.create(None, "2025-11-25", {}, {}, now=120)  # the first has expired
    assert sessions.get(first.id, now=120) is None
    assert sessions.get(third.id, now=120) is third
    assert len(sessions) == 2


def test_delete() -> None:
    sessions = table()
    session = sessions.create(None, "2025-11-25", {}, {}, now=0)
    assert sessions.delete(session.id) is session
    assert sessions.get(session.id, now=0) is None
    assert sessions.delete(session.id) is None


def test_default_ids_are_random_visible_ascii() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and all(0x21 <= ord(c) <= 0x7E for c in i) for i in ids)


def test_ids_stay_distinct_across_reads_of_the_random_source() -> None:
    ids = SessionIds()
    seen = [ids() for _ in range(3 * 256 + 5)]  # four reads of 256 ids
    assert len(set(seen)) == len(seen)
    assert all(int(i, 16) >= 0 and i == i.lower() for i in seen)


def test_forget_drops_the_unused_random_bytes() -> None:
    ids = SessionIds()
    ids()
    would_be_next = ids._pool[16:32].hex()
    ids.forget()
    assert ids() != would_be_next


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_mints_ids_of_its_own() -> None:
    new_session_id()  # the parent holds unused random bytes now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        try:
            os.write(write, new_session_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        child = os.read(read, 64).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert len(child) == 32
    assert child != new_session_id()


def test_grace_extends_the_idle_time_before_expiry() -> None:
    sessions = SessionTable(3, 100.0, new_id=lambda: "g", grace_s=50.0)
    session = sessions.create(None, "2025-11-25", {}, {}, now=0)
    assert sessions.get(session.id, now=149) is session  # idle 149 of 100 + 50
    assert sessions.get(session.id, now=149 + 150.5) is None


def test_each_owner_has_its_share_and_learns_when_to_retry() -> None:
    sessions = SessionTable(
        10, 100.0, new_id=iter(f"s{n}" for n in range(99)).__next__, max_per_owner=2
    )
    first = sessions.create(None, "2025-11-25", {}, {}, now=0, owner="a")
    sessions.create(None, "2025-11-25", {}, {}, now=30, owner="a")
    with pytest.raises(SessionsFull) as refused:
        sessions.create(None, "2025-11-25", {}, {}, now=40, owner="a")
    assert refused.value.per_client and refused.value.retry_after_s == 60  # 0 + 100 - 40
    sessions.create(None, "2025-11-25", {}, {}, now=40, owner="b")  # b's own share
    assert sessions.owners() == 2
    sessions.delete(first.id)
    sessions.create(None, "2025-11-25", {}, {}, now=41, owner="a")  # room again
    assert sessions.expire(now=500) and sessions.owners() == 0  # (expiry frees shares)


def test_a_full_table_says_when_its_first_session_could_expire() -> None:
    sessions = table(max_sessions=2, idle=100)
    sessions.create(None, "2025-11-25", {}, {}, now=10)
    sessions.create(None, "2025-11-25", {}, {}, now=50)
    with pytest.raises(SessionsFull) as refused:
        sessions.create(None, "2025-11-25", {}, {}, now=60)
    assert not refused.value.per_client and refused.value.retry_after_s == 50


def shared_table(max_sessions: int = 4, grace: float = 20.0) -> SessionTable:
    """A table of 100 s idle time, shared by owners (the memory store's grace:
    two sweeps, each of which touches the sessions in use)."""
    counter = itertools.count()
    return SessionTable(
        max_sessions, 100.0, new_id=lambda: f"s{next(counter)}", grace_s=grace, max_per_owner=10
    )


def test_a_full_table_ends_an_idle_session_of_a_heavier_client() -> None:
    """A flood of sessions from many addresses, each within its share, once
    filled the table until the sessions expired: every new client got 503."""
    sessions = shared_table()
    flood = [sessions.create(None, "2025-11-25", {}, {}, now=t, owner="flood") for t in range(4)]
    sessions.get(flood[0].id, now=10)  # used since: the longest idle is now the second
    newcomer = sessions.create(None, "2025-11-25", {}, {}, now=30, owner="newcomer")
    assert sessions.get(flood[1].id, now=30) is None
    assert sessions.expire(now=30) == [flood[1]]  # reported once, to be released
    assert sessions.expire(now=31) == []
    assert len(sessions) == 4 and sessions.get(newcomer.id, now=31) is newcomer
    assert sessions.get(flood[0].id, now=31) is flood[0]


def test_a_session_used_within_the_grace_is_not_ended_for_another() -> None:
    # its owner's sweeps touch a session in use at least once per grace, so one
    # idle for less may have a request running or a stream open
    sessions = shared_table(grace=20.0)
    for t in range(4):
        sessions.create(None, "2025-11-25", {}, {}, now=t, owner="flood")
    with pytest.raises(SessionsFull) as refused:
        sessions.create(None, "2025-11-25", {}, {}, now=15, owner="newcomer")
    assert not refused.value.per_client
    assert refused.value.retry_after_s == 5  # when the first passes the grace: 0 + 20 - 15
    sessions.touch([s.id for s in sessions.live()], now=19)
    with pytest.raises(SessionsFull) as refused:
        sessions.create(None, "2025-11-25", {}, {}, now=30, owner="newcomer")
    assert refused.value.retry_after_s == 9  # 19 + 20 - 30
    assert len(sessions) == 4 and sessions.expire(now=30) == []


def test_only_a_client_two_sessions_heavier_gives_one_up() -> None:
    # ending one of b's for a would leave a as heavy as b was: no fairer
    sessions = shared_table(max_sessions=3)
    sessions.create(None, "2025-11-25", {}, {}, now=0, owner="a")
    sessions.create(None, "2025-11-25", {}, {}, now=0, owner="b")
    sessions.create(None, "2025-11-25", {}, {}, now=0, owner="b")
    with pytest.raises(SessionsFull) as refused:
        sessions.create(None, "2025-11-25", {}, {}, now=50, owner="a")
    assert refused.value.retry_after_s == 70  # the first expiry: 0 + 100 + 20 - 50
    sessions.create(None, "2025-11-25", {}, {}, now=50, owner="c")  # c holds none
    assert sessions.owners() == 3 and len(sessions) == 3


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.integers(0, 30), st.booleans()),
        max_size=60,
    )
)
def test_room_is_made_as_the_rule_says(steps: list[tuple[str, int, bool]]) -> None:
    """Random creates and uses by four owners: each refusal and each ending
    matches the rule (the longest-idle session past the grace of an owner two
    heavier than the newcomer ends for it), and the bounds hold."""
    sessions = shared_table(max_sessions=5, grace=20.0)
    now = 0
    for owner, wait, use in steps:
        now += wait
        live = [s for s in sessions.live() if now - s.last_active <= 120]
        if use and live:
            sessions.get(live[now % len(live)].id, now=now)
            continue
        counts = {o: sum(s.owner == o for s in live) for o in "abcd"}
        mine = counts[owner]
        victims = [s for s in live if counts[s.owner] >= mine + 2 and now - s.last_active > 20]
        expected = min(victims, key=lambda s: s.last_active) if victims else None
        if len(live) < 5:
            sessions.create(None, "2025-11-25", {}, {}, now=now, owner=owner)
        elif expected is None:
            with pytest.raises(SessionsFull):
                sessions.create(None, "2025-11-25", {}, {}, now=now, owner=owner)
        else:
            sessions.create(None, "2025-11-25", {}, {}, now=now, owner=owner)
            assert sessions.get(expected.id, now=now) is None
        assert len(sessions) <= 5
        sessions.expire(now=now)
