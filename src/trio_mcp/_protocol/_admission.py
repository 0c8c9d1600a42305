"""Sans-IO rules of the Streamable HTTP endpoint: what a request must carry.

Media types in Accept and Content-Type, and Origin/Host checks against
DNS rebinding. Pure functions over header bytes; the endpoint calls them and
turns a False into the status the digest gives.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

JSON: Final = b"application/json"
SSE: Final = b"text/event-stream"

LOOPBACK_HOSTS: Final = frozenset({b"localhost", b"127.0.0.1", b"[::1]"})


def _media_ranges(accept: Iterable[bytes]) -> list[tuple[bytes, float]]:
    ranges = []
    for header in accept:
        for item in header.split(b","):
            media, *params = item.split(b";")
            media = media.strip().lower()
            if not media:
                continue
            q = 1.0
            for param in params:
                key, _, value = param.strip().partition(b"=")
                if key.strip().lower() == b"q":
                    try:
                        q = float(value.strip())
                    except ValueError:
                        q = 0.0
            ranges.append((media, q))
    return ranges


def accepts(accept: Iterable[bytes], media_type: bytes) -> bool:
    """Whether Accept header values admit `media_type` (wildcards count; q=0 refuses).

    The most specific matching range decides, as RFC 9110 12.5.1 says.
    """
    main = media_type.split(b"/", 1)[0]
    best_specificity = -1
    best_q = 0.0
    for media, q in _media_ranges(accept):
        if media == media_type:
            specificity = 2
        elif media == main + b"/*":
            specificity = 1
        elif media == b"*/*":
            specificity = 0
        else:
            continue
        if specificity > best_specificity:
            best_specificity, best_q = specificity, q
    return best_specificity >= 0 and best_q > 0


def is_json_content_type(content_type: bytes | None) -> bool:
    """Content-Type is application/json (any case, parameters allowed)."""
    if content_type is None:
        return False
    if content_type == JSON:
        return True  # what nearly every client sends
    return content_type.split(b";", 1)[0].strip().lower() == JSON


def host_name(host: bytes) -> bytes:
    """The name part of a Host header value or an origin's authority (port removed)."""
    host = host.strip().lower()
    if host.startswith(b"["):
        end = host.find(b"]")
        return host[: end + 1] if end >= 0 else host
    return host.rsplit(b":", 1)[0] if host.count(b":") == 1 else host


def origin_host(origin: bytes) -> bytes | None:
    """The host name of an Origin value such as ``http://localhost:3000``; None if malformed."""
    scheme, sep, rest = origin.strip().partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https") or not rest or b"/" in rest:
        return None
    return host_name(rest)


def origin_allowed(origin: bytes, allowed_origins: frozenset[bytes], loopback_only: bool) -> bool:
    """Whether a present Origin header may talk to us.

    An exact entry of `allowed_origins` (such as ``https://app.example``) or
    ``*`` allows it; a server bound to loopback also allows loopback origins.
    """
    if b"*" in allowed_origins or origin.strip().lower() in allowed_origins:
        return True
    if loopback_only:
        return origin_host(origin) in LOOPBACK_HOSTS
    return False


def host_allowed(host: bytes | None, allowed_hosts: frozenset[bytes], loopback_only: bool) -> bool:
    """Whether the Host header names us (DNS-rebinding protection).

    With no allow-list, a loopback-bound server accepts only loopback names and
    other servers accept any Host.
    """
    if host is None:
        return True  # HTTP/1.0 without Host: nothing to rebind
    name = host_name(host)
    if allowed_hosts:
        return b"*" in allowed_hosts or name in allowed_hosts
    if loopback_only:
        return name in LOOPBACK_HOSTS
    return True
