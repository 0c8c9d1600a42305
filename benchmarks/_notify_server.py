"""The `examples/everything.py` app plus a ``broadcast`` tool, for memory_streams.py.

    PYTHONPATH=src python benchmarks/_notify_server.py --port P [--backlog 4096]
        [--max-sessions N]

serves http://127.0.0.1:P/mcp until SIGINT or SIGTERM. ``tools/call
broadcast`` calls ``server.notify_tools_changed()``, which sends
``notifications/tools/list_changed`` to the GET stream of every session.
The configuration is the default except the listen backlog and
``max_sessions`` (default 1024, below what the benchmark opens). The
open-files limit is raised to its hard limit first. Every full (generation 2)
garbage collection is logged with its wall-clock time and duration, so the
benchmark can tell a collection pause from the server's own work.
"""

from __future__ import annotations

import argparse
import gc
import logging
import resource
import sys
import time
from pathlib import Path

from trio_mcp import MCPConfig, ServerConfig, run_mcp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from everything import server


@server.tool()
async def broadcast() -> str:
    """Tell every session that the tool list changed."""
    server.notify_tools_changed()
    return "sent"


def raise_nofile() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def log_full_collections(logger: logging.Logger) -> None:
    started = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        elif info["generation"] == 2:
            took = (time.perf_counter() - started[0]) * 1000
            logger.info("gc gen2 at %.3f took %.1f ms", time.time() - took / 1000, took)

    gc.callbacks.append(callback)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backlog", type=int, default=4096)
    parser.add_argument("--max-sessions", type=int, default=MCPConfig().max_sessions)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logger = logging.getLogger("notify_server")
    logger.info("RLIMIT_NOFILE %d", raise_nofile())
    log_full_collections(logger)
    # The one client of memory_streams.py holds every session and stream: its
    # shares are the whole (the connection cap still applies).
    http = ServerConfig(
        host=args.host, port=args.port, backlog=args.backlog, max_connections_per_address=1 << 20
    )
    config = MCPConfig(
        http=http, max_sessions=args.max_sessions, max_sessions_per_client=args.max_sessions
    )
    run_mcp(server, config)


if __name__ == "__main__":
    main()
