"""The Date header's cache: the clock per read, unless a sweeper refreshes it."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from trio_mcp._trio._connection import DateCache


def test_reads_follow_the_clock_unless_a_sweeper_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_795_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    dates = DateCache()
    assert dates.get() == formatdate(now[0], usegmt=True).encode()
    now[0] += 5
    assert dates.get() == formatdate(now[0], usegmt=True).encode()
    with dates.ticking():
        ticked = dates.get()
        now[0] += 5
        assert dates.get() == ticked  # between ticks: no clock read
        dates.refresh()
        assert dates.get() == formatdate(now[0], usegmt=True).encode()
        with dates.ticking():  # a second sweeper
            pass
        now[0] += 5
        assert dates.get() != formatdate(now[0], usegmt=True).encode()  # still ticking
    assert dates.get() == formatdate(now[0], usegmt=True).encode()  # no sweeper: the clock
