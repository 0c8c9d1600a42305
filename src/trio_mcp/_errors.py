"""The one exception hierarchy of trio-mcp: every exception type it defines
is here, under `TrioMCPError`.

Peer mistakes are `RemoteProtocolError` (HTTP framing, carrying the status to
answer) or a `Rejection` (an MCP request refused before it runs, carrying the
status and the JSON-RPC error); our own misuse of the protocol is
`LocalProtocolError`; a handler's deliberate error is `MCPError` and a failure
the model should see is `ToolError`. Compiled modules raise these same classes
(they import them from here), so both implementations of every hot function
fail in the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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


class ToolError(TrioMCPError):
    """Raise from a tool to report a failure the model should see (``isError``)."""


class ResourceError(TrioMCPError):
    """Raise from a resource (or a template) to fail the read with this message,
    which the client sees (JSON-RPC -32603); any other exception is answered
    without its details. A `ToolError` raised there counts as one."""


class ResourceNotFound(ResourceError):
    """Raise from a resource template to say there is no such resource: the
    revision's not-found answer (-32002 through 2025-11-25, -32602 on
    2026-07-28, which forbids -32002), with the URI in ``data``."""

    def __init__(self, message: str = "Resource not found") -> None:
        super().__init__(message)


class Rejection(TrioMCPError):
    """A request refused before it runs: answer the HTTP `status` with the
    JSON-RPC `error` in the body (and `headers`), for the request `request_id`
    (None when it is not known, as for an unreadable body).

    Every refusal of the MCP transports is one of these; which status goes with
    which rule is written where the rule is checked (`_protocol/`), and the
    status of an error *answer* comes from `_protocol._jsonrpc.error_status`.
    """

    def __init__(
        self,
        status: int,
        error: MCPError,
        headers: Sequence[tuple[bytes, bytes]] = (),
        request_id: str | int | None = None,
    ) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.headers = list(headers)
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"Rejection({self.status}, {self.error!r})"


class InputRequired(TrioMCPError):
    """Raised inside a handler to answer ``input_required`` (2026-07-28 multi
    round-trip requests); the request runner catches it."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__("input required")
        self.requests = requests


class EventsLost(TrioMCPError):
    """A resumed stream's events after the client's Last-Event-ID are no longer
    all kept: replaying the rest would hide the loss."""

    def __init__(self, stream: int) -> None:
        super().__init__(f"events of stream {stream} were dropped")
        self.stream = stream


class SessionsFull(TrioMCPError):
    """The session table is at its bound (or the client has its share of it)
    and nothing in it has expired; a session may expire in `retry_after_s`."""

    def __init__(self, retry_after_s: int = 1, per_client: bool = False) -> None:
        super().__init__("too many sessions" + (" for this client" if per_client else ""))
        self.retry_after_s = retry_after_s
        self.per_client = per_client


class StartupError(TrioMCPError):
    """The server cannot start: its address is taken or cannot be resolved, a
    file it needs cannot be read. The message says why, in one line; ``run``
    and ``run_mcp`` print it and exit with status 1."""


class SettingError(TrioMCPError, ValueError):
    """A value the configuration cannot take (``trio-mcp run``'s flags,
    environment or file); the message names the setting and its source, in one
    line."""


class UsageError(TrioMCPError):
    """A mistake in ``trio-mcp bench``'s command line; the CLI prints it and
    exits with status 2."""


class PeerProtocolError(TrioMCPError):
    """The server ``trio-mcp bench`` measures sent something that is not a valid
    HTTP/1.1 response."""


class TLSConfigError(StartupError):
    """The TLS settings cannot be used: a certificate, key or CA file that
    cannot be read, holds no such thing, or does not match. Raised at start-up,
    before anything is served; the message is one line that names the setting,
    the file and the reason."""
