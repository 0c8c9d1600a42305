"""The one exception hierarchy of trio-mcp.

Peer mistakes are `RemoteProtocolError`, carrying the HTTP status to answer;
our own misuse of the protocol is `LocalProtocolError`. Compiled modules raise
these same classes (they import them from here), so both implementations of
every hot function fail in the same way.
"""

from __future__ import annotations


class TrioMCPError(Exception):
    """Base class of every error trio-mcp raises on purpose."""


class RemoteProtocolError(TrioMCPError):
    """The peer broke the HTTP rules; answer with `status`, then close."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status

    def __repr__(self) -> str:
        return f"RemoteProtocolError({str(self)!r}, status={self.status})"


class LocalProtocolError(TrioMCPError):
    """Our side (an application) tried something the protocol forbids."""


class HeaderValueError(TrioMCPError, ValueError):
    """A header value is not acceptable: bad characters or a bad sentinel.

    The caller knows which header it was and wraps this into the answer the
    protocol revision requires (for example 400 with JSON-RPC -32020).
    """


class MCPError(TrioMCPError):
    """A JSON-RPC error to answer with: `code`, `message` and optional `data`.

    Raise it from a handler to send a deliberate error to the client; any
    other exception from a handler is answered as an internal error without
    its details.
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"MCPError({self.code}, {self.message!r})"
