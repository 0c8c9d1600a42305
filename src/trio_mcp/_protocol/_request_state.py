"""Multi round-trip requests (2026-07-28): sealed request state.

A handler that needs input from the client answers ``input_required`` with
``inputRequests`` and a ``requestState``; the client retries the same request
with ``inputResponses`` and that state. The state is hostile input on the way
back, so it is sealed: HMAC-SHA256 over a payload that binds the principal,
the method, a digest of the request's own parameters and an expiry. A key
ring lets keys rotate without breaking retries in flight (seal with the
first, accept any), and keys from configuration let several workers or
replicas accept each other's state.

Sans-IO: "now" is an argument.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from typing import Any, Final

from .._errors import MCPError
from .._json import JSONDecodeError, dumps, loads
from ._jsonrpc import INVALID_PARAMS

#: Request parameters that change between rounds and so are not part of the digest.
_ROUND_KEYS: Final = frozenset({"_meta", "inputResponses", "requestState"})


def params_digest(params: dict[str, Any]) -> str:
    """A digest of what identifies the request across rounds (not its round data)."""
    stable = {k: v for k, v in params.items() if k not in _ROUND_KEYS}
    return hashlib.sha256(dumps(_sorted(stable))).hexdigest()


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _principal_tag(principal: object) -> str:
    return hashlib.sha256(repr(principal).encode()).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_BAD_STATE: Final = MCPError(INVALID_PARAMS, "Invalid params: requestState is invalid or expired")


class StateSealer:
    """Seals and opens ``requestState`` values with a ring of HMAC keys."""

    def __init__(self, keys: Sequence[bytes] = (), ttl_s: float = 600.0) -> None:
        self.keys = list(keys) or [secrets.token_bytes(32)]
        self.generated = not keys
        self.ttl_s = ttl_s

    def seal(
        self,
        state: dict[str, Any],
        answers: dict[str, Any],
        *,
        principal: object,
        method: str,
        digest: str,
        now: float,
    ) -> str:
        payload = dumps(
            {
                "s": state,
                "a": answers,
                "p": _principal_tag(principal),
                "m": method,
                "d": digest,
                "x": round(now + self.ttl_s, 3),
            }
        )
        mac = hmac.new(self.keys[0], payload, hashlib.sha256).digest()
        return f"v1.{_b64(payload)}.{_b64(mac)}"

    def open(
        self,
        token: object,
        *,
        principal: object,
        method: str,
        digest: str,
        now: float,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The handler state and the earlier answers sealed in `token`.

        MCPError -32602 if it is not ours, not for this request or principal, or
        expired.
        """
        if not isinstance(token, str):
            raise _BAD_STATE
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != "v1":
            raise _BAD_STATE
        try:
            payload, mac = _unb64(parts[1]), _unb64(parts[2])
        except (ValueError, UnicodeEncodeError):
            raise _BAD_STATE from None
        if not any(
            hmac.compare_digest(mac, hmac.new(key, payload, hashlib.sha256).digest())
            for key in self.keys
        ):
            raise _BAD_STATE
        try:
            sealed = loads(payload)
        except JSONDecodeError:
            raise _BAD_STATE from None
        if (
            not isinstance(sealed, dict)
            or sealed.get("p") != _principal_tag(principal)
            or sealed.get("m") != method
            or sealed.get("d") != digest
            or not isinstance(sealed.get("x"), int | float)
            or now > sealed["x"]
            or not isinstance(sealed.get("s"), dict)
            or not isinstance(sealed.get("a"), dict)
        ):
            raise _BAD_STATE
        return sealed["s"], sealed["a"]
