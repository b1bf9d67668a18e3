"""Fetch one web page within limits, connecting only to addresses that were checked.

The send chain, one layer each: `fetch` (overall deadline) -> `_follow` (redirects, each one
checked again, at most `max_redirects`) -> `_open` (resolve, check every address, pin them)
-> `_read` (status, content type, body streamed up to `max_bytes`).

Pinning: the host is resolved once by us; aiohttp's connector asks our `PinnedResolver`, which
answers with exactly the checked addresses and knows no other host, so there is no second
lookup for a rebinding DNS server to answer differently. TLS still verifies the certificate
against the host name (aiohttp passes it as SNI), and the Host header is the URL's. A URL whose
host is an IP literal is checked as that address (aiohttp does not resolve those). No proxy
from the environment is used (`trust_env=False`): a proxy would make its own lookups.

aiohttp is imported at the first fetch (pinning.py holds the resolver class), not when the
tool is registered: a gateway polls its channels without it (tests/gateway/assembly/
test_startup_imports.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from yarl import URL

from gateway.agent.web.addresses import AddressPolicy, AddressRefused, Resolver, SystemResolver

if TYPE_CHECKING:
    import aiohttp

    from gateway.agent.web.pinning import PinnedResolver

__all__ = ["FetchError", "FetchLimits", "FetchedPage", "PageFetcher", "check_url"]

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_URL_CHARS = 2_048
USER_AGENT = "Mozilla/5.0 (compatible; clawgate web_fetch; personal assistant)"
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5"
# What a page may be: HTML, plain text and its relatives. Everything else (images, PDFs,
# archives, video) is refused before its body is read.
TEXT_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "application/json",
        "application/xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/ld+json",
    }
)
CHUNK_BYTES = 65_536


class FetchError(Exception):
    """The page was not fetched; `str()` is one line for the model (and the person)."""


@dataclass(frozen=True, slots=True)
class FetchLimits:
    timeout_seconds: float = 15.0  # the whole fetch: every redirect, the body
    max_bytes: int = 3_000_000  # of the (decompressed) body; more is cut, and said so
    max_redirects: int = 5


@dataclass(frozen=True, slots=True)
class FetchedPage:
    url: str  # after redirects
    status: int
    content_type: str  # the media type, lower case, without parameters ("" if none)
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than max_bytes; only its start is here
    redirects: tuple[str, ...] = ()  # the URLs that redirected, in order


def is_text_type(media_type: str) -> bool:
    return (
        media_type.startswith("text/")
        or media_type in TEXT_TYPES
        or media_type.endswith(("+xml", "+json"))
    )


def check_url(raw: str) -> URL:
    """A URL web_fetch may request: http(s), a host, no credentials, not absurdly long."""
    raw = raw.strip()
    if not raw:
        raise FetchError("the URL is empty")
    if len(raw) > MAX_URL_CHARS:
        raise FetchError(f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        url = URL(raw)
    except (ValueError, TypeError) as exc:
        raise FetchError(f"not a valid URL: {raw[:200]!r} ({exc})") from None
    if url.scheme not in ("http", "https"):
        shown = url.scheme or "none (write it with https://)"
        raise FetchError(f"only http and https URLs can be fetched, not scheme {shown}")
    if not url.raw_host:
        raise FetchError(f"the URL has no host: {raw[:200]!r}")
    if url.raw_user or url.raw_password:
        raise FetchError("URLs with a user name or password are not fetched")
    return url.with_fragment(None)


class PageFetcher:
    """GETs pages for web_fetch. Stateless between calls: each fetch has its own connections."""

    def __init__(
        self,
        limits: FetchLimits | None = None,
        policy: AddressPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.limits = limits or FetchLimits()
        self.policy = policy or AddressPolicy()
        self.resolver = resolver or SystemResolver()
        self._ssl = ssl_context if ssl_context is not None else True

    async def fetch(self, raw_url: str) -> FetchedPage:
        import aiohttp

        from gateway.agent.web.pinning import PinnedResolver

        url = check_url(raw_url)
        seconds = self.limits.timeout_seconds
        pinned = PinnedResolver()
        connector = aiohttp.TCPConnector(
            resolver=pinned, use_dns_cache=False, force_close=True, ssl=self._ssl
        )
        headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
        try:
            async with (
                asyncio.timeout(seconds),
                aiohttp.ClientSession(
                    connector=connector,
                    trust_env=False,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(total=None),
                ) as session,
            ):
                return await self._follow(session, pinned, url)
        except TimeoutError:
            raise FetchError(
                f"{url.human_repr()} did not answer within {seconds:g} s (the fetch time limit)"
            ) from None
        except AddressRefused as exc:
            raise FetchError(str(exc)) from None
        except aiohttp.ClientError as exc:
            raise FetchError(f"could not fetch {url.human_repr()}: {_describe(exc)}") from None

    async def _follow(
        self, session: aiohttp.ClientSession, pinned: PinnedResolver, url: URL
    ) -> FetchedPage:
        redirects: list[str] = []
        while True:
            try:
                await self._pin(pinned, url)
            except AddressRefused as exc:
                if not redirects:
                    raise
                raise FetchError(
                    f"{redirects[-1]} redirected to {url.human_repr()[:200]}, "
                    f"which is refused: {exc}"
                ) from None
            async with session.get(url, allow_redirects=False) as response:
                location = response.headers.get("Location")
                if response.status not in REDIRECTS or not location:
                    return await self._read(response, url, tuple(redirects))
            if len(redirects) >= self.limits.max_redirects:
                raise FetchError(
                    f"{url.human_repr()} redirected more than "
                    f"{self.limits.max_redirects} times; stopped"
                )
            redirects.append(url.human_repr())
            try:
                target = url.join(URL(location))
            except (ValueError, TypeError):
                raise FetchError(
                    f"{url.human_repr()} redirected to an invalid URL {location[:200]!r}"
                ) from None
            try:
                url = check_url(str(target))
            except FetchError as exc:
                raise FetchError(
                    f"{redirects[-1]} redirected to {target.human_repr()[:200]}, "
                    f"which is refused: {exc}"
                ) from None

    async def _pin(self, pinned: PinnedResolver, url: URL) -> None:
        """Resolve the hop's host once, check every address, and pin the result."""
        host = url.raw_host or ""
        literal = host.strip("[]")
        try:
            ipaddress.ip_address(literal)
        except ValueError:
            addresses = await self.resolver.resolve(host, url.port or 0)
            pinned.pins[host] = self.policy.check(host, addresses)
        else:
            self.policy.check(literal, [literal])

    async def _read(
        self, response: aiohttp.ClientResponse, url: URL, redirects: tuple[str, ...]
    ) -> FetchedPage:
        shown = url.human_repr()
        if not 200 <= response.status < 300:
            reason = f" {response.reason}" if response.reason else ""
            raise FetchError(f"{shown} answered HTTP {response.status}{reason}")
        media_type = response.content_type.lower() if "Content-Type" in response.headers else ""
        if media_type and not is_text_type(media_type):
            raise FetchError(
                f"{shown} is {media_type}, not a web page or text; web_fetch only "
                "reads HTML and text"
            )
        limit = self.limits.max_bytes
        chunks: list[bytes] = []
        size = 0
        truncated = False
        async for chunk in response.content.iter_chunked(CHUNK_BYTES):
            room = limit - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
        body = b"".join(chunks)
        wide = (response.charset or "").lower().startswith(("utf-16", "utf-32"))
        if not wide and b"\x00" in body[:4096]:
            raise FetchError(
                f"{shown} sent binary data (as {media_type or 'no content type'})"
                "; web_fetch only reads HTML and text"
            )
        return FetchedPage(
            str(url), response.status, media_type, response.charset, body, truncated, redirects
        )


def _describe(exc: Any) -> str:
    """One short line for a client error (no traceback, no internal reprs)."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "its TLS certificate is not valid"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "its host could not be resolved"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"could not connect ({exc.os_error.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the page arrived broken (bad encoding or cut off)"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}{': ' + text[:200] if text else ''}"
