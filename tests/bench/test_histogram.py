"""Latency histograms: batches recorded exactly, and worker histograms merged without loss."""

from __future__ import annotations

import random

import pytest

from trio_mcp._bench import _histogram
from trio_mcp._bench._merge import merge_results, series
from trio_mcp._bench._options import BenchConfig
from trio_mcp._bench._plan import WorkerResult


def config(**changes: object) -> BenchConfig:
    values: dict[str, object] = dict(
        url="http://127.0.0.1:1/mcp",
        protocol="2025-11-25",
        scenario="call",
        tool="echo",
        arguments={"text": "hello"},
        connections=4,
        workers=3,
        rate=None,
        duration_s=3.0,
        requests=None,
        warmup_s=0.0,
        timeout_s=1.0,
        count=1,
        json_path=None,
        plot_path=None,
        quiet=True,
        allow_remote=False,
    )
    values.update(changes)
    return BenchConfig(**values)  # type: ignore[arg-type]


def record_batch(histogram: object, values: list[int]) -> None:
    for value in values:
        histogram.record_value(value)  # type: ignore[attr-defined]


def test_merging_encoded_worker_histograms_equals_one_histogram() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(7, 1.2)) + 1 for _ in range(30_000)]
    single = _histogram.new_histogram()
    record_batch(single, values)
    parts = []
    for worker in range(3):
        histogram = _histogram.new_histogram()
        record_batch(histogram, values[worker::3])
        parts.append(_histogram.encode(histogram))
    merged = _histogram.merge(parts)
    assert merged.get_total_count() == len(values)
    assert merged.get_max_value() == single.get_max_value()
    for p in (50, 90, 99, 99.9, 100):
        assert merged.get_value_at_percentile(p) == single.get_value_at_percentile(p)
    summary = _histogram.summary_ms(merged, sum(values) / len(values))
    assert summary["count"] == len(values)
    assert summary["mean"] == round(sum(values) / len(values) / 1000, 4)
    assert summary["p50"] == single.get_value_at_percentile(50) / 1000


def worker_result(index: int, latencies: list[int], errors: dict[str, int]) -> WorkerResult:
    total = _histogram.new_histogram()
    record_batch(total, latencies)
    seconds = []
    for second in range(2):
        histogram = _histogram.new_histogram()
        record_batch(histogram, latencies[second::2])
        seconds.append(
            {
                "second": second,
                "ok": len(latencies[second::2]),
                "errors": errors.get("timeout", 0) if second == 0 else 0,
                "histogram": _histogram.encode(histogram),
            }
        )
    return WorkerResult(
        index=index,
        ok=len(latencies),
        errors=errors,
        histogram=_histogram.encode(total),
        latency_sum_us=sum(latencies),
        seconds=seconds,
        measured_s=2.0,
    )


def test_merge_results_sums_workers_and_their_seconds() -> None:
    results = [
        worker_result(0, [1000] * 10, {"timeout": 2}),
        worker_result(1, [3000] * 30, {"timeout": 1, "http 503": 4}),
    ]
    report = merge_results(config(), results)
    assert report["totals"] == {
        "requests": 47,
        "ok": 40,
        "errors": 7,
        "duration_s": 2.0,
        "requests_per_s": 20.0,
        "progress_events": 0,
        "interrupted": False,
    }
    assert report["errors"] == {"http 503": 4, "timeout": 3}
    assert report["latency_ms"]["p50"] == pytest.approx(3.0, abs=0.002)  # within 3 digits
    assert report["latency_ms"]["mean"] == 2.5
    rows = series(results)
    assert [(r["second"], r["ok"], r["errors"]) for r in rows] == [(0, 20, 3), (1, 20, 0)]
    assert rows[0]["p99_ms"] == pytest.approx(3.0, abs=0.002)


def test_a_second_nobody_recorded_is_a_zero_row() -> None:
    result = worker_result(0, [500, 700], {})
    result.seconds = [dict(result.seconds[0], second=2)]
    rows = series([result])
    assert [(r["second"], r["ok"], r["p50_ms"]) for r in rows][:2] == [(0, 0, None), (1, 0, None)]
