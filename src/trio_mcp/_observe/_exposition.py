"""The metrics in the Prometheus text format, through prometheus_client.

A custom collector turns `Metrics` (our counters) and the gauges read at
scrape time (the endpoint's and the HTTP server's statistics) into metric
families; prometheus_client writes the exposition, so the format is the
library's. Imported only when a metrics path is configured (the ``metrics``
extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from .._errors import StartupError
from ._metrics import Histogram

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

#: What the collector reads: an `_observer.Observer` (typed loosely, since
#: the observer imports this module when it is built).
Observer = Any


#: One family of metrics as JSON values, as a worker of a ``--workers``
#: group hands its own to the others: [name, type, help, unit, samples],
#: each sample [name, labels, value].
Snapshot = list[list[Any]]


class Exposition:
    """Renders one observer's metrics (`render`), with the process's own
    (CPU, memory, file descriptors) beside them. In a ``--workers`` group,
    `peers` holds the other workers' latest `snapshot`s, added into ours, so
    that one scrape of any worker counts the whole group."""

    __slots__ = ("registry", "content_type", "_generate", "_collector", "peers")

    def __init__(self, observer: Observer) -> None:
        try:
            from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
            from prometheus_client.process_collector import ProcessCollector
        except ImportError:
            raise StartupError(
                "metrics need prometheus_client: pip install 'trio-mcp[metrics]'"
            ) from None

        self._collector = _Collector(observer)
        self.peers: list[Snapshot] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Merged(self))
        ProcessCollector(registry=self.registry)
        self.content_type = CONTENT_TYPE_LATEST.encode("ascii")
        self._generate = generate_latest

    def render(self) -> bytes:
        return bytes(self._generate(self.registry))

    def snapshot(self) -> Snapshot:
        """This process's metrics (not the process collector's) as JSON values."""
        return [
            [
                family.name,
                family.type,
                family.documentation,
                family.unit,
                [[sample.name, sample.labels, sample.value] for sample in family.samples],
            ]
            for family in self._collector.collect()
        ]


class _Merged:
    """Our families with the peers' samples added: counters, histograms and
    gauges alike are sums over the group (a sample none of ours has is
    appended to its family, a family none of ours has is added whole)."""

    def __init__(self, exposition: Exposition) -> None:
        self.exposition = exposition

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        own = self.exposition._collector.collect()
        peers = self.exposition.peers
        if not peers:
            yield from own
            return
        yield from merge(own, peers)


def merge(own: Iterable[Metric], peers: list[Snapshot]) -> Iterator[Metric]:
    """`own` families with every sample of `peers` added to its match (same
    family, sample name and labels)."""
    from prometheus_client.metrics_core import Metric

    families: dict[str, tuple[Metric, dict[tuple[Any, ...], list[Any]]]] = {}
    for family in own:
        families[family.name] = (
            family,
            {_key(s.name, s.labels): [s.name, s.labels, s.value] for s in family.samples},
        )
    for snapshot in peers:
        for name, kind, documentation, unit, peer_samples in snapshot:
            if name not in families:
                families[name] = (Metric(name, documentation, kind, unit), {})
            samples = families[name][1]
            for sample_name, labels, value in peer_samples:
                key = _key(sample_name, labels)
                if key in samples:
                    samples[key][2] += value
                else:
                    samples[key] = [sample_name, labels, value]
    for family, samples in families.values():
        merged = Metric(family.name, family.documentation, family.type, family.unit)
        for sample_name, labels, value in samples.values():
            merged.add_sample(sample_name, labels, value)
        yield merged


def _key(name: str, labels: dict[str, str]) -> tuple[Any, ...]:
    return (name, *sorted(labels.items()))


class _Collector:
    """prometheus_client's custom collector protocol: `collect` yields families."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    def describe(self) -> list[Metric]:
        return []  # (no names to check against other collectors of the registry)

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        observer = self.observer
        metrics = observer.metrics
        if metrics is not None:
            operations = HistogramMetricFamily(
                "mcp_server_operation_duration_seconds",
                "MCP request duration as observed on the server, from its receipt until its "
                "answer is sent",
                labels=[
                    "mcp_method_name",
                    "gen_ai_tool_name",
                    "gen_ai_prompt_name",
                    "error_type",
                    "mcp_protocol_version",
                ],
                unit="seconds",
            )
            for labels, histogram in list(metrics.operations.items()):
                operations.add_metric(list(labels), *_buckets(histogram))
            yield operations
            requests = HistogramMetricFamily(
                "http_server_request_duration_seconds",
                "HTTP request duration, from a complete request to its answer sent",
                labels=["http_request_method", "http_response_status_code"],
                unit="seconds",
            )
            for (method, status), histogram in list(metrics.requests.items()):
                requests.add_metric([method, str(status)], *_buckets(histogram))
            yield requests
            sessions = HistogramMetricFamily(
                "mcp_server_session_duration_seconds",
                "MCP session duration, from initialize to its end (deleted, expired, closed)",
                unit="seconds",
            )
            sessions.add_metric([], *_buckets(metrics.sessions))
            yield sessions
            refusals = CounterMetricFamily(
                "mcp_server_refusals",
                "Requests and connections refused, by HTTP status",
                labels=["reason"],
            )
            for status, count in sorted(metrics.refusals.items()):
                refusals.add_metric([str(status)], count)
            yield refusals
        log = observer.log
        if log is not None:
            yield CounterMetricFamily(
                "trio_mcp_access_log_dropped_lines",
                "Access log lines dropped because the writer fell behind",
                value=log.dropped,
            )
        peers = observer.peer_broadcast
        if peers is not None:
            yield CounterMetricFamily(
                "trio_mcp_peer_broadcast_dropped",
                "Notifications not passed to another worker of the group: its queue was "
                "full, or it was gone",
                value=peers.dropped,
            )
        yield from _gauges(observer, GaugeMetricFamily)


def _buckets(histogram: Histogram) -> tuple[list[tuple[str, int]], float]:
    """A histogram as prometheus_client takes it: cumulative buckets, and the sum."""
    counts = list(accumulate(histogram.counts))
    buckets = [
        (_bound(bound), count) for bound, count in zip(histogram.bounds, counts[:-1], strict=True)
    ]
    buckets.append(("+Inf", counts[-1]))
    return buckets, histogram.total


def _bound(bound: float) -> str:
    return repr(float(bound))


def _gauges(observer: Observer, family: Any) -> Iterable[Metric]:
    """The gauges, read now from the endpoint's and the server's statistics."""
    read = observer.gauges
    if read is not None:
        stats = read()
        for name, help_text, value in (
            ("mcp_server_sessions", "Live MCP sessions", stats.sessions),
            (
                "mcp_server_streams",
                "Open standalone streams: GET, subscriptions/listen and HTTP+SSE",
                stats.streams,
            ),
            ("mcp_server_post_streams", "POST answers being streamed (SSE)", stats.post_streams),
            (
                "mcp_server_requests_running",
                "MCP requests of sessions (and HTTP+SSE requests) running",
                stats.requests_running + stats.http_sse_answering,
            ),
            (
                "mcp_server_event_buffer_bytes",
                "Bytes of events kept for resumption",
                stats.buffered_bytes,
            ),
        ):
            yield family(name, help_text, value=value)
    server = observer.server
    if server is not None:
        stats = server.statistics()
        yield family(
            "http_server_open_connections", "Open HTTP connections", value=stats.connections_open
        )
        yield family(
            "http_server_active_requests",
            "HTTP requests being answered (long-lived streams included)",
            value=server.active_requests(),
        )
