"""Admission: what a request must carry before the MCP endpoint looks inside.

Media types in Accept and Content-Type, Origin and Host checks against DNS
rebinding, and the CORS headers of the answer. The rules are pure functions
over header bytes; `Admission` applies them to a request with the endpoint's
settings and raises the `Rejection` (with the status of the digest) for the
first one it breaks. Sans-IO.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

from .._http._connection import Headers, Request
from ._answers import refuse

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


# RFC 9112 3.2 and RFC 3986 3.2.2: uri-host [ ":" port ]; an IP literal's
# inside is checked by `host_is_valid`, a port's range too.
_AUTHORITY: Final = re.compile(
    rb"(\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)(?::([0-9]*))?"
)


def host_is_valid(host: bytes) -> bool:
    """Whether a Host value has the syntax RFC 9112 gives it (a bad one is a 400)."""
    match = _AUTHORITY.fullmatch(host)
    if match is None:
        return False
    name, port = match.groups()
    if port and (len(port) > 5 or int(port) > 65535):
        return False
    if name.startswith(b"["):
        try:
            ipaddress.IPv6Address(name[1:-1].decode("ascii"))
        except ValueError:
            return False
    return True


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


#: Request headers a browser may send (besides the Mcp-Param-* family).
CORS_ALLOWED_HEADERS: Final = (
    b"content-type, accept, authorization, mcp-protocol-version, mcp-session-id, "
    b"last-event-id, mcp-method, mcp-name"
)
#: The methods of the MCP endpoint.
ALLOW: Final = b"GET, HEAD, POST, DELETE, OPTIONS"
#: Bind addresses that mean "loopback only": Host and Origin then default to loopback names.
LOOPBACK_BINDS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
_HOST_REFUSALS: Final = {400: "Bad Request: invalid Host", 403: "Forbidden: Host not allowed"}
# How many distinct Host and Accept values are judged once and remembered.
_VERDICTS_KEPT: Final = 256


def cors_headers(request: Request) -> Headers:
    """CORS headers for a request from an allowed Origin (none for non-browser requests)."""
    origin = dict.get(request.singles, b"origin")
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin),
        (b"access-control-expose-headers", b"mcp-session-id"),
        (b"vary", b"origin"),
    ]


def preflight_headers(request: Request) -> Headers:
    """The answer to a CORS preflight: methods, headers (with any Mcp-Param-*), max age."""
    allowed = CORS_ALLOWED_HEADERS
    requested = request.header(b"access-control-request-headers") or b""
    params = [
        name.strip().lower()
        for name in requested.split(b",")
        if name.strip().lower().startswith(b"mcp-param-")
    ]
    if params:
        allowed = allowed + b", " + b", ".join(params)
    return [
        (b"access-control-allow-methods", ALLOW),
        (b"access-control-allow-headers", allowed),
        (b"access-control-max-age", b"600"),
    ]


def query_value(query: str, name: str) -> str | None:
    """The value of parameter `name` in a URL query string, or None."""
    for pair in query.split("&"):
        key, sep, value = pair.partition("=")
        if key == name and sep:
            return value
    return None


class Admission:
    """The admission rules with one endpoint's settings: which Hosts and
    Origins it answers, and whether it is bound to loopback.

    Clients send the same Host and Accept values every time, so each distinct
    value is judged once and the verdict kept (at most 256 of each).
    """

    __slots__ = ("_hosts", "_origins", "_loopback", "_host_verdicts", "_accept_verdicts")

    def __init__(self, allowed_hosts: Iterable[str], allowed_origins: Iterable[str], bind: str):
        self._hosts = frozenset(h.encode().lower() for h in allowed_hosts)
        self._origins = frozenset(o.encode().lower().rstrip(b"/") for o in allowed_origins)
        self._loopback = bind in LOOPBACK_BINDS
        #: Host value: 0 (answered) or the status of its refusal.
        self._host_verdicts: dict[bytes | None, int] = {}
        self._accept_verdicts: dict[tuple[bytes, ...], bool] = {}

    def check_origin(self, request: Request) -> None:
        """Refuse (403) a Host or Origin this endpoint does not answer."""
        singles = request.singles
        host = dict.get(singles, b"host")
        status = dict.get(self._host_verdicts, host)
        if status is None:
            if len(self._host_verdicts) >= _VERDICTS_KEPT:
                self._host_verdicts.clear()
            status = self._judge_host(host)
            self._host_verdicts[host] = status
        if status:
            raise refuse(status, _HOST_REFUSALS[status])
        origin = dict.get(singles, b"origin")
        if origin is not None and not origin_allowed(origin, self._origins, self._loopback):
            raise refuse(403, "Forbidden: Origin not allowed")

    def _judge_host(self, host: bytes | None) -> int:
        """0 for a Host this endpoint answers, else the status of its refusal."""
        if host is not None and not host_is_valid(host):
            return 400
        return 0 if host_allowed(host, self._hosts, self._loopback) else 403

    def check_post_head(self, request: Request) -> None:
        """Refuse a POST whose Accept (406) or Content-Type (415) the endpoint
        cannot serve; checked before authentication."""
        accept = tuple(request.header_values(b"accept"))
        acceptable = dict.get(self._accept_verdicts, accept)
        if acceptable is None:
            if len(self._accept_verdicts) >= _VERDICTS_KEPT:
                self._accept_verdicts.clear()
            acceptable = accepts(accept, JSON) and accepts(accept, SSE)
            self._accept_verdicts[accept] = acceptable
        if not acceptable:
            raise refuse(
                406, "Not Acceptable: Accept must allow application/json and text/event-stream"
            )
        if not is_json_content_type(dict.get(request.singles, b"content-type")):
            raise refuse(415, "Unsupported Media Type: use application/json")

    def check_get_head(self, request: Request) -> None:
        """Refuse (406) a GET for a stream whose Accept does not allow one."""
        if not accepts(request.header_values(b"accept"), SSE):
            raise refuse(406, "Not Acceptable: Accept must allow text/event-stream")
