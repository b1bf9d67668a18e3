"""web_fetch's fetcher against a loopback web server: limits, redirects, address checks,
pinning, TLS with the host name, and extraction to Markdown."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.agent.web.addresses import AddressPolicy, AddressRefused, parse_networks
from gateway.agent.web.extract import page_to_markdown
from gateway.agent.web.fetch import FetchError, FetchLimits, PageFetcher, check_url
from tests.fakes.web_server import FakeWebServer

LOOPBACK = AddressPolicy(parse_networks(["127.0.0.1/32"]))  # what only tests allow


class TableResolver:
    """A fixed host table; `answers` lets a host change its answer on each lookup."""

    def __init__(self, table: dict[str, list[list[str]] | list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        entry = self.table.get(host)
        if entry is None:
            raise AddressRefused(f"{host} could not be resolved (test table)")
        if entry and isinstance(entry[0], list):
            answers = entry  # a list of successive answers
            return list(answers[min(self.calls.count(host), len(answers)) - 1])  # type: ignore[arg-type]
        return list(entry)  # type: ignore[arg-type]


@pytest.fixture
async def site() -> AsyncIterator[FakeWebServer]:
    async with FakeWebServer(slow_seconds=5.0) as server:
        yield server


def fetcher(**limits: float) -> PageFetcher:
    return PageFetcher(
        FetchLimits(**limits),
        LOOPBACK,  # type: ignore[arg-type]
        resolver=TableResolver({"pages.test": ["127.0.0.1"]}),
    )


async def test_an_article_comes_back_as_markdown_without_menus_or_scripts(site) -> None:
    page = await fetcher().fetch(site.url("/article"))
    assert page.status == 200 and page.content_type == "text/html" and not page.truncated
    extracted = page_to_markdown(page)
    assert extracted.title == "Lisbon weather on Friday"
    assert "sunny with a high of 24 degrees" in extracted.text
    assert "[full forecast](https://example.org/forecast)" in extracted.text  # links kept
    assert "| Friday | 24 |" in extracted.text  # tables kept
    for noise in ("Cookie settings", "do not show this", "Log in"):
        assert noise not in extracted.text


async def test_plain_text_json_and_a_declared_charset_pass_through(site) -> None:
    plain = page_to_markdown(await fetcher().fetch(site.url("/plain")))
    assert plain.text == "just some plain text\nsecond line"
    data = page_to_markdown(await fetcher().fetch(site.url("/json")))
    assert '"city": "Lisbon"' in data.text
    latin = page_to_markdown(await fetcher().fetch(site.url("/latin1")))
    assert latin.text == "Café à Lisbonne, crème brûlée"


async def test_by_default_loopback_is_refused_and_nothing_is_sent(site) -> None:
    default = PageFetcher(FetchLimits())  # the policy every real gateway gets by default
    with pytest.raises(FetchError, match=r"127\.0\.0\.1 is a loopback address"):
        await default.fetch(site.url("/article"))
    with pytest.raises(FetchError, match="loopback"):
        await default.fetch(site.url("/article", host="localhost"))  # the hosts file
    with pytest.raises(FetchError, match="loopback"):
        await default.fetch(f"http://[::1]:{site.port}/article")
    assert site.requests == []


async def test_a_name_that_resolves_to_a_private_address_is_refused_before_connecting(site) -> None:
    resolver = TableResolver(
        {
            "intranet.test": ["10.20.30.40"],
            "meta.test": ["169.254.169.254"],
            "mixed.test": ["93.184.216.34", "127.0.0.1"],
        }
    )
    guarded = PageFetcher(FetchLimits(), AddressPolicy(), resolver=resolver)
    with pytest.raises(FetchError, match=r"intranet\.test \(10\.20\.30\.40\) is a private"):
        await guarded.fetch("http://intranet.test/")
    with pytest.raises(FetchError, match="cloud metadata"):
        await guarded.fetch("http://meta.test/latest/meta-data/")
    with pytest.raises(FetchError, match="loopback"):
        await guarded.fetch(f"http://mixed.test:{site.port}/article")
    with pytest.raises(FetchError, match="cloud metadata"):
        await guarded.fetch("http://169.254.169.254/latest/meta-data/")
    assert site.requests == []


async def test_every_redirect_is_checked_again(site) -> None:
    for path, why in (
        ("/to-private", "10.0.0.1 is a private address"),
        ("/to-metadata", "cloud metadata"),
        ("/to-ipv6-loopback", "::1 is a loopback"),
        ("/to-ftp", "only http and https"),
    ):
        with pytest.raises(FetchError, match=why) as caught:
            # Loopback is allowed here (the server lives there); a redirect onward to
            # another forbidden address is refused all the same.
            await PageFetcher(
                FetchLimits(),
                AddressPolicy(parse_networks(["127.0.0.1/32"])),
            ).fetch(site.url(path))
        assert "redirected to" in str(caught.value)
    assert site.paths() == ["/to-private", "/to-metadata", "/to-ipv6-loopback", "/to-ftp"]


async def test_redirects_are_followed_within_the_limit(site) -> None:
    page = await fetcher().fetch(site.url("/chain/3"))
    assert page.url.endswith("/article") and len(page.redirects) == 4
    with pytest.raises(FetchError, match="redirected more than 2 times"):
        await fetcher(max_redirects=2).fetch(site.url("/chain/5"))


async def test_the_connection_goes_to_the_checked_address_without_a_second_lookup(site) -> None:
    """A rebinding resolver answers loopback (allowed here) first and a private address on
    every later lookup: the fetch uses the first answer, and asks only once per hop."""
    resolver = TableResolver({"rebind.test": [["127.0.0.1"], ["10.9.9.9"]]})
    pinned = PageFetcher(FetchLimits(), LOOPBACK, resolver=resolver)
    page = await pinned.fetch(f"http://rebind.test:{site.port}/article")
    assert page.status == 200
    assert resolver.calls == ["rebind.test"]
    assert site.requests[-1].host == f"rebind.test:{site.port}"  # the Host header is the name
    # A redirect to the same name is a new hop: looked up (once) and checked again.
    with pytest.raises(FetchError, match=r"rebind\.test \(10\.9\.9\.9\) is a private"):
        await pinned.fetch(site.url("/to-named/rebind.test"))
    assert resolver.calls == ["rebind.test", "rebind.test"]


async def test_binary_content_is_refused_before_its_body_is_read(site) -> None:
    with pytest.raises(FetchError, match="image/png, not a web page"):
        await fetcher().fetch(site.url("/binary"))
    with pytest.raises(FetchError, match="application/pdf"):
        await fetcher().fetch(site.url("/pdf"))
    with pytest.raises(FetchError, match=r"sent binary data \(as text/html\)"):
        await fetcher().fetch(site.url("/mislabeled-binary"))


async def test_a_huge_page_is_cut_at_the_download_limit_and_the_rest_never_read(site) -> None:
    page = await fetcher(max_bytes=200_000).fetch(site.url("/huge"))
    assert page.truncated and len(page.body) == 200_000
    assert site.huge_sent < 5_000_000  # the server stopped writing long before 20 MB
    assert "big page text" in page_to_markdown(page).text


async def test_a_compression_bomb_is_cut_at_the_limit_of_decompressed_bytes(site) -> None:
    page = await fetcher(max_bytes=100_000).fetch(site.url("/bomb"))
    assert page.truncated and len(page.body) == 100_000


async def test_a_slow_page_stops_at_the_time_limit(site) -> None:
    with pytest.raises(FetchError, match=r"did not answer within 0\.5 s"):
        await fetcher(timeout_seconds=0.5).fetch(site.url("/slow"))
    with pytest.raises(FetchError, match=r"within 0\.5 s"):
        await fetcher(timeout_seconds=0.5).fetch(site.url("/slow-body"))


async def test_http_errors_and_bad_urls_are_one_clear_line(site) -> None:
    with pytest.raises(FetchError, match=r"answered HTTP 404 Not Found"):
        await fetcher().fetch(site.url("/missing"))
    for bad, why in (
        ("", "empty"),
        ("file:///etc/passwd", "not scheme file"),
        ("example.org/page", "write it with https://"),
        ("http://user:pw@pages.test/", "user name or password"),
        ("https://x.test/" + "a" * 3000, "longer than 2048"),
        ("http:///nohost", "no host"),
    ):
        with pytest.raises(FetchError, match=why):
            check_url(bad)
    with pytest.raises(FetchError, match="could not connect"):
        await fetcher().fetch("http://127.0.0.1:1/")  # nothing listens on port 1


# -- TLS: the pinned address, the host name for SNI and the certificate ------------------------


def _certificate(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=pages.test",
            "-addext",
            "subjectAltName=DNS:pages.test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


async def test_https_connects_to_the_pinned_address_and_verifies_the_host_name(tmp_path) -> None:
    key, cert = _certificate(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    seen_sni: list[str | None] = []
    server_context.sni_callback = lambda sock, name, ctx: seen_sni.append(name)  # type: ignore[assignment,func-returns-value]
    client_context = ssl.create_default_context(cafile=str(cert))
    async with FakeWebServer(ssl_context=server_context) as tls_site:
        resolver = TableResolver({"pages.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
        client = PageFetcher(FetchLimits(), LOOPBACK, resolver=resolver, ssl_context=client_context)
        page = await client.fetch(tls_site.url("/article", host="pages.test"))
        assert page.status == 200 and seen_sni == ["pages.test"]
        # The same address under a name the certificate does not carry: refused by TLS.
        with pytest.raises(FetchError, match="certificate is not valid"):
            await client.fetch(tls_site.url("/article", host="other.test"))
