"""What the server says about itself: ``serverInfo`` and the answer to ``initialize``.

Shared by the transports that answer an initialize (the 2025 POST, the
2024-11-05 HTTP+SSE message) and the 2026-07-28 results, which carry
``serverInfo`` in their ``_meta``.
"""

from __future__ import annotations

from typing import Any

from .._app._server import Server
from .._errors import MCPError
from .._protocol._jsonrpc import INVALID_PARAMS
from .._protocol._revisions import negotiate


class Handshake:
    """``serverInfo`` (one shared dict, rebuilt when the app's name, version or
    title changes) and the InitializeResult of one application."""

    __slots__ = ("app", "_server_info_key", "_server_info")

    def __init__(self, app: Server) -> None:
        self.app = app
        self._server_info_key: tuple[str, str, str | None] | None = None
        self._server_info: dict[str, Any] = {}

    def server_info(self) -> dict[str, Any]:
        """The serverInfo object (callers must not modify it)."""
        app = self.app
        name, version, title = app.name, app.version, app.title
        key = self._server_info_key
        # (identity, not equality: no tuple to build per request; a new but
        # equal value only rebuilds the dict once)
        if key is None or key[0] is not name or key[1] is not version or key[2] is not title:
            info: dict[str, Any] = {"name": name, "version": version}
            if title is not None:
                info["title"] = title
            self._server_info_key, self._server_info = (name, version, title), info
        return self._server_info

    def initialize_result(
        self, params: dict[str, Any]
    ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(version, client capabilities, client info, InitializeResult) for an
        initialize with `params`; MCPError -32602 when it lacks what it must carry."""
        capabilities = dict.get(params, "capabilities")
        client_info = dict.get(params, "clientInfo")
        if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
            raise MCPError(
                INVALID_PARAMS, "Invalid params: capabilities and clientInfo are required"
            )
        version = negotiate(dict.get(params, "protocolVersion"))
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.app.shared_capabilities(),
            "serverInfo": self.server_info(),
        }
        if self.app.instructions is not None:
            result["instructions"] = self.app.instructions
        return version, capabilities, client_info, result
