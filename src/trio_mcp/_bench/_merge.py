"""Worker results merged into one report: totals, percentiles, errors, per-second series."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from . import _histogram
from ._options import IDLE, BenchConfig
from ._plan import WorkerResult


def merge_results(config: BenchConfig, results: list[WorkerResult]) -> dict[str, Any]:
    """The machine-readable report of a run (what ``--json`` writes)."""
    errors: Counter[str] = Counter()
    for result in results:
        errors.update(result.errors)
    histogram = _histogram.merge(r.histogram for r in results if r.histogram)
    ok = sum(r.ok for r in results)
    measured = max((r.measured_s for r in results), default=0.0)
    error_count = sum(errors.values())
    report: dict[str, Any] = {
        "config": {
            key: value
            for key, value in asdict(config).items()
            if key not in ("quiet", "json_path", "plot_path")
        },
        "totals": {
            "requests": ok + error_count,
            "ok": ok,
            "errors": error_count,
            "duration_s": round(measured, 3),
            "requests_per_s": round(ok / measured, 1) if measured > 0 else None,
            "progress_events": sum(r.progress_events for r in results),
            "interrupted": any(r.interrupted for r in results),
        },
        "latency_ms": _histogram.summary_ms(
            histogram,
            sum(r.latency_sum_us for r in results) / max(1, histogram.get_total_count()),
        ),
        "errors": dict(sorted(errors.items(), key=lambda item: -item[1])),
        "series": series(results),
        "workers": [
            {
                "index": r.index,
                "ok": r.ok,
                "errors": sum(r.errors.values()),
                "ready_connections": r.ready_connections,
            }
            for r in results
        ],
    }
    if config.scenario in IDLE:
        times = [r.open_time_s for r in results if r.open_time_s is not None]
        report["idle"] = {
            "requested": config.count,
            "opened": sum(r.opened for r in results),
            "failed": sum(r.failed for r in results),
            "open_time_s": round(max(times), 3) if times else None,
            "dropped_while_held": sum(r.dropped for r in results),
            "held_at_end": sum(r.held_at_end for r in results),
        }
        report["totals"]["ok"] = report["idle"]["opened"]
        report["totals"]["requests"] = report["idle"]["opened"] + error_count
        report["totals"]["requests_per_s"] = None
    return report


def series(results: list[WorkerResult]) -> list[dict[str, Any]]:
    """Throughput and latency of each second of the measured run, over all workers."""
    seconds: dict[int, list[dict[str, Any]]] = {}
    for result in results:
        for entry in result.seconds:
            seconds.setdefault(entry["second"], []).append(entry)
    if not seconds:
        return []
    rows = []
    for second in range(max(seconds) + 1):
        entries = seconds.get(second, [])
        merged = _histogram.merge(e["histogram"] for e in entries)
        summary = _histogram.summary_ms(merged)
        rows.append(
            {
                "second": second,
                "ok": sum(e["ok"] for e in entries),
                "errors": sum(e["errors"] for e in entries),
                "p50_ms": summary["p50"],
                "p90_ms": summary["p90"],
                "p99_ms": summary["p99"],
                "max_ms": summary["max"],
            }
        )
    return rows
