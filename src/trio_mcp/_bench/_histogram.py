"""Latency histograms (HdrHistogram, microseconds) and their exact merge.

Workers send histograms to the parent in HdrHistogram's own compressed
encoding; decoding and adding them loses nothing, so the merged percentiles
are those of one histogram that saw every request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def new_histogram() -> Any:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_all(histograms: Iterable[Any], latencies_us: list[int]) -> None:
    """Record a batch of latencies into every histogram in `histograms`.

    Counting equal values first means one ``record_value`` per distinct
    latency, not per request.
    """
    counts = Counter(latencies_us)
    for histogram in histograms:
        for value, count in counts.items():
            histogram.record_value(min(max(value, LOWEST_US), HIGHEST_US), count)


def encode(histogram: Any) -> str:
    data: bytes = histogram.encode()
    return data.decode("ascii")


def merge(encoded: Iterable[str]) -> Any:
    """One histogram holding every value of the encoded ones."""
    total = new_histogram()
    for text in encoded:
        total.add(HdrHistogram.decode(text.encode("ascii")))
    return total


def summary_ms(histogram: Any) -> dict[str, float | int | None]:
    """Count, mean, percentiles and max of a histogram, in milliseconds."""
    count = int(histogram.get_total_count())
    if not count:
        return {"count": 0, "mean": None, "max": None, **{f"p{p:g}": None for p in PERCENTILES}}
    values: dict[str, float | int | None] = {
        "count": count,
        "mean": round(float(histogram.get_mean_value()) / 1000, 4),
    }
    for p in PERCENTILES:
        values[f"p{p:g}"] = histogram.get_value_at_percentile(p) / 1000
    values["max"] = histogram.get_max_value() / 1000
    return values
