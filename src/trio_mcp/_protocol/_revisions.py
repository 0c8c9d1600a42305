"""MCP protocol revisions this server speaks, and how a version is agreed."""

from __future__ import annotations

from typing import Final

#: Revisions with the initialize handshake and sessions, oldest first.
LEGACY_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_LEGACY: Final = LEGACY_VERSIONS[-1]
#: What a request without MCP-Protocol-Version speaks when nothing else tells.
HEADERLESS_VERSION: Final = "2025-03-26"
#: The only revision where a POST body may be a JSON-RPC batch.
BATCH_VERSION: Final = "2025-03-26"


def negotiate(requested: object) -> str:
    """The version to answer an initialize with: the client's if we speak it,
    else our newest (a counter-offer; initialize never fails over a version)."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_LEGACY


def at_least(version: str, minimum: str) -> bool:
    """Whether `version` is `minimum` or newer (revisions are dates)."""
    return version >= minimum
