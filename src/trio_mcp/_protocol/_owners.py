"""Which process owns a session: the signed owner hint in session ids, and
which requests a process passes to another.

A process with an ``owner_name`` mints session ids of the form::

    <owner>.<32 hex digits>.<12 base64url characters>

the owner's name (1 to 16 of ``A-Za-z0-9-``), the 128 random bits of a plain
id, and a MAC: HMAC-SHA256 over both, truncated to 72 bits, under a key
derived from the first key of the ``requestState`` ring (every key of the
ring verifies, so keys rotate as they do for ``requestState``). At most 62
visible ASCII characters; a load balancer finds the owner with
``^([A-Za-z0-9-]{1,16})\\.``. The MAC makes the hint worth believing: a
process passes a request on only to an owner whose hint verifies, so a
client cannot aim the group's relays at a name of its choosing, and an id
whose hint fails is simply unknown (404), as any made-up id is.

`PassingOn` decides, per request, whether it goes to another process of the
group: the one place that decision is made (the endpoint asks it only when
passing on is configured, and not at all when a shared store lets any
process serve any session). Sans-IO: no socket, no clock.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Callable, Sequence
from typing import Final

from .._config import MCPConfig
from .._http._connection import Request
from ._admission import query_value
from ._sessions import new_session_id

#: Bytes of the truncated MAC: 72 bits, a whole number of base64 characters.
_MAC_BYTES: Final = 9
_MAC_CHARS: Final = 12
#: The random part: a plain session id (`SessionIds`).
_RANDOM_CHARS: Final = 32
#: Binds the derived keys to this use, so a ring key signs nothing else here.
_CONTEXT: Final = b"trio-mcp session owner hint v1"
_HEX: Final = frozenset("0123456789abcdef")
_NAME: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
#: What a load balancer matches to route on the owner (group 1), documented in the README.
OWNER_PATTERN: Final = r"^([A-Za-z0-9-]{1,16})\."


def _hint_key(key: bytes) -> bytes:
    return hmac.digest(key, _CONTEXT, "sha256")


class OwnerHints:
    """Mints session ids that name `name` as their owner, and reads the
    owner of any id (verified with every key of the ring)."""

    __slots__ = ("name", "prefix", "_keys", "_random")

    def __init__(
        self, name: str, keys: Sequence[bytes], random_ids: Callable[[], str] = new_session_id
    ) -> None:
        if not name or len(name) > 16 or not set(name) <= _NAME:
            raise ValueError(f"not an owner name: {name!r}")
        if not keys:
            raise ValueError("owner hints need at least one key")
        self.name = name
        #: How this process's own ids begin.
        self.prefix = name + "."
        self._keys = [_hint_key(key) for key in keys]
        self._random = random_ids

    def _mac(self, key: bytes, signed: str) -> str:
        digest = hmac.digest(key, signed.encode("ascii"), "sha256")[:_MAC_BYTES]
        return base64.urlsafe_b64encode(digest).decode("ascii")

    def __call__(self) -> str:
        """A new session id owned by this process."""
        signed = self.prefix + self._random()
        return signed + "." + self._mac(self._keys[0], signed)

    def owner(self, session_id: str) -> str | None:
        """The owner `session_id` names, if its hint verifies; None for a
        plain id, or one whose hint is malformed or forged."""
        name, dot, rest = session_id.partition(".")
        if (
            not dot
            or len(rest) != _RANDOM_CHARS + 1 + _MAC_CHARS
            or rest[_RANDOM_CHARS] != "."
            or not name
            or len(name) > 16
            or not set(name) <= _NAME
            or not set(rest[:_RANDOM_CHARS]) <= _HEX
        ):
            return None
        signed = session_id[: len(name) + 1 + _RANDOM_CHARS]
        given = rest[_RANDOM_CHARS + 1 :]
        for key in self._keys:
            if hmac.compare_digest(self._mac(key, signed), given):
                return name
        return None


class PassingOn:
    """Which requests this process passes to another process of its group:
    those naming a session whose verified hint names another owner (the
    ``Mcp-Session-Id`` of a request to the endpoint; the ``session_id`` of a
    POST to the 2024-11-05 messages URL). Everything else is served here,
    where an unknown session is a 404."""

    __slots__ = ("hints", "_messages_path", "_own", "_own_length")

    def __init__(self, hints: OwnerHints, messages_path: str) -> None:
        self.hints = hints
        self._messages_path = messages_path
        #: How this process's own ids begin, as the header's bytes.
        self._own = hints.prefix.encode("ascii")
        self._own_length = len(self._own)

    def owner_to_ask(self, request: Request, on_endpoint: bool) -> str | None:
        """The owner to pass `request` to, or None to serve it here (for a
        request of this process's own sessions, one dict look-up and a
        comparison of a few bytes)."""
        if on_endpoint:
            raw = dict.get(request.singles, b"mcp-session-id")
            if raw is None or raw[: self._own_length] == self._own:
                return None
            return self._other_owner(raw.decode("latin-1"))
        if request.method != "POST" or request.path != self._messages_path:
            return None
        found = query_value(request.query, "session_id")
        return None if found is None else self._other_owner(found)

    def _other_owner(self, session_id: str) -> str | None:
        hints = self.hints
        if session_id.startswith(hints.prefix):
            return None
        owner = hints.owner(session_id)
        return owner if owner != hints.name else None


def passing_on(
    config: MCPConfig, hints: OwnerHints | None, shared_stores: bool
) -> PassingOn | None:
    """Whether this process passes requests to their sessions' owners, and
    listens for the ones passed to it: with a peer sockets directory, unless
    the stores are shared (then any process serves any session). The one
    place this is decided."""
    if hints is None or not config.peer_sockets_dir or shared_stores:
        return None
    return PassingOn(hints, config.messages_path)
