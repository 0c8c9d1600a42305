"""Server configuration: one frozen, validated record, passed explicitly.

Field names carry their units. Every knob has a default that suits a
production server on one machine; README.md documents each of them.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

#: What the kernel takes as a thread's scheduling slice, in microseconds
#: (``sched_slice_us``; it clamps other values to these).
SLICE_US_RANGE = (100, 100_000)
MiB = 1024 * 1024
KiB = 1024
#: What an owner name may be: short, since it rides in every session id.
_OWNER_NAME = re.compile(r"[A-Za-z0-9-]{1,16}")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How a trio-mcp server listens and how long it waits for peers.

    Attributes:
        host: address to bind; loopback by default.
        port: TCP port to bind; 0 picks a free one (see ``HTTPServer.ports``).
        backlog: listen backlog; None lets trio choose (the OS maximum).
        idle_timeout_s: how long a persistent connection may wait for the first
            byte of its next request before the server closes it silently.
        head_timeout_s: how long a request head may take to arrive, counted
            from its first byte; separate from the idle timeout so a slowly
            trickled head cannot hold a connection (answered 408).
        body_timeout_s: how long a request body may take to arrive in full,
            counted from the end of its head (answered 408).
        write_timeout_s: how long one write to a client may block (a client
            that stops reading is disconnected).
        max_requests_per_connection: after this many requests the server
            answers with ``Connection: close``.
        max_body_bytes: larger request bodies are answered 413.
        max_receiving_bytes: the bodies being received at once, in all (those
            that did not arrive with their heads); a body that does not fit
            is answered 503 with ``Retry-After`` and its connection closed,
            so slow bodies cannot pin memory.
        max_head_bytes: request heads above this size are answered 431.
        max_request_line_bytes: longer request lines are answered 414; longer
            header lines 431.
        max_header_count: more header lines than this are answered 431.
        receive_chunk_bytes: how much one socket read asks for.
        max_connections: connections held at once; None (the default) is as
            many as the file-descriptor limit leaves after a reserve (a tenth,
            at least 64), and a larger value is lowered to that. A connection
            beyond is answered 503 with ``Retry-After`` and closed, so
            ``accept`` never runs out of file descriptors.
        max_connections_per_address: connections held at once from one client
            address (IPv6: one /64); None is half of ``max_connections``.
            Beyond, as above.
        slow_heads_threshold: while more than half this many connections are
            still sending their request heads, the head time limit shortens
            in proportion, down to 1 s at this many, so heads trickled slowly
            cannot crowd out complete requests; None (the default) is half
            the connection cap (``max_connections`` as the descriptor limit
            lowers it), where slow heads begin to threaten it.
        forwarded_allow_ips: the proxies (addresses or networks, such as
            ``127.0.0.1`` or ``10.0.0.0/8``) whose ``Forwarded`` (RFC 7239) or
            ``X-Forwarded-For``/``-Proto``/``-Host`` headers give the client's
            address, scheme and public host; none by default. The client is
            the rightmost address not in this set. Their connections do not
            count in an address's share of connections.
        shutdown_timeout_s: on graceful shutdown, how long in-flight requests
            may take to finish once the listener has closed (after
            ``drain_delay_s``) before they are cancelled; an MCP request
            cancelled so is answered with the JSON-RPC error -32603 ("the
            server is shutting down"), not a bare close.
        drain_delay_s: on graceful shutdown (SIGTERM, SIGINT,
            ``HTTPServer.shutdown``), how long the listener stays open after
            readiness goes false: new connections are still accepted and
            their requests served, each answer with ``Connection: close``,
            so that a load balancer stops sending before connections are
            refused. Set it to the load balancer's health-check interval
            times its failure threshold, plus a margin. 0 (the default)
            closes the listener at once, so Ctrl-C stops a local server
            without a wait. A second signal stops at once whatever the phase.
        reuse_port: set SO_REUSEPORT so several processes can share the port.
        trio_tweaks: when trio-mcp runs trio itself (``run``, ``run_mcp``,
            ``trio-mcp run``) on a tested trio and outcome (``_trio/_tweaks.py``
            names them), stand in for four trio internals: every scheduler
            batch runs first in, first out (a lower p99), wake-ups reuse their
            ``outcome.Value(None)`` objects, trio's instrument checks run in C,
            and a connection's schedule point yields trio's trap directly.
            Process-wide while the server runs, undone after; off on any other
            trio or outcome version, and in a trio run you own (``serve``).
        batch_end_sends: under load, hold JSON answers until the current
            trio scheduler batch ends (all but the batch's first eight), then
            send them together: a client or proxy on the same host is woken a
            few times per batch instead of once per answer (more requests per
            second and a lower p50 under load; see ``_trio/_socketio.py``). A
            held answer waits at most for the rest of its batch; bytes still
            leave in order and before the server can block. Off, every answer
            is sent at once.
        gc_full_interval_s: when trio-mcp runs trio itself, on CPython's
            generational garbage collector: full collections at most this
            often (when younger ones promoted anything since), instead of
            whenever the interpreter's rule calls for one, which under
            connection churn is about every second, each pausing every
            request. Cyclic garbage that reaches the oldest generation waits
            up to this long. None leaves the collector as it is.
        ssl_certfile: serve HTTPS: the server's certificate (PEM), followed by
            its intermediate certificates; None (the default) serves plain
            HTTP. Read once at start-up.
        ssl_keyfile: the certificate's private key (PEM); None when it is in
            ``ssl_certfile``.
        ssl_keyfile_password: the password of an encrypted ``ssl_keyfile``
            (a secret: from the environment or a file, never a flag).
        ssl_ca_certs: the CA certificates (PEM) that client certificates are
            checked against; needed by ``ssl_cert_reqs`` other than "none".
        ssl_cert_reqs: whether clients present a certificate: "none" (not
            asked for), "optional" (checked if presented) or "required"
            (a client without one signed by ``ssl_ca_certs`` fails the
            handshake).
        ssl_handshake_timeout_s: how long a TLS handshake may take; a
            connection still handshaking counts as one still sending its
            request head (``slow_heads_threshold`` shortens this limit too).
        gc_freeze: when trio-mcp runs trio itself, on CPython's generational
            garbage collector: once start-up has built the application and
            the server, and after each paced full collection
            (``gc_full_interval_s``), move every object that survived to the
            collector's permanent generation (``gc.freeze``), which no
            collection walks. A full collection then costs what reached the
            oldest generation since the previous one, not all the server
            holds (with 10,000 idle GET streams, 0.4 s each otherwise).
            Frozen objects are still freed when their last reference goes;
            cyclic garbage made of frozen objects is never freed while the
            server runs, so turn this off for an application that drops
            long-lived objects in reference cycles. Unfrozen when the run ends.
        malloc_trim: when trio-mcp runs trio itself with a C library that has
            ``malloc_trim`` (glibc), at each ``gc_full_interval_s`` hand the
            allocator's free pages back to the system, so that the process's
            RSS follows what it holds instead of its high-water mark; each
            call holds the event loop for a few milliseconds on a large,
            fragmented heap (benchmarks/README.md). Elsewhere, or with
            ``gc_full_interval_s`` None, nothing is done.
        sched_slice_us: when trio-mcp runs trio itself on Linux 6.12 or
            later: ask the kernel for a scheduling slice of this many
            microseconds (100 to 100,000) for the thread that runs trio, in
            place of its default of about a millisecond or more
            (``_trio/_slice.py``). A process that shares the server's cores
            (its clients, a proxy, a load generator) and wakes while the
            server is busy then waits at most this long for the core, and
            the server woken by a request may preempt a process with a
            longer slice; on a core of its own nothing changes. None (the
            default) leaves the kernel's slice; where the kernel takes none,
            the server says so once at start-up and runs on.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    backlog: int | None = None
    idle_timeout_s: float = 30.0
    head_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    write_timeout_s: float = 30.0
    max_requests_per_connection: int = 1000
    max_body_bytes: int = 4 * MiB
    max_receiving_bytes: int = 64 * MiB
    max_head_bytes: int = 16 * KiB
    max_request_line_bytes: int = 8 * KiB
    max_header_count: int = 100
    receive_chunk_bytes: int = 64 * KiB
    shutdown_timeout_s: float = 10.0
    drain_delay_s: float = 0.0
    max_connections: int | None = None
    max_connections_per_address: int | None = None
    slow_heads_threshold: int | None = None
    forwarded_allow_ips: tuple[str, ...] = ()
    reuse_port: bool = False
    trio_tweaks: bool = True
    batch_end_sends: bool = True
    gc_full_interval_s: float | None = 60.0
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_keyfile_password: str | None = field(default=None, metadata={"secret": True})
    ssl_ca_certs: str | None = None
    ssl_cert_reqs: str = "none"
    ssl_handshake_timeout_s: float = 10.0
    gc_freeze: bool = True
    malloc_trim: bool = True
    sched_slice_us: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, not {self.port}")
        for name in ("backlog", "max_connections", "max_connections_per_address"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be at least 1 (or None), not {value!r}")
        threshold = self.slow_heads_threshold
        if threshold is not None and not (isinstance(threshold, int) and threshold >= 2):
            raise ValueError(f"slow_heads_threshold must be at least 2 (or None), not {threshold}")
        for proxy in self.forwarded_allow_ips:
            try:
                ipaddress.ip_network(proxy.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"forwarded_allow_ips: not an IP address or network: {proxy!r}"
                ) from None
        low, high = SLICE_US_RANGE
        slice_us = self.sched_slice_us
        if slice_us is not None and not (isinstance(slice_us, int) and low <= slice_us <= high):
            raise ValueError(
                f"sched_slice_us must be {low} to {high:,} microseconds (or None), not {slice_us!r}"
            )
        if not (self.drain_delay_s >= 0 and math.isfinite(self.drain_delay_s)):
            raise ValueError(
                f"drain_delay_s must be a number of seconds, 0 or more, not {self.drain_delay_s}"
            )
        interval = self.gc_full_interval_s
        if interval is not None and not (interval > 0 and math.isfinite(interval)):
            raise ValueError(
                f"gc_full_interval_s must be a positive number of seconds or None, not {interval}"
            )
        for name in (
            "idle_timeout_s",
            "head_timeout_s",
            "body_timeout_s",
            "write_timeout_s",
            "shutdown_timeout_s",
            "ssl_handshake_timeout_s",
        ):
            value = getattr(self, name)
            if not (value > 0 and not math.isnan(value)):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        for name in (
            "max_requests_per_connection",
            "max_body_bytes",
            "max_receiving_bytes",
            "max_head_bytes",
            "max_request_line_bytes",
            "max_header_count",
            "receive_chunk_bytes",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if self.reuse_port and not hasattr(socket, "SO_REUSEPORT"):
            raise ValueError("reuse_port is not available on this platform")
        if self.max_request_line_bytes > self.max_head_bytes:
            raise ValueError("max_request_line_bytes cannot exceed max_head_bytes")
        self._check_tls()

    def _check_tls(self) -> None:
        if self.ssl_cert_reqs not in ("none", "optional", "required"):
            raise ValueError(
                'ssl_cert_reqs must be "none", "optional" or "required", '
                f"not {self.ssl_cert_reqs!r}"
            )
        if self.ssl_certfile is None:
            for name in ("ssl_keyfile", "ssl_keyfile_password", "ssl_ca_certs"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs ssl_certfile (TLS is off without it)")
            if self.ssl_cert_reqs != "none":
                raise ValueError("ssl_cert_reqs needs ssl_certfile (TLS is off without it)")
            return
        if self.ssl_cert_reqs == "none" and self.ssl_ca_certs is not None:
            raise ValueError(
                "ssl_ca_certs is only used to check client certificates: set ssl_cert_reqs to "
                '"optional" or "required"'
            )
        if self.ssl_cert_reqs != "none" and self.ssl_ca_certs is None:
            raise ValueError(
                f"ssl_cert_reqs {self.ssl_cert_reqs!r} needs ssl_ca_certs (the CA file that "
                "client certificates are checked against)"
            )


def _check_redis_url(url: str) -> None:
    """`MCPConfig.redis_url`: "" or a ``redis://``/``rediss://`` URL without a
    password (a URL is printed and may be a flag; the password is a secret field)."""
    if not url:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError(f"redis_url must be redis://host[:port][/db] or rediss://..., not {url!r}")
    if parts.password is not None:
        raise ValueError("redis_url must not carry a password: set redis_password instead")
    try:
        parts.port  # noqa: B018 (urlsplit checks the port when it is read)
    except ValueError as error:
        raise ValueError(f"redis_url has a bad port: {error}") from None
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"redis_url's path must be a database number, not {parts.path!r}")


@dataclass(frozen=True, slots=True)
class MCPConfig:
    """How the MCP endpoint behaves on top of the HTTP server.

    Attributes:
        http: the HTTP server settings (bind address, limits, time limits).
        path: the endpoint; ``path + "/"`` answers the same, without a redirect.
        eras: which protocol generations the endpoint serves: ``"both"`` (the
            2025 revisions with sessions and the stateless 2026-07-28 one, told
            apart per request), ``"legacy"`` (2024-11-05 to 2025-11-25 only) or
            ``"modern"`` (2026-07-28 only: GET and DELETE get 405).
        json_response_only: always answer a request with one JSON object,
            never a stream (progress and log messages are then not sent).
        stateless: serve requests without a session (no initialize needed);
            initialize still works but mints no session id.
        max_sessions: live sessions at most. Beyond, an initialize ends the
            longest-idle session (idle for two sweeps) of a client holding two
            more than its own, or gets 503.
        max_sessions_per_client: live sessions of one client at most: one
            principal, or one address (IPv6: one /64) for requests without
            one; None is a quarter of ``max_sessions``. Initialize beyond gets
            429. Both refusals carry ``Retry-After``: when the first of the
            sessions in the way could expire.
        session_idle_timeout_s: a session unused this long ends (time inside a
            running request does not count). Checked at each sweep (every
            10 s, or a quarter of this or of event_buffer_age_s when that is
            shorter); a session may last up to three sweeps longer, never less.
        allowed_origins: Origin values (``https://app.example``) browsers may
            call from; ``*`` allows any. Loopback origins are always allowed
            when the server is bound to loopback.
        allowed_hosts: Host names (without port) the server answers to; empty
            means loopback names only when bound to loopback, else any.
        keepalive_s: SSE comment keepalives on an idle GET stream this often;
            a client that closes its end is noticed at once (an idle stream's
            socket is watched), one that vanishes without closing when a
            keepalive fails.
        stream_slow_answers_after_s: a POST request (2025 revisions and
            2026-07-28) whose handler has sent nothing for this long has its
            answer turned into an SSE stream that carries a comment keepalive
            every ``keepalive_s`` and ends with the answer, so that a proxy
            that cuts responses silent for a minute (nginx's
            ``proxy_read_timeout`` is 60 s) does not cut a long call; the
            stream's events are kept for resumption like any POST stream's.
            None answers with one JSON object however long the call takes;
            ``json_response_only`` turns this off too. Checked at the
            server's time-limit ticks, so the stream starts up to a second
            later than this. Keep it and ``keepalive_s`` below the proxy's
            idle timeout.
        stream_queue_bytes: the bound of what waits for one slow client on a
            GET, listen or HTTP+SSE stream (the frames' bytes); a client that
            falls further behind is dropped from that stream and must resume
            (or listen again). A frame larger than the bound still passes
            when nothing else waits.
        max_answering_per_session: how many requests of one 2024-11-05 HTTP+SSE
            session may be running or waiting for its stream at once; a POST
            beyond gets 429 with ``Retry-After``, so a client that posts and
            never reads cannot make the server hold a task per post.
        max_requests_per_session: how many requests of one session may run
            at once (in this process); one beyond is refused with HTTP 429
            and ``Retry-After`` when it is a POST's only request, else with
            the JSON-RPC error -31429 whose ``data.retryAfterSeconds`` says
            when to try again.
        max_client_requests_per_session: how many requests the server sent
            one session's client (elicitation, sampling, roots) may wait for
            answers at once; the handler asking for one more gets the
            -31429 error.
        max_listen_subscriptions: the resources one subscriptions/listen
            stream may subscribe to; a listen that asks for more is answered
            400 (-32602).
        sse_retry_ms: the ``retry:`` hint (2025-11-25) sent when a stream opens
            and before the server closes a stream's connection on purpose.
        event_buffer_events, event_buffer_bytes, event_buffer_age_s: the bounds
            of each stream's buffer of events kept for clients that resume.
        event_buffer_session_bytes: the bound of all of a session's buffers
            together (event data plus 128 bytes per event); the oldest streams
            are dropped whole first. Memory for resumption is at most
            sessions x this.
        cache_ttl_ms, cache_scope: the cache hints (``ttlMs``, ``cacheScope``)
            on the cacheable 2026-07-28 results (discover, the lists, reads).
        cache_hints: per method overrides, e.g. ``{"tools/list": (60000,
            "public")}``; a resource registered with its own hints uses those.
        request_state_keys: HMAC keys that seal 2026-07-28 ``requestState``;
            the first seals, all are accepted (rotation). Give the same keys to
            every worker and replica; empty means a random key per process.
        request_state_ttl_s: how long a sealed ``requestState`` stays valid.
        legacy_sse: serve the 2024-11-05 HTTP+SSE transport beside the endpoint.
        sse_path: its event stream (GET), which announces the POST URL.
        messages_path: its POST URL (``?session_id=...`` is added).
        request_timeout_s: a request still running after this long is
            cancelled (up to half a second later), in every era, so a hung
            handler cannot keep a session or a connection for ever; its client
            gets the error -32603 where the answer would have gone (the JSON
            body, the last event of its stream, a session's event buffer for
            a resume, the HTTP+SSE stream), and the connection closes.
        client_request_timeout_s: how long a handler waits for the client to
            answer a request it sent (elicitation, sampling, roots) unless the
            call gives its own timeout.
        traces: a server span for each MCP request through the OpenTelemetry
            API (the ``otel`` extra), after the semantic conventions for MCP,
            its parent the trace context in the request's ``params._meta``;
            the spans go to the tracer provider the process set up. Off,
            nothing of it is built.
        health_path: answers 200 while the process serves (liveness); None
            turns it off. GET and HEAD only; answered before authentication
            and before the Origin and Host checks (a load balancer's probe
            sends an address as its Host), with ``Cache-Control: no-store``.
        ready_path: answers 200 while the server accepts new work, 503 from
            the first moment of a graceful shutdown (readiness); None turns
            it off. As ``health_path`` otherwise.
        metrics_path: where GET answers Prometheus metrics (``/metrics``,
            say); None (the default) keeps no metrics at all. Needs the
            ``metrics`` extra (prometheus_client). Not authenticated, like a
            health check: keep it off public networks.
        access_log: write one line per JSON-RPC request (time, client,
            principal, protocol version, method, tool/prompt/resource, HTTP
            status, JSON-RPC code, duration, a short hash of the session id).
        access_log_format: ``"text"`` (one space-separated line) or ``"json"``
            (one JSON object a line).
        access_log_sample: the fraction of requests logged (0 < x <= 1).
        access_log_path: the file lines are appended to; None is stderr.
        access_log_buffer_lines: the lines that may wait for the log's writer
            thread; beyond, lines are dropped and counted (a slow disk or a
            full pipe never slows requests down).
        owner_name: the short name (1 to 16 of ``A-Za-z0-9-``) this process
            writes, signed, into the session ids it mints, so that every
            process of its group can tell which one owns a session and a load
            balancer can route on it; "" (the default) mints plain ids.
        peer_sockets_dir: a directory in which each process of a
            ``--workers`` group listens on ``<owner_name>.sock`` for the
            requests the others pass to a session's owner; "" (the default)
            passes nothing on.
        redis_url: share sessions, event buffers and the notification bus
            with every process given the same URL, through Redis
            (``redis://host:port/db``, or ``rediss://`` for TLS; the ``redis``
            extra); "" (the default) keeps everything in this process. The
            URL carries no password: that is ``redis_password``.
        redis_password: the Redis password (a secret: the environment, the
            configuration file or ``--redis-password-file``); "" sends none.
        redis_session_cache_s: how long this process answers from its own
            copy of a session record it read from Redis before reading it
            again; a change another process made (log level, resource
            subscriptions, a DELETE) reaches this one at once through Redis
            pub/sub, and after at most this long when pub/sub is down.
        peer_broadcast_queue_bytes: in a ``--workers`` group without
            ``redis_url``, each notification sent to every session goes once
            to every other worker (over ``<owner_name>.fanout`` in
            ``peer_sockets_dir``); this is the most bytes of them that may wait
            for one worker that reads too slowly, and the largest one passed
            on. Beyond, that worker's sessions miss it (counted and logged).
            With ``redis_url``, the most bytes of them waiting to be published
            to the other processes.
    """

    http: ServerConfig = ServerConfig()
    path: str = "/mcp"
    eras: str = "both"
    json_response_only: bool = False
    stateless: bool = False
    max_sessions: int = 1024
    max_sessions_per_client: int | None = None
    session_idle_timeout_s: float = 1800.0
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    client_request_timeout_s: float = 300.0
    request_timeout_s: float = 3600.0
    keepalive_s: float = 15.0
    stream_slow_answers_after_s: float | None = 10.0
    event_buffer_events: int = 256
    event_buffer_bytes: int = 256 * 1024
    event_buffer_age_s: float = 120.0
    event_buffer_session_bytes: int = 1024 * 1024
    cache_ttl_ms: int = 0
    cache_scope: str = "private"
    cache_hints: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    request_state_keys: tuple[str, ...] = field(default=(), metadata={"secret": True})
    request_state_ttl_s: float = 600.0
    legacy_sse: bool = True
    sse_path: str = "/sse"
    messages_path: str = "/messages"
    sse_retry_ms: int = 1000
    stream_queue_bytes: int = 1024 * 1024
    max_answering_per_session: int = 64
    max_requests_per_session: int = 128
    max_client_requests_per_session: int = 64
    max_listen_subscriptions: int = 1000
    traces: bool = False
    health_path: str | None = "/healthz"
    ready_path: str | None = "/readyz"
    metrics_path: str | None = None
    access_log: bool = False
    access_log_format: str = "text"
    access_log_sample: float = 1.0
    access_log_path: str | None = None
    access_log_buffer_lines: int = 10_000
    owner_name: str = ""
    peer_sockets_dir: str = ""
    redis_url: str = ""
    redis_password: str = field(default="", metadata={"secret": True})
    redis_session_cache_s: float = 1.0
    peer_broadcast_queue_bytes: int = 1024 * 1024

    @property
    def sessions_per_client(self) -> int:
        """One client's share of the sessions (`max_sessions_per_client` resolved)."""
        share = self.max_sessions_per_client
        return share if share is not None else max(1, self.max_sessions // 4)

    def __post_init__(self) -> None:
        if (
            self.event_buffer_events < 1
            or self.event_buffer_bytes < 1
            or self.event_buffer_session_bytes < 1
        ):
            raise ValueError("event buffers must hold at least one event and one byte")
        if not self.event_buffer_age_s > 0:
            raise ValueError("event_buffer_age_s must be positive")
        if self.eras not in ("both", "legacy", "modern"):
            raise ValueError('eras must be "both", "legacy" or "modern"')
        if self.cache_ttl_ms < 0:
            raise ValueError("cache_ttl_ms must not be negative")
        for ttl, scope in [(self.cache_ttl_ms, self.cache_scope), *self.cache_hints.values()]:
            if ttl < 0 or scope not in ("public", "private"):
                raise ValueError('cache hints need ttlMs >= 0 and a scope "public" or "private"')
        for name in (
            "max_answering_per_session",
            "max_requests_per_session",
            "max_client_requests_per_session",
            "max_listen_subscriptions",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.stream_queue_bytes < 1:
            raise ValueError("stream_queue_bytes must be at least 1")
        if not self.keepalive_s > 0:
            raise ValueError("keepalive_s must be positive")
        slow = self.stream_slow_answers_after_s
        if slow is not None and not (slow > 0 and not math.isinf(slow)):
            raise ValueError(
                f"stream_slow_answers_after_s must be a positive number of seconds or None, "
                f"not {slow}"
            )
        if self.sse_retry_ms < 0:
            raise ValueError("sse_retry_ms must not be negative")
        if not self.client_request_timeout_s > 0:
            raise ValueError("client_request_timeout_s must be positive")
        if not self.request_timeout_s > 0:
            raise ValueError("request_timeout_s must be positive")
        if not self.path.startswith("/") or self.path.endswith("/"):
            raise ValueError(f"path must start with / and not end with one, not {self.path!r}")
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if self.max_sessions_per_client is not None and self.max_sessions_per_client < 1:
            raise ValueError("max_sessions_per_client must be at least 1 (or None)")
        if not self.session_idle_timeout_s > 0:
            raise ValueError("session_idle_timeout_s must be positive")
        if self.access_log_format not in ("text", "json"):
            raise ValueError('access_log_format must be "text" or "json"')
        if not 0 < self.access_log_sample <= 1:
            raise ValueError("access_log_sample must be above 0 and at most 1")
        if self.access_log_buffer_lines < 1:
            raise ValueError("access_log_buffer_lines must be at least 1")
        if self.owner_name and not _OWNER_NAME.fullmatch(self.owner_name):
            raise ValueError(
                f"owner_name must be 1 to 16 of A-Za-z0-9- (or empty), not {self.owner_name!r}"
            )
        if self.peer_sockets_dir and not self.owner_name:
            raise ValueError("peer_sockets_dir needs an owner_name")
        _check_redis_url(self.redis_url)
        if not 0 <= self.redis_session_cache_s <= 60:
            raise ValueError("redis_session_cache_s must be between 0 and 60")
        if self.peer_broadcast_queue_bytes < 4096:
            raise ValueError("peer_broadcast_queue_bytes must be at least 4096")
        self._check_probe_paths()

    def _check_probe_paths(self) -> None:
        """The health, readiness and metrics paths: absolute, distinct, and not taken
        by a path the endpoint serves (which is matched first)."""
        taken = {self.path, self.path + "/"}
        if self.legacy_sse and self.eras != "modern":
            taken |= {self.sse_path, self.messages_path}
        for name in ("health_path", "ready_path", "metrics_path"):
            probe = getattr(self, name)
            if probe is None:
                continue
            if not probe.startswith("/"):
                raise ValueError(f"{name} must start with / (or be None), not {probe!r}")
            if probe in taken:
                raise ValueError(f"{name} {probe!r} is a path the endpoint already serves")
            taken.add(probe)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What ``trio-mcp run`` serves and how it logs, around the endpoint's settings.

    Attributes:
        app: the application to serve: ``file.py[:attr]`` or
            ``package.module[:attr]`` (without ``:attr``, the first of ``mcp``,
            ``server`` and ``app`` that is a `Server`).
        transport: ``http`` (serve on host and port) or ``stdio`` (serve one
            client on stdin and stdout until stdin ends; the HTTP settings do
            not apply).
        log_level: the level of the process's log: debug, info, warning or error.
        log_format: ``text`` (a line per record) or ``json`` (one JSON object a
            line: time, level, logger, message, and the traceback if any).
        log_config: a logging configuration file that replaces log_level and
            log_format: ``.json`` (`logging.config.dictConfig`) or ``.ini``
            (`logging.config.fileConfig`).
        mcp: the endpoint's settings (`MCPConfig`).
        workers: how many processes serve (HTTP only): 1 (the default) is
            this process alone; more starts a supervisor that runs that many
            worker processes on one port, watches them, restarts one that
            dies or stops answering, restarts them one at a time on SIGHUP
            and drains them all on SIGTERM or SIGINT (README, "Workers").
        worker_heartbeat_timeout_s: with ``workers`` above 1, a worker whose
            trio scheduler has not answered the supervisor's heartbeat for
            this long (a handler blocking the process, say) is killed and
            replaced.
        worker_start_timeout_s: with ``workers`` above 1, how long a worker
            may take from its start to listening (importing the application
            included) before it is killed and counts as a failed start.
        worker_connection_slack: with ``workers`` above 1, the most
            connections a worker may hold beyond the least loaded other
            worker: one that accepts a connection while it holds this many
            more passes it, before reading from it, to that worker, so that
            connections spread evenly whatever the kernel's hash does (README,
            "Connections spread over the workers"). None: no passing, the
            kernel's spread alone.
        worker_cpu_affinity: with ``workers`` above 1, on Linux: run worker
            i on the i-th CPU this process may use (in turn, when there are
            more workers than CPUs) and have the kernel give each new
            connection to the worker on the CPU that received it, so that a
            connection's packets and its requests are handled on one CPU
            (README, "CPU affinity"). Off by default: a pinned worker cannot
            move away from a CPU that other programs keep busy.
    """

    app: str = ""
    transport: str = "http"
    log_level: str = "info"
    log_format: str = "text"
    log_config: str | None = None
    mcp: MCPConfig = MCPConfig()
    workers: int = 1
    worker_heartbeat_timeout_s: float = 20.0
    worker_start_timeout_s: float = 60.0
    worker_connection_slack: int | None = 2
    worker_cpu_affinity: bool = False

    def __post_init__(self) -> None:
        if self.transport not in ("http", "stdio"):
            raise ValueError(f'transport must be "http" or "stdio", not {self.transport!r}')
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.workers > 1 and self.transport != "http":
            raise ValueError("workers above 1 serve HTTP only (transport is stdio)")
        for name in ("worker_heartbeat_timeout_s", "worker_start_timeout_s"):
            value = getattr(self, name)
            if not (value > 0 and not math.isinf(value)):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        if self.worker_connection_slack is not None and self.worker_connection_slack < 1:
            raise ValueError(
                "worker_connection_slack must be at least 1 (or None: off), "
                f"not {self.worker_connection_slack}"
            )
        if self.worker_cpu_affinity and not hasattr(os, "sched_setaffinity"):
            raise ValueError("worker_cpu_affinity needs Linux (os.sched_setaffinity)")
        if self.log_level not in ("debug", "info", "warning", "error"):
            raise ValueError(
                f"log_level must be debug, info, warning or error, not {self.log_level!r}"
            )
        if self.log_format not in ("text", "json"):
            raise ValueError(f'log_format must be "text" or "json", not {self.log_format!r}')
        if self.log_config is not None and not self.log_config.endswith(
            (".json", ".ini", ".conf", ".cfg")
        ):
            raise ValueError(
                f"log_config must be a .json (dictConfig) or .ini (fileConfig) file, "
                f"not {self.log_config!r}"
            )
