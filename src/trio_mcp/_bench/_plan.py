"""What the parent of ``trio-mcp bench`` tells each worker process to do, and
what each sends back (plain records, pickled across the process boundary)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._target import Target


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker process does."""

    index: int
    target: Target
    scenario: str
    protocol: str
    tool: str
    arguments: dict[str, Any]
    connections: int  # this worker's connections (idle scenarios: concurrent opens)
    first_connection: int  # the global number of its first connection
    total_connections: int
    rate: float | None  # total requests/s over all workers (open loop), or None
    requests: int | None  # this worker's share of --requests
    count: int  # idle scenarios: sessions this worker opens
    warmup_s: float
    duration_s: float | None
    timeout_s: float


@dataclass
class WorkerResult:
    """What a worker sends back; histograms are HdrHistogram encodings."""

    index: int
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    histogram: str = ""
    latency_sum_us: int = 0
    seconds: list[dict[str, Any]] = field(default_factory=list)
    progress_events: int = 0
    measured_s: float = 0.0
    ready_connections: int = 0
    # idle scenarios
    opened: int = 0
    failed: int = 0
    open_time_s: float | None = None
    dropped: int = 0
    held_at_end: int = 0
    interrupted: bool = False
    gave_up: bool = False
