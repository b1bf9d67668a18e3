"""Web search behind one small protocol: SearXNG, Brave, Tavily, or ddgs (no key).

Every backend turns a query into a list of `SearchResult` (title, URL, snippet) or raises
`SearchError` with one readable line (no key, quota, the service's own error). The backends
talk to endpoints the owner configured, so they do not go through web_fetch's address checks:
a SearXNG instance on the owner's own network is the usual setup. `CachedSearch` keeps answers
for a few minutes per process, so a model that repeats a query does not pay twice.

ddgs is a maintained metasearch library that needs no account; it scrapes the engines it is
told to use (by default only DuckDuckGo here), which may break when they change their pages:
the other three are stable APIs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported at the first search, not when the tool is registered
    import aiohttp

__all__ = [
    "BraveSearch",
    "CachedSearch",
    "DdgsSearch",
    "SearchBackend",
    "SearchError",
    "SearchResult",
    "SearxngSearch",
    "TavilySearch",
    "TtlCache",
]

MAX_TITLE_CHARS = 200
MAX_SNIPPET_CHARS = 500
MAX_RESPONSE_BYTES = 2_000_000
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"


class SearchError(Exception):
    """The search failed; `str()` is one line for the model."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class SearchBackend(Protocol):
    name: str

    async def search(self, query: str, count: int) -> list[SearchResult]: ...


def _clean(value: Any, limit: int) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_from(items: Any, url_key: str, snippet_key: str, count: int) -> list[SearchResult]:
    """Map a service's result objects, skipping any without an http(s) URL."""
    results: list[SearchResult] = []
    if not isinstance(items, list):
        return results
    for item in items:
        if not isinstance(item, dict):
            continue
        url = str(item.get(url_key) or "").strip()
        if not url.startswith(("http://", "https://")):
            continue
        results.append(
            SearchResult(
                _clean(item.get("title"), MAX_TITLE_CHARS) or url,
                url,
                _clean(item.get(snippet_key), MAX_SNIPPET_CHARS),
            )
        )
        if len(results) >= count:
            break
    return results


# Words of a failure to reach the network at all, as aiohttp, primp (under ddgs) and the
# system resolver put them: with no internet connection, search cannot work, and the person
# should hear that rather than a library's dump of its request.
_OFFLINE_WORDS = (
    "dns",
    "name resolution",
    "lookup address",
    "resolve",
    "name or service",
    "connecterror",
    "connect error",
    "(connect)",
    "network is unreachable",
    "no route to host",
    "connection refused",
    "error sending request",
    "nodename nor servname",
)


def looks_offline(text: str) -> bool:
    """Whether an error's text says the network could not be reached (not a refusal)."""
    lowered = text.lower()
    return any(word in lowered for word in _OFFLINE_WORDS)


class _HttpBackend:
    """What the three HTTP backends share: one request with a deadline, a JSON answer."""

    name = "http"
    label = "the search service"
    refused_hint = "check the key ([web] api_key or its environment variable)"
    default_url = ""

    def __init__(self, url: str, *, timeout_seconds: float = 10.0) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds

    def _setting(self) -> str:
        """The setting that points at this service, in the person's words."""
        if self.url and self.url != self.default_url:
            return "[web] search_url (CLAWGATE_WEB__SEARCH_URL)"
        return f'[web] backend = "{self.name}" (CLAWGATE_WEB__BACKEND)'

    def _unreachable(self, exc: Exception) -> SearchError:
        """One sentence for a service that could not be reached: which, where, and why."""
        from urllib.parse import urlsplit

        host = urlsplit(self.url).netloc or self.url
        dns = type(exc).__name__ == "ClientConnectorDNSError" or "resolv" in str(exc).lower()
        if dns:
            why = (
                f"the name {urlsplit(self.url).hostname} does not resolve (is this machine "
                "offline?)"
            )
        else:
            why = f"nothing answered at {host} (is it running, and is the address right?)"
        return SearchError(
            f"web search is not available: {self.label} could not be reached, "
            f"{why}; it is set by {self._setting()}"
        )

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.timeout_seconds)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.request(method, url, **kwargs) as response,
            ):
                body = await _read_capped(response, MAX_RESPONSE_BYTES)
                if response.status in (401, 403):
                    raise SearchError(
                        f"{self.name} refused the request (HTTP "
                        f"{response.status}); {self.refused_hint}"
                    )
                if response.status == 429:
                    raise SearchError(
                        f"{self.name} says too many searches (HTTP 429); try again later"
                    )
                if response.status >= 400:
                    raise SearchError(f"{self.name} answered HTTP {response.status}")
        except TimeoutError:
            raise SearchError(
                f"{self.name} did not answer within {self.timeout_seconds:g} s"
            ) from None
        except aiohttp.ClientConnectionError as exc:
            raise self._unreachable(exc) from None
        except aiohttp.ClientError as exc:
            raise SearchError(f"{self.name} could not be reached ({type(exc).__name__})") from None
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise SearchError(f"{self.name} sent an answer that is not JSON") from None


async def _read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body, or SearchError if it is larger than `cap` (a search answer is small)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65_536):
        size += len(chunk)
        if size > cap:
            raise SearchError(f"the search answer was larger than {cap:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class SearxngSearch(_HttpBackend):
    """A SearXNG instance (its settings.yml must list `json` under search.formats)."""

    name = "searxng"
    label = "the SearXNG server"
    refused_hint = "its settings.yml must allow the json format (search: formats: [html, json])"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        url = self.url.rstrip("/") + "/search"
        data = await self._json(
            "GET",
            url,
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
        )
        if not isinstance(data, dict):
            raise SearchError("searxng sent an unexpected answer")
        return results_from(data.get("results"), "url", "content", count)


class BraveSearch(_HttpBackend):
    """Brave Search API (`X-Subscription-Token`)."""

    name = "brave"
    label = "Brave Search"
    default_url = BRAVE_URL

    def __init__(self, key: str, url: str = "", *, timeout_seconds: float = 10.0) -> None:
        super().__init__(url or BRAVE_URL, timeout_seconds=timeout_seconds)
        self._key = key

    async def search(self, query: str, count: int) -> list[SearchResult]:
        data = await self._json(
            "GET",
            self.url,
            params={"q": query, "count": str(min(count, 20))},
            headers={"Accept": "application/json", "X-Subscription-Token": self._key},
        )
        web = data.get("web") if isinstance(data, dict) else None
        return results_from(
            web.get("results") if isinstance(web, dict) else [], "url", "description", count
        )


class TavilySearch(_HttpBackend):
    """Tavily search API (bearer key)."""

    name = "tavily"
    label = "Tavily"
    default_url = TAVILY_URL

    def __init__(self, key: str, url: str = "", *, timeout_seconds: float = 10.0) -> None:
        super().__init__(url or TAVILY_URL, timeout_seconds=timeout_seconds)
        self._key = key

    async def search(self, query: str, count: int) -> list[SearchResult]:
        data = await self._json(
            "POST",
            self.url,
            json={"query": query, "max_results": min(count, 20), "search_depth": "basic"},
            headers={"Authorization": f"Bearer {self._key}"},
        )
        if not isinstance(data, dict):
            raise SearchError("tavily sent an unexpected answer")
        return results_from(data.get("results"), "url", "content", count)


# Builds the ddgs client: `factory(timeout)` returns an object with `.text(query, **kw)`.
DdgsFactory = Callable[[int], Any]


def _ddgs_client(timeout: int) -> Any:
    from ddgs import DDGS

    return DDGS(timeout=timeout)


class DdgsSearch:
    """The ddgs library (no account). Blocking, so it runs in a worker thread."""

    name = "ddgs"

    def __init__(
        self,
        engines: str = "duckduckgo",
        *,
        timeout_seconds: float = 10.0,
        factory: DdgsFactory | None = None,
    ) -> None:
        self.engines = engines
        self.timeout_seconds = timeout_seconds
        self._factory = factory or _ddgs_client

    async def search(self, query: str, count: int) -> list[SearchResult]:
        def run() -> Any:
            client = self._factory(max(1, round(self.timeout_seconds)))
            return client.text(
                query, max_results=count, backend=self.engines, safesearch="moderate"
            )

        try:
            async with asyncio.timeout(self.timeout_seconds + 2):
                items = await asyncio.to_thread(run)
        except TimeoutError:
            raise SearchError(f"ddgs did not answer within {self.timeout_seconds:g} s") from None
        except Exception as exc:
            message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            if "no results" in message.lower():
                return []
            raise SearchError(ddgs_failure(self.engines, str(exc) or type(exc).__name__)) from None
        return results_from(items, "href", "body", count)


def ddgs_failure(engines: str, text: str) -> str:
    """One sentence for a failed ddgs search. ddgs wraps the HTTP library's error in its own
    with the request's parameters ("DNSError ... Query {...}"): none of that is for a person."""
    who = "DuckDuckGo" if engines == "duckduckgo" else f"the ddgs engines ({engines})"
    if looks_offline(text):
        return (
            f"web search is not available: {who} could not be reached from this machine "
            "(no internet connection, or its name does not resolve); it is set by [web] "
            'backend = "ddgs" (CLAWGATE_WEB__BACKEND): without internet, use a SearXNG '
            'server on your network ([web] backend = "searxng" and search_url) or '
            '"none"'
        )
    first = text.splitlines()[0] if text else ""
    first = first.split(" Query {")[0].split("{")[0].strip()[:160]
    return f"web search failed: {who} (the ddgs backend) answered with an error: {first}"


class TtlCache:
    """A small least-recently-used map whose entries expire (injectable monotonic clock)."""

    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> Any | None:
        item = self._items.get(key)
        if item is None:
            return None
        expires, value = item
        if self._clock() >= expires:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if self.ttl <= 0:
            return
        self._items[key] = (self._clock() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)


class CachedSearch:
    """A backend whose answers are kept `ttl` seconds (per process; failures are not kept)."""

    def __init__(self, backend: SearchBackend, cache: TtlCache) -> None:
        self.backend = backend
        self.name = backend.name
        self.cache = cache
        self.calls = 0  # searches that reached the backend (for tests and the bench)

    async def search(self, query: str, count: int) -> list[SearchResult]:
        key = (" ".join(query.lower().split()), count)
        cached = self.cache.get(key)
        if cached is not None:
            return list(cached)
        self.calls += 1
        results = await self.backend.search(query, count)
        self.cache.put(key, tuple(results))
        return results
