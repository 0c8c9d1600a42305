"""The client behind trusted proxies: ``Forwarded`` (RFC 7239) and the
``X-Forwarded-For``/``-Proto``/``-Host`` headers.

Sans-IO. Only a connection from a trusted proxy (`Trust`, from
``ServerConfig.forwarded_allow_ips``) may say who the client is. Each proxy
appends the address it received the request from, so the list is read from
the right: the client is the rightmost address that is not itself a trusted
proxy (or the leftmost, when every one is). ``Forwarded`` wins when both
kinds are present; a header that cannot be parsed is ignored whole (the
connection's own peer stays the client), since a half-read chain could name
a client the proxies never saw.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from typing import Final

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: What a request's client looks like: (address, scheme, host); None for the
#: parts the proxies did not give.
Forwarded = tuple[str, str | None, bytes | None]

_SCHEMES: Final = frozenset({"http", "https"})


#: How many public origins a server names in its log (`Trust.note_origin`).
ORIGINS_NAMED: Final = 16

logger = logging.getLogger("trio_mcp.server")


class Trust:
    """The proxies whose forwarding headers are believed, and the public
    origins (scheme and host) they said the server's clients used."""

    __slots__ = ("networks", "origins")

    def __init__(self, spec: Iterable[str]) -> None:
        networks: list[Network] = []
        for item in spec:
            item = item.strip()
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"not an IP address or network: {item!r}") from None
        self.networks = tuple(networks)
        #: The public origins logged so far (at most `ORIGINS_NAMED`).
        self.origins: set[tuple[str, bytes | None]] = set()

    def note_origin(self, scheme: str, host: bytes | None) -> None:
        """Log the first request that reached the server through a proxy as
        ``scheme://host``: what clients use to reach it is known only from
        what the proxies forward, never from the address it binds."""
        origin = (scheme, host)
        origins = self.origins
        if origin in origins or len(origins) > ORIGINS_NAMED:
            return
        origins.add(origin)
        if len(origins) > ORIGINS_NAMED:
            logger.info("more public origins through the proxies: no more are named")
            return
        public = f"{scheme}://{host.decode('latin-1')}" if host else f"{scheme}:// (no Host)"
        logger.info("clients reach this server through a trusted proxy at %s", public)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, host: str) -> bool:
        """Whether `host` (an address as text) is a trusted proxy."""
        address = _address(host)
        return address is not None and any(address in network for network in self.networks)


#: The `Trust` of a TLS connection whose peer is not a trusted proxy: no
#: proxy is believed, and its requests take the branch that gives them the
#: connection's scheme (``HTTP11Connection.proxy``).
NO_PROXY: Final = Trust(())


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _node(value: str) -> str | None:
    """The address in a ``for=`` node (RFC 7239 6), without its port; None
    for "unknown", an obfuscated name, or what is not an address."""
    if value.startswith("["):  # an IPv6 address, maybe with a port
        end = value.find("]")
        if end < 0:
            return None
        value = value[1:end]
    elif value.count(":") == 1:  # an IPv4 address with a port
        value = value.split(":", 1)[0]
    address = _address(value)
    return None if address is None else str(address)


def _split_quoted(text: str, separator: str) -> list[str] | None:
    """`text` split at `separator` outside quoted strings; None when a quote
    is not closed."""
    parts, current, quoted, escaped = [], [], False, False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif quoted and char == "\\":
            current.append(char)
            escaped = True
        elif char == '"':
            current.append(char)
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if quoted:
        return None
    parts.append("".join(current))
    return parts


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        out, escaped = [], False
        for char in inner:
            if escaped or char != "\\":
                out.append(char)
                escaped = False
            else:
                escaped = True
        return "".join(out)
    return value


def parse_forwarded(values: list[bytes]) -> list[dict[str, str]] | None:
    """The elements of ``Forwarded`` header values, each a dict of its
    lower-cased parameters; None when the header is malformed."""
    elements: list[dict[str, str]] = []
    for raw in values:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            return None
        pieces = _split_quoted(text, ",")
        if pieces is None:
            return None
        for piece in pieces:
            if not piece.strip():
                continue
            pairs = _split_quoted(piece, ";")
            if pairs is None:
                return None
            element: dict[str, str] = {}
            for pair in pairs:
                name, equals, value = pair.strip().partition("=")
                if not equals or not name:
                    return None
                element[name.strip().lower()] = _unquote(value.strip())
            elements.append(element)
    return elements


def forwarded_client(peer: str, headers: Iterable[tuple[bytes, bytes]], trust: Trust) -> Forwarded:
    """Who a request from a trusted proxy `peer` is from: (client address,
    scheme, host). The caller checks that `peer` is trusted."""
    forwarded: list[bytes] = []
    xff: list[bytes] = []
    proto: bytes | None = None
    host: bytes | None = None
    for name, value in headers:
        if name == b"forwarded":
            forwarded.append(value)
        elif name == b"x-forwarded-for":
            xff.append(value)
        elif name == b"x-forwarded-proto":
            proto = value
        elif name == b"x-forwarded-host":
            host = value
    if forwarded:
        elements = parse_forwarded(forwarded)
        if elements is None:
            return peer, None, None
        chain = [_node(element.get("for", "")) for element in elements]
        index = _client_index(chain, trust)
        if index is None:
            return peer, None, None
        element = elements[index]
        scheme = element.get("proto", "").lower() or None
        named = element.get("host")
        return (
            chain[index] or peer,
            scheme if scheme in _SCHEMES else None,
            named.encode("ascii", "replace") if named else None,
        )
    if not xff:
        return peer, None, None
    nodes: list[str | None] = []
    for value in xff:
        nodes.extend(_node(part.strip()) for part in value.decode("latin-1").split(","))
    index = _client_index(nodes, trust)
    if index is None:
        return peer, None, None
    scheme = proto.decode("latin-1").split(",")[-1].strip().lower() if proto else None
    last_host = host.split(b",")[-1].strip() if host else None
    return (
        nodes[index] or peer,
        scheme if scheme in _SCHEMES else None,
        last_host or None,
    )


def _client_index(chain: list[str | None], trust: Trust) -> int | None:
    """Where in `chain` (addresses, None for what names none) the client is:
    the rightmost entry that is not a trusted proxy, or the leftmost; None
    for an empty chain or an entry that names no address before it is found
    (nothing said past it can be checked)."""
    if not chain:
        return None
    for index in range(len(chain) - 1, -1, -1):
        node = chain[index]
        if node is None:
            return None
        if not trust.trusts(node):
            return index
    return 0
