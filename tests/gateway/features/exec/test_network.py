"""Network for a sandbox the owner allows it: only through the gateway's proxy, only to public
addresses (web_fetch's rule), only to the allowed ports. Loopback servers stand in for the
internet; a test rule that calls 127.0.0.1 public plays a public host."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.agent.web.addresses import AddressPolicy, parse_networks
from gateway.features.exec.proxy import decide
from gateway.features.exec.sandbox import RunRequest
from tests.gateway.features.exec.conftest import Opener, World


class TableResolver:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return self.table.get(host, [])


DECISIONS = [
    ("example.org", 443, ["93.184.215.14"], "93.184.215.14", ""),
    ("8.8.8.8", 443, [], "8.8.8.8", ""),
    ("intranet.test", 443, ["10.0.0.7"], "", "a private address"),
    ("rebind.test", 443, ["93.184.215.14", "127.0.0.1"], "", "a loopback address"),
    ("127.0.0.1", 443, [], "", "a loopback address"),
    ("::ffff:127.0.0.1", 443, [], "", "a loopback address"),
    ("169.254.169.254", 80, [], "", "a cloud metadata address"),
    ("example.org", 25, ["93.184.215.14"], "", "port 25 is not allowed"),
    ("nowhere.test", 443, [], "", "has no address"),
]


@pytest.mark.parametrize(("host", "port", "answer", "address", "refusal"), DECISIONS)
async def test_the_proxys_decision(
    host: str, port: int, answer: list[str], address: str, refusal: str
) -> None:
    resolver = TableResolver({host: answer})
    dest = await decide(host, port, policy=AddressPolicy(), resolver=resolver, ports=[80, 443])
    assert dest.address == address
    assert refusal in dest.refusal if refusal else dest.refusal == ""


@pytest.fixture
async def web_server() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A loopback HTTP server answering `hello`; the list holds each request head."""
    heads: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], heads


def _connect_script(port: int) -> str:
    return (
        "exec 3<>/dev/tcp/127.0.0.1/3128 && "
        f"printf 'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3 && "
        "head -1 <&3; exec 3<&-; echo end"
    )


async def test_with_network_on_loopback_is_refused_by_the_proxy(
    open_sandbox: Opener, world: World, web_server: tuple[int, list[bytes]]
) -> None:
    port, heads = web_server
    box = open_sandbox(network_ports=[])
    result = await box.run(RunRequest(world.alice, _connect_script(port), network=True))
    assert result.output.shown.startswith("HTTP/1.1 403 Forbidden")
    assert any("a loopback address" in r for r in result.network_refused)
    direct = await box.run(
        RunRequest(world.alice, f"echo x > /dev/tcp/127.0.0.1/{port}", network=True)
    )
    assert "Connection refused" in direct.output.shown  # its own loopback, not the host's
    assert heads == []


async def test_with_network_on_a_public_host_is_reached_through_the_proxy(
    open_sandbox: Opener, world: World, web_server: tuple[int, list[bytes]]
) -> None:
    port, heads = web_server
    public = AddressPolicy(parse_networks(["127.0.0.1/32"]))  # the test's "internet"
    box = open_sandbox(policy=public, network_ports=[port])
    tunnel = await box.run(RunRequest(world.alice, _connect_script(port), network=True))
    assert tunnel.output.shown.startswith("HTTP/1.1 200 Connection established")
    fetch = await box.run(
        RunRequest(
            world.alice,
            (
                'python3 -c "import urllib.request as u; '
                f"print(u.urlopen('http://127.0.0.1:{port}/page').read().decode())\""
            ),
            network=True,
        )
    )
    assert fetch.output.shown.strip() == "hello", fetch.output.shown
    assert fetch.network_used == (f"127.0.0.1:{port}",)
    assert heads and heads[-1].startswith(b"GET /page HTTP/1.1")
    assert b"Proxy-" not in heads[-1]
    off = await box.run(RunRequest(world.alice, _connect_script(port)))
    assert "Connection refused" in off.output.shown and len(heads) == 1
