from __future__ import annotations

# The MCP server fixtures live with the endpoint tests.
from mcp_fixtures import everything, start_mcp  # noqa: F401
