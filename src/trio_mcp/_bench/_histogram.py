"""Latency histograms (HdrHistogram, microseconds) and their exact merge.

Workers send histograms to the parent in HdrHistogram's own compressed
encoding; decoding and adding them loses nothing, so the merged percentiles
are those of one histogram that saw every request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def new_histogram() -> Any:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def encode(histogram: Any) -> str:
    data: bytes = histogram.encode()
    return data.decode("ascii")


def merge(encoded: Iterable[str]) -> Any:
    """One histogram holding every value of the encoded ones."""
    total = new_histogram()
    for text in encoded:
        total.add(HdrHistogram.decode(text.encode("ascii")))
    return total


def summary_ms(histogram: Any, mean_us: float | None = None) -> dict[str, float | int | None]:
    """Count, percentiles and max of a histogram (and a mean, if given), in milliseconds."""
    count = int(histogram.get_total_count())
    values: dict[str, float | int | None] = {"count": count}
    values["mean"] = None if mean_us is None or not count else round(mean_us / 1000, 4)
    # one pass over the counts for all percentiles
    at = histogram.get_percentile_to_value_dict(list(PERCENTILES)) if count else {}
    for p in PERCENTILES:
        values[f"p{p:g}"] = at[p] / 1000 if count else None
    values["max"] = histogram.get_max_value() / 1000 if count else None
    return values
