"""Which addresses `web_fetch` may connect to: public ones only (no server-side request forgery).

A model that can be talked into fetching `http://169.254.169.254/` or `http://127.0.0.1:8788/`
reaches the cloud's metadata service or our own panel from inside the machine. So a host is
resolved once, every address it resolves to is checked, and the connection goes to a checked
address (fetch.py pins it): a name that resolves to a private address is refused, and so is a
name with one public and one private address (a rebinding trick would pick the private one).

An address is refused unless it is globally routable unicast. Every IPv6 form that carries an
IPv4 address is judged by that IPv4 address too: IPv4-mapped (`::ffff:a.b.c.d`),
IPv4-compatible (`::a.b.c.d`, deprecated but still routed by some stacks), IPv4-translated
(`::ffff:0:a.b.c.d`), NAT64 with the well-known prefix (`64:ff9b::/96`) and the local-use one
(`64:ff9b:1::/48`, every RFC 6052 layout its padding allows), 6to4, Teredo (server and client)
and ISATAP interface identifiers. Python's `is_global` calls most of these public, which is how
`::7f00:1` once passed as a public address. The operator may
allow networks on purpose (a home server; the tests' loopback web server) with
`[web] allow_networks`; cloud metadata addresses stay refused even then.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = ["AddressPolicy", "AddressRefused", "Resolver", "SystemResolver", "parse_networks"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance metadata services (AWS/GCP/Azure/OpenStack, AWS ECS and IPv6, Alibaba, Oracle):
# never reachable, whatever `allow_networks` says.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "192.0.0.192",
    )
)

# Named ranges, so a refusal says what the address is (first match wins).
_NAMED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "a 'this network' address"),
    ("127.0.0.0/8", "a loopback address"),
    ("::1/128", "a loopback address"),
    ("::/128", "the unspecified address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("fc00::/7", "a private (unique local) address"),
    ("169.254.0.0/16", "a link-local address"),
    ("fe80::/10", "a link-local address"),
    ("100.64.0.0/10", "a carrier-grade NAT address"),
    ("224.0.0.0/4", "a multicast address"),
    ("ff00::/8", "a multicast address"),
    ("255.255.255.255/32", "the broadcast address"),
    ("240.0.0.0/4", "a reserved address"),
)
NAMED_RANGES: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), what) for net, what in _NAMED
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215, local-use
COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (RFC 4291, deprecated)
TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765)
# RFC 6052: where the IPv4 address sits for each prefix length (bit ranges of the address,
# counted from the left), skipping bits 64-71 (the "u" octet, always zero).
_RFC6052: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = (
    (48, ((48, 64), (72, 88))),
    (56, ((56, 64), (72, 96))),
    (64, ((72, 104),)),
    (96, ((96, 128),)),
)


class AddressRefused(Exception):
    """The host may not be fetched; `str()` says why, for the model and the person."""


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """`["127.0.0.1/32", "192.168.1.10"]` as networks (a bare address is a /32 or /128)."""
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)


def _bits(value: int, start: int, end: int) -> int:
    """Bits `start` to `end` (exclusive, counted from the left) of a 128-bit value."""
    return (value >> (128 - end)) & ((1 << (end - start)) - 1)


def _rfc6052(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses a local-use NAT64 address can carry: one per RFC 6052 layout whose
    padding (the "u" octet and the suffix after the IPv4 bits) is zero, as it must be."""
    value = int(ip)
    found = []
    for _prefix, ranges in _RFC6052:
        end = ranges[-1][1]
        if _bits(value, 64, 72) or (end < 128 and _bits(value, end, 128)):
            continue
        v4 = 0
        for start, stop in ranges:
            v4 = (v4 << (stop - start)) | _bits(value, start, stop)
        found.append(ipaddress.IPv4Address(v4))
    return found


def _embedded_v4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for, in each form that carries one."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    value = int(ip)
    low = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in COMPATIBLE or ip in TRANSLATED or ip in NAT64:
        found.append(low)
    if ip in NAT64_LOCAL:
        found.extend(_rfc6052(ip))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)  # the server's and the client's
    if (value >> 32) & 0xFCFFFFFF == 0x5EFE:  # ISATAP: interface id [0-3]00:5efe:a.b.c.d
        found.append(low)
    return found


class AddressPolicy:
    """Decides whether one IP address may be connected to."""

    def __init__(self, allow_networks: Sequence[IPNetwork] = ()) -> None:
        self.allow_networks = tuple(allow_networks)

    def refusal(self, ip: IPAddress) -> str | None:
        """None if `ip` may be connected to, else what kind of address it is."""
        embedded = _embedded_v4(ip)
        if ip in METADATA or any(v4 in METADATA for v4 in embedded):
            return "a cloud metadata address"
        if any(ip in net for net in self.allow_networks if net.version == ip.version):
            return None
        candidates: list[IPAddress] = [ip, *embedded]
        for candidate in candidates:
            for net, what in NAMED_RANGES:
                if net.version == candidate.version and candidate in net:
                    return what
        for candidate in candidates:
            if candidate.is_multicast:
                return "a multicast address"
            if not candidate.is_global:
                return "a reserved or non-public address"
        return None

    def check(self, host: str, addresses: Sequence[str]) -> list[str]:
        """`addresses` if every one of them is allowed; else AddressRefused naming the first
        refused one (one bad answer refuses the host: a mixed answer is a rebinding trick)."""
        if not addresses:
            raise AddressRefused(f"{host} has no address")
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            why = self.refusal(ip)
            if why is not None:
                shown = host if host == address else f"{host} ({address})"
                raise AddressRefused(f"{shown} is {why}; web_fetch only reaches public addresses")
        return list(addresses)


class Resolver(Protocol):
    """Host name to IP addresses (tests give a fixed table; the system resolver otherwise)."""

    async def resolve(self, host: str, port: int) -> list[str]: ...


class SystemResolver:
    """The operating system's resolver (getaddrinfo in the loop's thread pool)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise AddressRefused(f"{host} could not be resolved ({exc.strerror})") from None
        seen: dict[str, None] = {}
        for _family, _type, _proto, _name, sockaddr in infos:
            seen.setdefault(str(sockaddr[0]), None)
        return list(seen)
