"""The resolver web_fetch hands to aiohttp's connector: only addresses checked beforehand
(gateway/agent/web/fetch.py says why). Its own module so that aiohttp loads at the first fetch."""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult


class PinnedResolver(AbstractResolver):
    """Answers the connector with addresses checked beforehand; any other host is an error."""

    def __init__(self) -> None:
        self.pins: dict[str, list[str]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self.pins.get(host)
        if not addresses:
            raise OSError(f"{host} was not checked before connecting")
        results: list[ResolveResult] = []
        for address in addresses:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            results.append(
                {
                    "hostname": host,
                    "host": address,
                    "port": port,
                    "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            )
        return results

    async def close(self) -> None:
        return None
