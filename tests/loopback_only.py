"""In the test process nothing reaches past loopback, not even a DNS query.

CI runs the suite in a network namespace with only `lo` (.ci/offline), which stops packets
from every process, `clawgate run` children included. On a developer's machine there is no
such wall: a default that quietly resolves a public name (a search backend, an SDK's
telemetry) would send a query to the machine's resolver and pass. This audit hook refuses,
inside the test process, every name lookup other than loopback's and every connection to an
address outside 127.0.0.0/8 and ::1 (the caller sees the usual `gaierror` / "network is
unreachable"), and records it, so that the test that tried fails and says what it asked for.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})
# What a test may bind or be given as "every address": never a destination of a query.
UNSPECIFIED = frozenset({"", "0.0.0.0", "::"})

attempts: list[str] = []  # what the current test tried; conftest checks it after each test


def _is_loopback(host: object) -> bool:
    if host is None:
        return True  # getaddrinfo(None, port): a local (passive) address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%")[0].lower()
    if name in LOOPBACK_NAMES or name in UNSPECIFIED or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getaddrinfo":
        host = args[0]
        if not _is_loopback(host):
            attempts.append(f"name lookup of {host!r}")
            raise socket.gaierror(socket.EAI_NONAME, "refused in tests: not loopback")
    elif event in ("socket.gethostbyname", "socket.gethostbyname_ex"):
        if not _is_loopback(args[0]):
            attempts.append(f"name lookup of {args[0]!r}")
            raise socket.gaierror(socket.EAI_NONAME, "refused in tests: not loopback")
    elif event in ("socket.connect", "socket.sendto"):
        sock, address = args[0], args[-1]
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and isinstance(address, tuple)
            and not _is_loopback(address[0])
        ):
            attempts.append(f"connection to {address!r}")
            raise OSError(errno.ENETUNREACH, "refused in tests: not loopback")


_installed = False


def install() -> None:
    """Once per process (an audit hook cannot be removed)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
