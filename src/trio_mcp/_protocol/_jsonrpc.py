"""JSON-RPC 2.0 as MCP uses it: bodies in, classified messages out; results in, bytes out.

Sans-IO: no trio, no sockets. `decode_body` turns a POST body into messages
(one, or a batch where the protocol revision allows it) and says exactly what
was wrong with anything it cannot accept; the `*_bytes` helpers serialize
answers with orjson, ready for the socket.

MCP narrows JSON-RPC in a few places that are enforced here: a request id is
a string or an integer and never null; ``params`` is an object when present.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from .._errors import MCPError
from .._json import JSONDecodeError, dumps, loads

# JSON-RPC codes, and the ones MCP defines.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002  # up to 2025-11-25
URL_ELICITATION_REQUIRED: Final = -32042  # 2025-11-25
HEADER_MISMATCH: Final = -32020  # 2026-07-28
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021  # 2026-07-28
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022  # 2026-07-28
#: Ours, outside JSON-RPC's reserved range (its digits say HTTP 429): a quota
#: refused the request; ``data.retryAfterSeconds`` says when to try again.
TOO_MANY_REQUESTS: Final = -31429

RequestId = str | int

logger = logging.getLogger("trio_mcp.endpoint")

#: The eras of the protocol, as the status table knows them: the revisions with
#: sessions (2024-11-05 to 2025-11-25) and the stateless 2026-07-28.
SESSIONS: Final = "sessions"
MODERN: Final = "modern"

#: The HTTP status of an answer that carries a JSON-RPC error, by era and code
#: (digest 3.7). On 2026-07-28 an unknown method and the envelope errors are
#: HTTP errors too; every other error, and every error answer of the session
#: eras, is a successful exchange (200) whose body says what failed. Refusals
#: before a request runs (a bad body, a missing session) are `Rejection`s that
#: carry their own status, since one code (-32600) goes with many of them.
ERROR_STATUS: Final[dict[str, dict[int, int]]] = {
    MODERN: {
        METHOD_NOT_FOUND: 404,
        HEADER_MISMATCH: 400,
        MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        UNSUPPORTED_PROTOCOL_VERSION: 400,
    },
    SESSIONS: {},
}


def error_status(era: str, code: int) -> int:
    """The HTTP status of an error answer with JSON-RPC `code` in `era`."""
    return dict.get(ERROR_STATUS[era], code, 200)


class RPCRequest:
    """A JSON-RPC request: it has an id and wants exactly one response."""

    __slots__ = ("id", "method", "params")

    def __init__(self, id: RequestId, method: str, params: dict[str, Any]) -> None:
        self.id = id
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"<RPCRequest id={self.id!r} {self.method}>"


class Notification:
    """A JSON-RPC notification: no id, no response."""

    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    def __repr__(self) -> str:
        return f"<Notification {self.method}>"


class RPCResponse:
    """A JSON-RPC response from the peer (to a request the server sent it)."""

    __slots__ = ("id", "result", "error")

    def __init__(
        self, id: RequestId, result: Any = None, error: dict[str, Any] | None = None
    ) -> None:
        self.id = id
        self.result = result
        self.error = error

    def __repr__(self) -> str:
        kind = "error" if self.error is not None else "result"
        return f"<RPCResponse id={self.id!r} {kind}>"


class Invalid:
    """A batch element that is not a valid message; answered with an error.

    `id` is the element's id when it could be read (so the answer can name
    it), else None.
    """

    __slots__ = ("id", "error")

    def __init__(self, id: RequestId | None, error: MCPError) -> None:
        self.id = id
        self.error = error


Message = RPCRequest | Notification | RPCResponse


def decode_body(body: bytes, *, allow_batch: bool) -> tuple[list[Message | Invalid], bool]:
    """Parse a POST body into messages; returns them and whether it was a batch.

    Raises MCPError for a body that yields no message at all: -32700 when it
    is not JSON, -32600 when it is JSON but not a message (or an array where
    batches are not allowed, or an empty array). A batch may mix valid
    messages with `Invalid` ones; a single invalid message raises.
    """
    try:
        data = loads(body)
    except (JSONDecodeError, RecursionError):
        raise MCPError(PARSE_ERROR, "Parse error: the body is not valid JSON") from None
    if isinstance(data, list):
        if not allow_batch:
            raise MCPError(INVALID_REQUEST, "Invalid request: batches are not supported")
        if not data:
            raise MCPError(INVALID_REQUEST, "Invalid request: empty batch")
        return [_classify_lenient(item) for item in data], True
    message = _classify(data)
    return [message], False


def _classify_lenient(data: object) -> Message | Invalid:
    try:
        return _classify(data)
    except MCPError as exc:
        return Invalid(_readable_id(data), exc)


def _readable_id(data: object) -> RequestId | None:
    if isinstance(data, dict):
        id = dict.get(data, "id")
        if isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool)):
            return id
    return None


def _classify(data: object) -> Message:
    if not isinstance(data, dict):
        raise MCPError(INVALID_REQUEST, "Invalid request: a message must be a JSON object")
    if dict.get(data, "jsonrpc") != "2.0":
        raise MCPError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
    method = dict.get(data, "method")
    has_id = "id" in data
    id = _readable_id(data)
    if has_id and id is None:
        raise MCPError(INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
    if method is None:
        if id is None:
            raise MCPError(INVALID_REQUEST, 'Invalid request: no "method" and no "id"')
        return _response(data, id)
    if not isinstance(method, str):
        raise MCPError(INVALID_REQUEST, 'Invalid request: "method" must be a string')
    params = dict.get(data, "params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        if has_id:
            raise MCPError(INVALID_PARAMS, 'Invalid params: "params" must be an object')
        raise MCPError(INVALID_REQUEST, 'Invalid request: "params" must be an object')
    if id is not None:
        return RPCRequest(id, method, params)
    return Notification(method, params)


def _response(data: dict[str, Any], id: RequestId) -> RPCResponse:
    has_result = "result" in data
    error = data.get("error")
    if has_result == ("error" in data):
        raise MCPError(
            INVALID_REQUEST, 'Invalid request: a response has exactly one of "result", "error"'
        )
    if not has_result and not (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    ):
        raise MCPError(
            INVALID_REQUEST, 'Invalid request: "error" needs an integer code and a message'
        )
    try:  # what the server cannot pass on (to a tool's answer, say) is refused here
        dumps(error if error is not None else data["result"])
    except UNENCODABLE:
        raise MCPError(
            INVALID_REQUEST,
            "Invalid request: the response nests deeper than the server can send on",
        ) from None
    return RPCResponse(id, data.get("result"), error)


# ---- bytes out ----------------------------------------------------------


def answer_bytes(answer: dict[str, Any] | list[dict[str, Any]]) -> bytes:
    """An answer (one response, or a batch's list of them) as JSON.

    A response that JSON cannot carry (nesting deeper than the encoder writes,
    a value with no JSON form) becomes -32603 for its own request, so a bad
    result costs that request its answer and nothing else.
    """
    try:
        return dumps(answer)
    except UNENCODABLE:
        if type(answer) is list:
            return b"[" + b",".join(map(answer_bytes, answer)) + b"]"
        assert type(answer) is dict
        request_id = answer.get("id")
        logger.error("the answer to request %r cannot be encoded as JSON", request_id)
        return dumps(error_message(request_id, NOT_ENCODED))


#: What the encoder raises for a value JSON cannot carry (orjson's error is a TypeError).
UNENCODABLE: Final = (TypeError, ValueError, RecursionError)
#: The error that stands in for an answer JSON cannot carry.
NOT_ENCODED: Final = MCPError(
    INTERNAL_ERROR, "Internal error: the answer cannot be encoded as JSON"
)


def result_bytes(id: RequestId, result: Mapping[str, Any]) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": id, "result": result})


def error_object(error: MCPError) -> dict[str, Any]:
    obj: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        obj["data"] = error.data
    return obj


def error_message(id: RequestId | None, error: MCPError) -> dict[str, Any]:
    """The error response as a dict; ``id`` None when the request's id is unknown."""
    return {"jsonrpc": "2.0", "id": id, "error": error_object(error)}


def error_bytes(id: RequestId | None, error: MCPError) -> bytes:
    return dumps(error_message(id, error))


def notification_bytes(method: str, params: Mapping[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)


def request_bytes(id: RequestId, method: str, params: Mapping[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)
