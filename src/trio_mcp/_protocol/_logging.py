"""MCP's log levels (``logging/setLevel``, ``notifications/message``)."""

from __future__ import annotations

from typing import Final

#: RFC 5424 severities as MCP names them, least severe first.
LOG_LEVELS: Final = {
    name: rank
    for rank, name in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
