"""The only way out of a sandbox that may use the network: an HTTP proxy on the gateway side.

A sandbox never joins the host's network: its network namespace is empty but for loopback.
When the owner allows a person's commands the network, the sandbox gets a unix socket bound
into it, and the gateway listens on that socket with this proxy. It speaks the two forms
every HTTP client knows through `http_proxy`/`https_proxy`: `CONNECT host:port` (HTTPS, and
any TLS or TCP protocol a client tunnels) and absolute-form requests (`GET http://host/...`).
Each destination is resolved here, every address checked by web_fetch's rule (public
addresses only, gateway/agent/web/addresses.py: no loopback, private, link-local or metadata
address, no IPv6 form that carries one) and the port by `[exec] network_ports`, and the
connection goes to the address that was checked (a name that resolves differently a moment
later changes nothing). What is refused gets `403` with the reason.

Why not slirp4netns or pasta: neither is installed here or in the image, both would need the
same public-address rule rebuilt as firewall rules, and a proxy is where that rule already is.
What it costs: programs that ignore the proxy variables, or speak UDP (DNS included: names are
resolved by the proxy), have no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.agent.web.addresses import AddressPolicy, AddressRefused, Resolver

__all__ = ["Destination", "ProxyServer", "decide"]

log = logging.getLogger(__name__)

_HEAD_MAX = 16 * 1024
_HEAD_SECONDS = 20.0
_CONNECT_SECONDS = 15.0
_CHUNK = 65536
_MAX_CONNECTIONS = 32  # at once, per run


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request may go: the checked address, or why not."""

    host: str
    port: int
    address: str = ""
    refusal: str = ""


def _split_host_port(authority: str, default_port: int) -> tuple[str, int]:
    authority = authority.strip()
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, sep, port_text = authority.rpartition(":")
        if not sep or not port_text.isdigit():
            host, port_text = authority, ""
    if not host:
        raise ValueError("no host")
    port = int(port_text) if port_text else default_port
    if not 0 < port < 65536:
        raise ValueError("bad port")
    return host.rstrip(".").lower(), port


async def decide(
    host: str, port: int, *, policy: AddressPolicy, resolver: Resolver, ports: Sequence[int]
) -> Destination:
    """May a sandbox connect to `host:port`? Resolved once, every address checked."""
    if ports and port not in ports:
        allowed = ", ".join(str(p) for p in ports)
        return Destination(host, port, refusal=f"port {port} is not allowed (only {allowed})")
    try:
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = await resolver.resolve(host, port)
        checked = policy.check(host, addresses)
    except AddressRefused as exc:
        reason = str(exc).replace("web_fetch only reaches", "commands only reach")
        return Destination(host, port, refusal=reason)
    except (OSError, ValueError) as exc:
        return Destination(host, port, refusal=f"{host} cannot be reached ({exc})")
    return Destination(host, port, address=checked[0])


class ProxyServer:
    """One run's proxy, listening on a unix socket that is bound into its sandbox."""

    def __init__(
        self, socket_path: Path, *, policy: AddressPolicy, resolver: Resolver, ports: Sequence[int]
    ) -> None:
        self.socket_path = socket_path
        self.policy = policy
        self.resolver = resolver
        self.ports = tuple(ports)
        self.refused: list[str] = []  # what was refused, for the run's record
        self.connected: list[str] = []
        self.bytes_out = 0
        self.bytes_in = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)

    async def __aenter__(self) -> ProxyServer:
        self._server = await asyncio.start_unix_server(self._accept, path=str(self.socket_path))
        self.socket_path.chmod(0o600)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with self._slots:
                await self._serve(reader, writer)
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
            TimeoutError,
        ):
            pass
        except Exception:  # hostile input never stops the gateway; say what happened once
            log.exception("exec proxy: a connection failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_SECONDS)
        if len(head) > _HEAD_MAX:
            await _refuse(writer, 431, "the request head is too long")
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await _refuse(writer, 400, "not an HTTP proxy request")
            return
        method, target, version = parts
        tunnel = method.upper() == "CONNECT"
        try:
            if tunnel:
                host, port = _split_host_port(target, 443)
                forwarded = b""
            else:
                host, port, forwarded = _absolute_form(method, target, version, lines[1:])
        except ValueError:
            await _refuse(writer, 400, f"cannot read the destination {target[:200]!r}")
            return
        dest = await decide(
            host, port, policy=self.policy, resolver=self.resolver, ports=self.ports
        )
        if dest.refusal:
            self.refused.append(f"{host}:{port}: {dest.refusal}")
            await _refuse(writer, 403, dest.refusal)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(dest.address, port), _CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as exc:
            await _refuse(writer, 502, f"{host}:{port} did not answer ({type(exc).__name__})")
            return
        self.connected.append(f"{host}:{port}")
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(forwarded)
            await asyncio.gather(
                self._pipe(reader, up_writer, out=True), self._pipe(up_reader, writer, out=False)
            )
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, out: bool) -> None:
        try:
            while data := await src.read(_CHUNK):
                if out:
                    self.bytes_out += len(data)
                else:
                    self.bytes_in += len(data)
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (OSError, RuntimeError):
            pass


def _absolute_form(
    method: str, target: str, version: str, headers: list[str]
) -> tuple[str, int, bytes]:
    """`GET http://host[:port]/path` as the request to send on: origin-form, no proxy
    headers, one request per connection."""
    if not target.lower().startswith("http://"):
        raise ValueError("only http:// URLs go without CONNECT")
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]  # credentials in the URL are not sent on
    host, port = _split_host_port(authority, 80)
    kept = [
        h
        for h in headers
        if h and not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))
    ]
    request = [f"{method} {slash or '/'}{path} {version}", *kept, "Connection: close", "", ""]
    return host, port, "\r\n".join(request).encode("latin-1")


async def _refuse(writer: asyncio.StreamWriter, code: int, reason: str) -> None:
    phrase = {
        400: "Bad Request",
        403: "Forbidden",
        431: "Request Header Fields Too Large",
        502: "Bad Gateway",
    }.get(code, "Error")
    body = (reason + "\n").encode("utf-8", errors="replace")
    writer.write(
        f"HTTP/1.1 {code} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
