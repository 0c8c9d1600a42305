"""The counters behind the metrics: plain ints and per-bucket counts.

The request path only adds to these (a tuple key, a dict lookup, a scan of
a fixed tuple of bounds); turning them into Prometheus families happens
at scrape time in `_exposition`. Every label value comes from a bounded set
the server registered (methods, tools, prompts, protocol versions, HTTP
methods); anything else is ``other``, so no client can mint series.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

#: The OpenTelemetry MCP conventions' buckets for operation and session durations.
MCP_BUCKETS_S: Final = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
#: The OpenTelemetry HTTP conventions' buckets for request durations.
HTTP_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
#: The refusals counted by status (the quotas', the session checks', auth's).
REFUSAL_STATUSES: Final = frozenset({401, 403, 404, 409, 413, 429, 503})
#: The label of a name the server did not register.
OTHER: Final = "other"
#: HTTP methods that are labels as they are; any other is ``_OTHER`` (the HTTP conventions').
_HTTP_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
#: error.type of a tools/call answered with ``isError`` (the MCP conventions').
TOOL_ERROR: Final = "tool_error"
#: How many of the requests' own (method, name, code, ...) keys the observer
#: keeps mapped to their series: the common ones, so that each costs one
#: lookup; clients that send ever new names get the labelling done afresh.
RAW_KEYS_MAX: Final = 4096


class Histogram:
    """Counts per bucket (`counts[i]` for bucket i; the last is above every
    bound) and the sum of the observed values (`total`)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = tuple(float(bound) for bound in bounds)
        self.counts: list[int] = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        # (a scan from the smallest bound, not a bisect: nearly every request
        # falls in the first buckets, and compiled this is a loop over doubles)
        i = 0
        for bound in self.bounds:
            if value <= bound:
                break
            i += 1
        self.counts[i] += 1
        self.total += value

    def count(self) -> int:
        return sum(self.counts)


class Metrics:
    """What the observer counts (see the module docstring)."""

    __slots__ = (
        "methods",
        "tools",
        "prompts",
        "versions",
        "operations",
        "requests",
        "sessions",
        "refusals",
        "_error_types",
        "_by_method",
    )

    def __init__(
        self,
        methods: Collection[str],
        tools: Mapping[str, object],
        prompts: Mapping[str, object],
        versions: Collection[str],
    ) -> None:
        #: The registered names label values are taken from (the app's live
        #: dicts: a tool added while serving is counted under its name).
        self.methods = frozenset(methods)
        self.tools = tools
        self.prompts = prompts
        self.versions = frozenset(versions)
        #: (method, tool, prompt, error type, protocol version) -> durations.
        self.operations: dict[tuple[str, str, str, str, str], Histogram] = {}
        #: (HTTP method, status) -> durations.
        self.requests: dict[tuple[str, int], Histogram] = {}
        self.sessions = Histogram(MCP_BUCKETS_S)
        #: status -> refusals.
        self.refusals: dict[int, int] = dict.fromkeys(sorted(REFUSAL_STATUSES), 0)
        self._error_types: dict[object, str] = {}
        #: HTTP method -> status -> the series (the usual methods only).
        self._by_method: dict[str, dict[int, Histogram]] = {}

    def series(
        self, method: str, name: str | None, code: int | None, is_error: bool, version: str
    ) -> Histogram:
        """The histogram of a JSON-RPC request's labels (names nobody
        registered are ``other``): `code` is its error code (None when it has
        a result; `is_error`, a tool's result with ``isError``)."""
        tool = prompt = ""
        if method == "tools/call":
            tool = name if type(name) is str and name in self.tools else OTHER
        elif method == "prompts/get":
            prompt = name if type(name) is str and name in self.prompts else OTHER
        elif method not in self.methods:
            method = OTHER
        if code is not None:
            error = dict.get(self._error_types, code)
            if error is None:
                error = str(code) if len(self._error_types) < 64 else OTHER
                if error != OTHER:
                    self._error_types[code] = error
        else:
            error = TOOL_ERROR if is_error else ""
        if version not in self.versions:
            version = OTHER
        labels = (method, tool, prompt, error, version)
        histogram = dict.get(self.operations, labels)
        if histogram is None:
            histogram = self.operations[labels] = Histogram(MCP_BUCKETS_S)
        return histogram

    def request(self, method: str, status: int, seconds: float) -> None:
        """One HTTP request answered with `status`."""
        by_status = dict.get(self._by_method, method)
        histogram = dict.get(by_status, status) if by_status is not None else None
        if histogram is None:
            histogram = self._request_series(method, status)
        histogram.observe(seconds)
        if status >= 400 and status in REFUSAL_STATUSES:
            self.refusals[status] += 1

    def _request_series(self, method: str, status: int) -> Histogram:
        """The histogram of an HTTP method (``_OTHER`` for an unusual one) and status."""
        label = method if method in _HTTP_METHODS else "_OTHER"
        key = (label, status)
        histogram = dict.get(self.requests, key)
        if histogram is None:
            histogram = self.requests[key] = Histogram(HTTP_BUCKETS_S)
        if label != "_OTHER" and status < 1000:  # (statuses are 100-999: a bounded set)
            dict.setdefault(self._by_method, method, {})[status] = histogram
        return histogram

    def refused(self, status: int) -> None:
        """A refusal no HTTP request came with (a connection refused at accept)."""
        if status in REFUSAL_STATUSES:
            self.refusals[status] += 1
