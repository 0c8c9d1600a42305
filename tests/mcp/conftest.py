from __future__ import annotations

from mcp_fixtures import everything, mcp_port, start_mcp  # noqa: F401
