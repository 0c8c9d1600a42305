"""benchmarks/_batches.py: the share of time at which an arrival would wait
behind the batch in progress, from a histogram of batch lengths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

from _batches import BOUNDS_MS, WAITS_MS, arrivals_waiting_over, distribution


def histogram(**counts: int) -> list[int]:
    """A histogram with `counts` in the buckets named by their upper bound
    (``b0_75=3``: three batches of 0.5-0.75 ms)."""
    bins = [0] * (len(BOUNDS_MS) + 1)
    for name, count in counts.items():
        bins[BOUNDS_MS.index(float(name[1:].replace("_", ".")))] = count
    return bins


def test_a_batch_holds_back_arrivals_for_what_it_lasts_beyond_the_wait() -> None:
    # 1,000 batches of 1.25 ms (the 1-1.5 bucket's middle) in 10 s: an arrival
    # waits over 0.25 ms during 1.0 ms of each, over 1 ms during 0.25 ms of each
    shares = arrivals_waiting_over(histogram(b1_5=1000), 10.0)
    assert shares == {"0.25ms": 10.0, "0.5ms": 7.5, "1.0ms": 2.5, "2.0ms": 0.0}
    assert list(shares) == [f"{wait}ms" for wait in WAITS_MS]


def test_short_batches_hold_back_no_arrival_beyond_their_length() -> None:
    shares = arrivals_waiting_over(histogram(b0_05=10**6, b0_1=10**5), 60.0)
    assert set(shares.values()) == {0.0}


def test_the_last_bucket_counts_at_its_lower_bound() -> None:
    shares = arrivals_waiting_over([0] * len(BOUNDS_MS) + [1], 1.0)
    assert shares["2.0ms"] == pytest.approx(100 * (BOUNDS_MS[-1] - 2.0) / 1000, abs=0.001)


def test_a_distribution_given_its_seconds_reports_both_shares() -> None:
    empty = {"batches": 0, "steps": 0, "cpu_s": 0.0, "max_ms": 0.0}
    first = {**empty, "histogram": histogram(), "wall_histogram": histogram()}
    last = {
        **empty,
        "batches": 1000,
        "histogram": histogram(b0_75=1000),
        "wall_histogram": histogram(b1_5=1000),
    }
    report = distribution([first, last], 10.0)
    assert report["arrivals_waiting_over_pct"]["0.5ms"] == 7.5
    assert report["arrivals_waiting_over_pct_by_cpu"]["0.5ms"] == 1.25
    assert "arrivals_waiting_over_pct" not in distribution([first, last])
