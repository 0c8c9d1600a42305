"""HTTP answers that carry JSON: a JSON-RPC body with its status.

Sans-IO. `rejection_response` is the one place a `Rejection` becomes bytes to
send, and `error_status` gives the status of an error *answer* from the table
in `_jsonrpc`, so the transports never pick a status for an error themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .._errors import MCPError, Rejection
from .._http._connection import Headers, Response
from .._json import dumps
from ._jsonrpc import INVALID_REQUEST, error_message

JSON_HEADERS: Final = [(b"content-type", b"application/json")]


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
