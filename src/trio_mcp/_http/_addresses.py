"""Client addresses as quotas count them.

Sans-IO. A quota keyed by the exact address is no quota against IPv6, where
one host usually holds a whole /64: `address_group` keys an IPv6 client by
its /64 network (an IPv4-mapped address by its IPv4 address), an IPv4
client by its address.
"""

from __future__ import annotations

import ipaddress
from typing import Final

#: The prefix an IPv6 client is counted by: one site's subnet.
IPV6_GROUP_BITS: Final = 64


def address_group(host: str) -> str:
    """The key a quota counts `host` (an IP address as text) under; anything
    that is not an IP address (a Unix socket's path, say) is its own key."""
    if ":" not in host and "%" not in host:
        # An IPv4 address as the kernel writes it is already its own key, and
        # no other text without these is an IP address (per connection: the
        # accept loop calls this for every one).
        return host
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        network = ipaddress.IPv6Network((address, IPV6_GROUP_BITS), strict=False)
        return str(network)
    return str(address)
