"""The observer: where the request path reports to metrics and the access log.

Called where a JSON-RPC request ends (`answered`, by the transports, which
know its HTTP status), where an HTTP request is answered (`http_answered`, by
the HTTP server), for refusals that come with no request (`refused`) and when
a session begins and ends. Each call takes one clock reading at most
(``time.perf_counter``); the request path's start reading is the caller's.
Gauges (sessions, streams, requests in flight, buffered bytes) are not
counted here: `_exposition` reads them from the endpoint and the server at
scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from time import perf_counter
from typing import Any, Final

from .._config import MCPConfig
from ._access_log import AccessLog, Operation, PrincipalText
from ._metrics import RAW_KEYS_MAX, Metrics

#: The methods whose target is a resource (``uri``); tools/call and
#: prompts/get name theirs (``name``).
_URI_TARGETS: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
#: The JSON-RPC code of a quota's refusal inside an answer already under way.
_TOO_MANY_REQUESTS: Final = -31429


class Observer:
    """Metrics and the access log of one endpoint (see the module docstring);
    either part may be None."""

    __slots__ = (
        "metrics",
        "log",
        "server",
        "gauges",
        "peer_broadcast",
        "_operations",
        "_answered",
        "_session_starts",
        "_max_sessions",
    )

    def __init__(self, metrics: Metrics | None, log: AccessLog | None, max_sessions: int) -> None:
        self.metrics = metrics
        self.log = log
        #: The HTTP server serving the endpoint (its `serving` call), for gauges.
        self.server: Any = None
        #: Reads the endpoint's gauges at scrape time (set by the endpoint).
        self.gauges: Callable[[], Any] | None = None
        #: In a ``--workers`` group, what passes notifications to the other
        #: workers (its ``dropped`` count is a metric; set by the endpoint).
        self.peer_broadcast: Any = None
        #: (method, name, code, is_error, version) -> its `Operation`: the
        #: requests' own keys, so that each costs one lookup (`RAW_KEYS_MAX`).
        self._operations: dict[tuple[str, str | None, int | None, bool, str], Operation] = {}
        #: method -> name -> the `Operation` of its last answer without an
        #: error code (among `_operations`: as bounded)
        self._answered: dict[str, dict[str | None, Operation]] = {}
        #: When each session that began here began (for its duration).
        self._session_starts: dict[str, float] = {}
        self._max_sessions = max_sessions

    # ---- the request path ------------------------------------------------------

    def answered(
        self,
        client: str,
        method: str,
        params: dict[str, Any],
        answer: dict[str, Any] | None,
        status: int,
        version: str,
        principal: object,
        session_id: str | None,
        started: float,
    ) -> None:
        """A JSON-RPC request ended: `answer` (None when it was cancelled
        before one) went out with HTTP `status`."""
        now = perf_counter()
        seconds = now - started
        code = None
        is_error = False
        if answer is not None:
            # (a result first: nearly every answer has one, so one lookup)
            result = dict.get(answer, "result")
            if result is None:
                error = dict.get(answer, "error")
                if error is not None:
                    found = error.get("code") if type(error) is dict else None
                    code = found if type(found) is int else None
            elif method == "tools/call":
                is_error = type(result) is dict and dict.get(result, "isError") is True
        # the target's name (tools/call tested first: it is the common request)
        name = None
        if method == "tools/call" or method == "prompts/get":
            found = dict.get(params, "name")
            name = found if type(found) is str else None  # (a client's list is no key)
        elif method in _URI_TARGETS:
            found = dict.get(params, "uri")
            name = found if type(found) is str else None
        operation = None
        if code is None:  # (the usual outcome: found by method, then by name)
            by_name = dict.get(self._answered, method)
            if by_name is not None:
                operation = dict.get(by_name, name)
                if operation is not None and (
                    operation.is_error is not is_error or operation.version != version
                ):
                    operation = None
        if operation is None:
            operation = self._operation(method, name, code, is_error, version)
        histogram = operation.histogram
        if histogram is not None:
            histogram.observe(seconds)
            if code is not None and code == _TOO_MANY_REQUESTS and status != 429:
                metrics = self.metrics
                if metrics is not None:  # (it is: the histogram is its)
                    metrics.refused(429)  # (a quota's refusal inside a stream or a batch)
        log = self.log
        if log is not None:
            log.add(now, client, principal, operation, status, seconds, session_id)

    def _operation(
        self, method: str, name: str | None, code: int | None, is_error: bool, version: str
    ) -> Operation:
        """The `Operation` of a request not found by method and name: kept by
        its whole key unless `RAW_KEYS_MAX` keys are (clients that send ever
        new names get theirs made afresh, and their series is ``other``);
        without an error code, also by method and name, for the next."""
        key = (method, name, code, is_error, version)
        operation = dict.get(self._operations, key)
        if operation is not None:
            if code is None:
                self._answered[method][name] = operation
            return operation
        metrics = self.metrics
        histogram = (
            metrics.series(method, name, code, is_error, version) if metrics is not None else None
        )
        log = self.log
        operation = Operation(
            histogram, method, name, code, is_error, version, log.json if log is not None else False
        )
        if len(self._operations) < RAW_KEYS_MAX:
            self._operations[key] = operation
            if code is None:
                dict.setdefault(self._answered, method, {})[name] = operation
        return operation

    def http_answered(self, method: str, status: int, started: float) -> None:
        """An HTTP request was answered with `status` (the head sent)."""
        metrics = self.metrics
        if metrics is not None:
            metrics.request(method, status, perf_counter() - started)

    def refused(self, status: int) -> None:
        """A refusal that came with no request (at accept, a body over budget,
        a request the HTTP layer could not read)."""
        metrics = self.metrics
        if metrics is not None:
            metrics.refused(status)

    # ---- sessions ----------------------------------------------------------------

    def session_started(self, session_id: str) -> None:
        if self.metrics is None:
            return
        starts = self._session_starts
        if len(starts) < 2 * self._max_sessions:  # (bounded: ends seen by another process)
            starts[session_id] = perf_counter()

    def session_ended(self, session_id: str) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        started = self._session_starts.pop(session_id, None)
        if started is not None:
            metrics.sessions.observe(perf_counter() - started)

    # ---- life ----------------------------------------------------------------------

    def serving(self, server: object) -> None:
        """The HTTP server that serves the endpoint (its gauges are read at scrape time)."""
        self.server = server

    def open(self) -> None:
        if self.log is not None:
            self.log.open()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def observer_for(
    config: MCPConfig,
    methods: Collection[str],
    tools: Mapping[str, object],
    prompts: Mapping[str, object],
    versions: Collection[str],
    principal_text: PrincipalText,
) -> Observer | None:
    """The observer `config` asks for, or None when metrics and the access log are off."""
    if config.metrics_path is None and not config.access_log:
        return None
    metrics = None
    if config.metrics_path is not None:
        # (prometheus_client is imported, or its absence reported, where it
        # is used: `_exposition.Exposition`, made with the endpoint)
        metrics = Metrics(methods, tools, prompts, versions)
    log = None
    if config.access_log:
        log = AccessLog(
            config.access_log_buffer_lines,
            config.access_log_sample,
            config.access_log_format == "json",
            config.access_log_path,
            principal_text,
        )
    return Observer(metrics, log, config.max_sessions)
