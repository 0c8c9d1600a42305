"""The URL a benchmark loads, and the rule that it must be this machine.

A load generator pointed at someone else's server is an attack, so every
address the host name resolves to must be a loopback address unless the user
says ``--allow-remote``.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from .._errors import UsageError


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    host: str
    port: int
    path: str  # the request target, with the query string
    host_header: str
    # (family, sockaddr) for every address the host resolves to, in resolver order
    addresses: tuple[tuple[int, tuple[object, ...]], ...]


def parse_url(url: str) -> tuple[str, int, str, str]:
    """(host, port, request target, Host header) of an ``http://`` URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"bad URL {url!r}: {exc}") from None
    if parts.scheme == "https":
        raise UsageError(f"{url}: https is not supported; benchmark the plain-HTTP endpoint")
    if parts.scheme != "http":
        raise UsageError(f"bad URL {url!r}: expected http://HOST[:PORT]/PATH")
    host = parts.hostname
    if not host:
        raise UsageError(f"bad URL {url!r}: no host")
    if parts.username or parts.password:
        raise UsageError(f"bad URL {url!r}: credentials in the URL are not supported")
    if port is None:
        port = 80
    if port == 0:
        raise UsageError(f"bad URL {url!r}: port 0")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if not path.isascii() or any(c <= " " or c == "\x7f" for c in path):
        raise UsageError(f"bad URL {url!r}: the path must be ASCII without spaces")
    bracketed = f"[{host}]" if ":" in host else host
    host_header = bracketed if port == 80 else f"{bracketed}:{port}"
    return host, port, path, host_header


def is_loopback(address: str) -> bool:
    """Whether an IP address (``%scope`` allowed) is a loopback address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def resolve(url: str, *, allow_remote: bool = False) -> Target:
    """Parse and resolve `url`; refuse non-loopback addresses unless `allow_remote`."""
    host, port, path, host_header = parse_url(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise UsageError(f"cannot resolve {host!r}: {exc.strerror}") from None
    addresses: list[tuple[int, tuple[object, ...]]] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and (family, sockaddr) not in addresses:
            addresses.append((family, tuple(sockaddr)))
    if not addresses:
        raise UsageError(f"{host!r} has no IPv4 or IPv6 address")
    remote = sorted({str(sa[0]) for _, sa in addresses if not is_loopback(str(sa[0]))})
    if remote and not allow_remote:
        raise UsageError(
            f"{host} resolves to non-loopback address(es) {', '.join(remote)}; "
            "trio-mcp bench only loads servers on this machine unless you pass --allow-remote "
            "(and only load servers you are allowed to)"
        )
    return Target(url, host, port, path, host_header, tuple(addresses))
