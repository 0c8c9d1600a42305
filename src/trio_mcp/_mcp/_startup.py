"""What a served endpoint says when it starts: one line a person can act on
(where it listens, what it speaks, which build), and a warning for a
configuration that exposes it more than its author likely meant."""

from __future__ import annotations

import logging

from .._config import MCPConfig
from .._protocol._admission import LOOPBACK_BINDS
from .._protocol._envelope import MODERN_VERSIONS
from .._protocol._revisions import LEGACY_VERSIONS
from .._speedups import build_description
from .._trio._server import HTTPServer
from .._version import __version__

logger = logging.getLogger("trio_mcp.endpoint")


def revisions(eras: str) -> str:
    """The MCP revisions an endpoint of `eras` serves, oldest to newest."""
    served = (LEGACY_VERSIONS if eras != "modern" else ()) + (
        MODERN_VERSIONS if eras != "legacy" else ()
    )
    return served[0] if len(served) == 1 else f"{served[0]} to {served[-1]}"


def url(config: MCPConfig, port: int, path: str) -> str:
    """The URL of `path` on the server as bound (the public one may differ
    behind a proxy)."""
    host = config.http.host
    if ":" in host:
        host = f"[{host}]"
    scheme = "https" if config.http.ssl_certfile is not None else "http"
    return f"{scheme}://{host}:{port}{path}"


def announce(config: MCPConfig, server: HTTPServer) -> None:
    """Log the start-up line, and warn when Host checking is off on a
    non-loopback address."""
    announce_group(config, server.ports[0] if server.ports else config.http.port, 1)


def announce_group(config: MCPConfig, port: int, processes: int) -> None:
    """`announce` for `processes` serving on `port` (a ``--workers`` group says
    it once, from its supervisor)."""
    extras = []
    if config.legacy_sse and config.eras != "modern":
        extras.append(f"2024-11-05 HTTP+SSE at {config.sse_path}")
    if config.stateless:
        extras.append("stateless")
    if config.metrics_path is not None:
        extras.append(f"metrics at {config.metrics_path}")
    if config.access_log:
        extras.append(f"access log to {config.access_log_path or 'stderr'}")
    if config.traces:
        extras.append("traces")
    if config.redis_url:
        # (the URL carries no password: MCPConfig refuses one)
        extras.append(f"sessions shared through {config.redis_url}")
    logger.info(
        "trio-mcp %s serving MCP on %s (revisions %s%s; build: %s; %s)",
        __version__,
        url(config, port, config.path),
        revisions(config.eras),
        "".join(f"; {extra}" for extra in extras),
        build_description(),
        "1 process" if processes == 1 else f"{processes} processes",
    )
    if config.http.host not in LOOPBACK_BINDS and not config.allowed_hosts:
        logger.warning(
            "bound to %s with no allowed_hosts: any Host header is accepted, so DNS "
            "rebinding protection is off; set allowed_hosts (--allowed-hosts) to the names "
            "clients use",
            config.http.host,
        )
