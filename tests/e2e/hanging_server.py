"""A server for the second-signal test: ``python hanging_server.py PORT``.

Its drain delay and shutdown time are a minute each, and its one tool never
returns, so only a second signal ends it soon.
"""

from __future__ import annotations

import logging
import sys

import trio

from trio_mcp import MCPConfig, Server, ServerConfig, run_mcp

app = Server("hanging")


@app.tool()
async def hang() -> str:
    await trio.sleep_forever()
    return "never"  # pragma: no cover


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    http = ServerConfig(port=int(sys.argv[1]), drain_delay_s=60.0, shutdown_timeout_s=60.0)
    run_mcp(app, MCPConfig(http=http))
