"""Multi round-trip requests (2026-07-28): sealed request state.

A handler that needs input from the client answers ``input_required`` with
``inputRequests`` and a ``requestState``; the client retries the same request
with ``inputResponses`` and that state. The state is hostile input on the way
back and private on the way out (handlers keep things in ``ctx.state`` that
the client should not read), so it is sealed: encrypted and authenticated
(AES-256-GCM) over a payload that binds the principal's stable key, the
method, a digest of the request's own parameters and an expiry. The expiry is
wall-clock time, which replicas share (trio's clock has a random offset per
process), with `CLOCK_SKEW_S` of grace for clocks that differ a little. A
token has exactly one spelling (canonical unpadded base64url). A key ring
lets keys rotate without breaking retries in flight (seal with the first,
accept any), and keys from configuration let several workers or replicas
accept each other's state.

Sans-IO: "now" is an argument.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Sequence
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._errors import MCPError
from .._json import JSONDecodeError, dumps, loads
from ._jsonrpc import INVALID_PARAMS

#: How far past its expiry a state is still accepted: clocks of replicas differ.
CLOCK_SKEW_S: Final = 30.0
#: The token format: "v2." and the base64url of nonce, ciphertext and tag.
_PREFIX: Final = "v2."
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
#: Binds the derived keys and the ciphertext to this use and format.
_CONTEXT: Final = b"trio-mcp requestState v2"

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


def default_principal_key(principal: object) -> str:
    """A stable key for a principal `authenticate` returned: None, a str, an
    int, bytes, or JSON of those (dicts, lists); two principals share sealed
    states exactly when their keys are equal. TypeError for any other type:
    give the endpoint ``principal_key=`` for it."""
    if principal is None:
        return "-"
    if isinstance(principal, str):
        return "s:" + principal
    if isinstance(principal, bytes):
        return "b:" + principal.hex()
    if isinstance(principal, bool | int | float | dict | list | tuple):
        try:
            return "j:" + dumps(_sorted(principal)).decode()
        except TypeError:
            pass
    raise TypeError(
        f"no stable key for a principal of type {type(principal).__name__}: give the "
        "endpoint principal_key= (serve_mcp, run_mcp, MCPEndpoint)"
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url `text`, else None (one
    spelling per token: a lenient decoder would give every state several)."""
    if not text.isascii():
        return None
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if _b64(data) == text else None


def _cipher(key: bytes) -> AESGCM:
    return AESGCM(HKDF(SHA256(), 32, salt=None, info=_CONTEXT).derive(key))


def _bad_state() -> MCPError:
    # (a new error each time: an exception raised again keeps every traceback
    # it was raised with, and with them the frames and the hostile tokens)
    return MCPError(INVALID_PARAMS, "Invalid params: requestState is invalid or expired")


class StateSealer:
    """Seals and opens ``requestState`` values with a ring of keys."""

    def __init__(self, keys: Sequence[bytes] = (), ttl_s: float = 600.0) -> None:
        self.keys = list(keys) or [secrets.token_bytes(32)]
        self.generated = not keys
        self.ttl_s = ttl_s
        self._ciphers = [_cipher(key) for key in self.keys]

    def seal(
        self,
        state: dict[str, Any],
        answers: dict[str, Any],
        *,
        principal: str,
        method: str,
        digest: str,
        now: float,
    ) -> str:
        """`state` and `answers` as a token; `principal` is its `principal_key`
        and `now` wall-clock time (``time.time()``)."""
        payload = dumps(
            {
                "s": state,
                "a": answers,
                "p": _tag(principal),
                "m": method,
                "d": digest,
                "x": round(now + self.ttl_s, 3),
            }
        )
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return _PREFIX + _b64(nonce + self._ciphers[0].encrypt(nonce, payload, _CONTEXT))

    def open(
        self,
        token: object,
        *,
        principal: str,
        method: str,
        digest: str,
        now: float,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The handler state and the earlier answers sealed in `token`.

        MCPError -32602 if it is not ours, not for this request or principal, or
        expired.
        """
        if not isinstance(token, str) or not token.startswith(_PREFIX):
            raise _bad_state()
        sealed = _unb64(token[len(_PREFIX) :])
        if sealed is None or len(sealed) < _NONCE_BYTES + _TAG_BYTES:
            raise _bad_state()
        nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        payload = None
        for cipher in self._ciphers:
            try:
                payload = cipher.decrypt(nonce, ciphertext, _CONTEXT)
                break
            except InvalidTag:
                continue
        if payload is None:
            raise _bad_state()
        try:
            opened = loads(payload)
        except JSONDecodeError:
            raise _bad_state() from None
        if (
            not isinstance(opened, dict)
            or opened.get("p") != _tag(principal)
            or opened.get("m") != method
            or opened.get("d") != digest
            or not isinstance(opened.get("x"), int | float)
            or now > opened["x"] + CLOCK_SKEW_S
            or not isinstance(opened.get("s"), dict)
            or not isinstance(opened.get("a"), dict)
        ):
            raise _bad_state()
        return opened["s"], opened["a"]


def _tag(principal: str) -> str:
    return hashlib.sha256(principal.encode()).hexdigest()[:32]
