"""The one rule for a URL a caller puts in a request for an upstream to fetch (an image,
a document, a file, an MCP server), in every dialect and every adapter: an `https` URL
of a public host. So no caller can make an upstream, a self-hosted one above all,
fetch an address inside the network it runs in through the gateway.

    scheme         https only (not http, ftp, file, gopher...)
    credentials    none (user:password@)
    host           a name with a dot, not localhost nor under .localhost, .local,
                   .internal, .intranet, .lan, .corp, .home.arpa, .localdomain; or an
                   address that is globally routable: no loopback, private, link-local
                   (169.254.169.254, the clouds' metadata service), shared, reserved or
                   multicast address, in any spelling (2130706433, 0x7f.1, ::ffff:10.0.0.1,
                   64:ff9b::a00:1)
    length         at most MAX_URL_CHARS

A name that resolves to an internal address is the upstream's resolver's to refuse:
the gateway does not resolve callers' names (the answer could change before the
upstream asks). Data URLs are each field's own matter (their media types).
Documented for callers in docs/api.md, "URLs in requests".
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from server.base.errors import InvalidArgument

MAX_URL_CHARS = 8192
INTERNAL_SUFFIXES = (
    ".localhost", ".local", ".internal", ".intranet", ".lan", ".corp", ".home.arpa",
    ".localdomain",
)  # fmt: skip
# What a host written as an IPv4 address in a legacy form (decimal, octal, hex) holds.
_NUMERIC = re.compile(r"^[0-9a-fx.]+$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def refusal(url: str) -> str | None:
    """Why an upstream may not be asked to fetch `url`; None when it may."""
    if len(url) > MAX_URL_CHARS:
        return f"must be at most {MAX_URL_CHARS} characters"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not one
    except ValueError:
        return "must be a URL"
    if parts.scheme.lower() != "https":
        return "must be an https URL"
    if "@" in parts.netloc:
        return "must not hold credentials"
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        return "must name a host"
    address = _address(host)
    if address is not None:
        return None if _public(address) else "must not name a private or internal address"
    if "." not in host or host == "localhost" or host.endswith(INTERNAL_SUFFIXES):
        return "must name a public host"
    return None


def check(url: str, field: str) -> str:
    """`url` when an upstream may fetch it; else InvalidArgument naming `field`."""
    why = refusal(url)
    if why is not None:
        raise InvalidArgument.for_field(field, f"{why} (see URLs in requests)")
    return url


def _address(host: str) -> Address | None:
    """The address `host` spells, in any form a resolver takes; None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC.match(host):
        try:  # 2130706433, 0x7f.1, 0177.0.0.1: what inet_aton (and so curl) reads
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None
        )
        if embedded is not None:
            return _public(embedded)
    return address.is_global and not address.is_multicast
