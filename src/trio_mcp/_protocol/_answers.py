"""HTTP answers that carry JSON: a JSON-RPC body with its status.

Sans-IO. `rejection_response` is the one place a `Rejection` becomes bytes to
send, and `error_status` gives the status of an error *answer* from the table
in `_jsonrpc`, so the transports never pick a status for an error themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .._errors import MCPError, Rejection, SessionsFull
from .._http._connection import Headers, Response
from .._json import dumps
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    TOO_MANY_REQUESTS,
    RequestId,
    error_message,
)

JSON_HEADERS: Final = [(b"content-type", b"application/json")]
FORBIDDEN: Final = "Forbidden: not authorized for this request"
#: The scope challenge that goes with an authorization refusal (RFC 6750 3.1).
INSUFFICIENT_SCOPE: Final = [(b"www-authenticate", b'Bearer error="insufficient_scope"')]


def rejection_response(rejection: Rejection, cors: Headers | None = None) -> Response:
    """The answer to a refused request: its status, headers and JSON-RPC error."""
    body = dumps(error_message(rejection.request_id, rejection.error))
    headers = JSON_HEADERS + rejection.headers
    if cors:
        headers += cors
    return Response(rejection.status, headers, body)


def refuse(status: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> Rejection:
    """A transport rule's refusal: HTTP `status`, JSON-RPC -32600 and `message`."""
    return Rejection(status, MCPError(INVALID_REQUEST, message), headers)


def forbidden(request_id: RequestId | None, cors: Headers) -> Response:
    """The 403 for a request the application's authorize hook refuses."""
    error = MCPError(INVALID_REQUEST, FORBIDDEN)
    return rejection_response(Rejection(403, error, INSUFFICIENT_SCOPE, request_id), cors)


#: When a client refused for a quota of running requests may try again: a
#: request that ran into the quota usually waits on a slow handler, and how long
#: that takes the server cannot know, so this is a guess, not a promise.
RUNNING_RETRY_S: Final = 1


def too_many(
    request_id: RequestId | None, message: str, retry_s: int = RUNNING_RETRY_S
) -> Rejection:
    """A quota's refusal: 429 with ``Retry-After`` where the response has not
    started, else (its ``error``) the JSON-RPC error -31429 with
    ``data.retryAfterSeconds``."""
    error = MCPError(TOO_MANY_REQUESTS, message, {"retryAfterSeconds": retry_s})
    return Rejection(429, error, [(b"retry-after", b"%d" % retry_s)], request_id)


def sessions_full(full: SessionsFull) -> Rejection:
    """The refusal of a new session: 503 when the session table is full, 429
    when the client has its share of it; ``Retry-After`` is when the first of
    those sessions could expire."""
    retry = [(b"retry-after", b"%d" % full.retry_after_s)]
    if full.per_client:
        message = "Too many requests: this client has its share of sessions"
        data = {"retryAfterSeconds": full.retry_after_s}
        return Rejection(429, MCPError(TOO_MANY_REQUESTS, message, data), retry)
    return Rejection(503, MCPError(INTERNAL_ERROR, "Service Unavailable: too many sessions"), retry)
