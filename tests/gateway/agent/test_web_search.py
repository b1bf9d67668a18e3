"""Search backends against a loopback fake of each API's wire shape, the cache, and ddgs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from gateway.agent.web.search import (
    BraveSearch,
    CachedSearch,
    DdgsSearch,
    SearchError,
    SearxngSearch,
    TavilySearch,
    TtlCache,
)
from gateway.assembly.web import search_backend
from gateway.config.web import WebSettings
from tests.fakes.search_server import BRAVE_KEY, TAVILY_KEY, FakeSearchServer


@pytest.fixture
async def api() -> AsyncIterator[FakeSearchServer]:
    async with FakeSearchServer() as server:
        yield server


async def test_searxng_json(api) -> None:
    results = await SearxngSearch(api.base_url).search("lisbon weather", 3)
    assert [r.url for r in results] == [f"https://site{n}.example/{n}" for n in (1, 2, 3)]
    assert results[0].title == "Result 1 for lisbon weather"
    assert results[0].snippet == "Snippet 1 about lisbon weather."
    assert api.queries == [("searxng", "lisbon weather")]


async def test_brave_sends_its_key_and_maps_descriptions(api) -> None:
    results = await BraveSearch(BRAVE_KEY, f"{api.base_url}/res/v1/web/search").search("q", 2)
    assert [r.snippet for r in results] == ["Snippet 1 about q.", "Snippet 2 about q."]
    with pytest.raises(SearchError, match=r"brave refused the request \(HTTP 401\); check the key"):
        await BraveSearch("wrong-key", f"{api.base_url}/res/v1/web/search").search("q", 2)


async def test_tavily_posts_the_query_with_a_bearer_key(api) -> None:
    results = await TavilySearch(TAVILY_KEY, f"{api.base_url}/search").search("pancakes", 4)
    assert len(results) == 4 and results[3].url == "https://site4.example/4"
    assert api.queries == [("tavily", "pancakes")]
    with pytest.raises(SearchError, match="tavily refused the request"):
        await TavilySearch("tvly-wrong", f"{api.base_url}/search").search("pancakes", 4)


async def test_service_failures_are_one_readable_line(api) -> None:
    searx = SearxngSearch(api.base_url)
    api.fail_with = 429
    with pytest.raises(SearchError, match="too many searches"):
        await searx.search("q", 3)
    api.fail_with = 500
    with pytest.raises(SearchError, match="answered HTTP 500"):
        await searx.search("q", 3)
    api.fail_with, api.raw = None, "<html>not json"
    with pytest.raises(SearchError, match="not JSON"):
        await searx.search("q", 3)
    api.raw = '{"results": [{"title": "no url"}, {"url": "javascript:alert(1)"}, 7]}'
    assert await searx.search("q", 3) == []  # malformed items are skipped, not fatal
    with pytest.raises(SearchError, match="could not be reached"):
        await SearxngSearch("http://127.0.0.1:1").search("q", 3)


async def test_a_searxng_without_json_enabled_says_how_to_fix_it(api) -> None:
    api.searxng_json = False
    with pytest.raises(SearchError, match=r"HTTP 403\); its settings.yml must allow the json"):
        await SearxngSearch(api.base_url).search("q", 3)


async def test_answers_are_cached_for_their_time_to_live(api) -> None:
    now = [0.0]
    cached = CachedSearch(SearxngSearch(api.base_url), TtlCache(300, clock=lambda: now[0]))
    first = await cached.search("Lisbon  weather", 3)
    again = await cached.search("lisbon weather", 3)  # same words, other case and spacing
    assert first == again and cached.calls == 1 and len(api.queries) == 1
    await cached.search("lisbon weather", 5)  # another count is another question
    now[0] = 301.0
    await cached.search("lisbon weather", 3)  # expired
    assert cached.calls == 3 and len(api.queries) == 3


async def test_failures_are_not_cached(api) -> None:
    cached = CachedSearch(SearxngSearch(api.base_url), TtlCache(300))
    api.fail_with = 502
    with pytest.raises(SearchError):
        await cached.search("q", 3)
    api.fail_with = None
    assert len(await cached.search("q", 3)) == 3


def test_the_cache_is_bounded_and_least_recently_used_goes_first() -> None:
    cache = TtlCache(60, max_entries=2, clock=lambda: 0.0)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3


# -- ddgs: the library's client is given by a factory; its wire is not reachable offline ----


class FakeDdgs:
    """Stands in for ddgs.DDGS (a third-party client): records calls, returns its shape."""

    calls: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, timeout: int, answer: Any = None, error: Exception | None = None):
        self.timeout = timeout
        self.answer = answer
        self.error = error

    def text(self, query: str, **kwargs: Any) -> Any:
        FakeDdgs.calls.append({"query": query, "timeout": self.timeout, **kwargs})
        if self.error is not None:
            raise self.error
        return self.answer


async def test_ddgs_maps_its_results_and_asks_only_the_configured_engines() -> None:
    answer = [{"title": "Lisbon", "href": "https://lisbon.example/", "body": "Sunny."}]
    backend = DdgsSearch(
        "duckduckgo", timeout_seconds=4, factory=lambda timeout: FakeDdgs(timeout, answer)
    )
    FakeDdgs.calls.clear()
    results = await backend.search("lisbon", 5)
    assert results[0].url == "https://lisbon.example/" and results[0].snippet == "Sunny."
    assert FakeDdgs.calls == [
        {
            "query": "lisbon",
            "timeout": 4,
            "max_results": 5,
            "backend": "duckduckgo",
            "safesearch": "moderate",
        }
    ]


async def test_ddgs_errors_become_search_errors_and_no_results_is_empty() -> None:
    class DDGSException(Exception):
        pass

    empty = DdgsSearch(factory=lambda t: FakeDdgs(t, error=DDGSException("No results found.")))
    assert await empty.search("zzz", 5) == []
    broken = DdgsSearch(factory=lambda t: FakeDdgs(t, error=DDGSException("ratelimit 202")))
    with pytest.raises(
        SearchError,
        match="web search failed: DuckDuckGo \\(the ddgs backend\\) "
        "answered with an error: ratelimit 202",
    ):
        await broken.search("zzz", 5)


# -- no internet, a dead server: one sentence naming the backend and its setting -------------


async def test_ddgs_without_internet_is_one_sentence_not_a_library_dump() -> None:
    class DDGSException(Exception):
        pass

    # What ddgs raises offline: its HTTP client's error, then the request's parameters.
    dump = DDGSException(
        'ConnectError: ConnectError("error sending request for url (https://html.duckduckgo.'
        "com/html/): client error (Connect): dns error: failed to lookup address information: "
        "Temporary failure in name resolution\") Query {'q': 'weather berlin', 'kl': 'wt-wt'}"
    )
    offline = DdgsSearch(factory=lambda t: FakeDdgs(t, error=dump))
    with pytest.raises(SearchError) as caught:
        await offline.search("weather berlin", 5)
    said = str(caught.value)
    assert said.startswith(
        "web search is not available: DuckDuckGo could not be reached from "
        "this machine (no internet connection"
    )
    assert '[web] backend = "ddgs" (CLAWGATE_WEB__BACKEND)' in said
    assert "Query" not in said and "{" not in said and "Error" not in said


async def test_a_dead_searxng_names_its_address_and_setting() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port that was free a moment ago: closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SearchError) as caught:
        await SearxngSearch(f"http://127.0.0.1:{port}").search("q", 3)
    assert str(caught.value) == (
        f"web search is not available: the SearXNG server could not be reached, nothing "
        f"answered at 127.0.0.1:{port} (is it running, and is the address right?); it is set "
        "by [web] search_url (CLAWGATE_WEB__SEARCH_URL)"
    )


async def test_a_name_that_does_not_resolve_says_the_machine_may_be_offline() -> None:
    import aiohttp.resolver

    from tests import loopback_only

    # The lookup goes through socket.getaddrinfo, which the test process refuses before any
    # query leaves it (an asynchronous resolver would ask the network itself: not here).
    assert aiohttp.resolver.DefaultResolver is aiohttp.resolver.ThreadedResolver
    with pytest.raises(SearchError) as caught:
        await BraveSearch("key").search("q", 3)
    assert loopback_only.attempts == ["name lookup of 'api.search.brave.com'"]
    loopback_only.attempts.clear()  # refused, as a machine without internet would
    assert str(caught.value) == (
        "web search is not available: Brave Search could not be reached, the name "
        "api.search.brave.com does not resolve (is this machine offline?); it is set by "
        '[web] backend = "brave" (CLAWGATE_WEB__BACKEND)'
    )


def test_the_ddgs_library_is_installed_and_has_the_api_we_call() -> None:
    """The default backend must import offline (no request is made here)."""
    from ddgs import DDGS

    client = DDGS(timeout=3)
    assert callable(client.text)


# -- choosing a backend from [web] ----------------------------------------------------------


def test_the_backend_follows_the_settings(monkeypatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    assert search_backend(WebSettings()).name == "ddgs"  # type: ignore[union-attr]
    assert search_backend(WebSettings(backend="none")) is None
    assert "search_url" in WebSettings(backend="searxng").search_problem()
    assert (
        search_backend(WebSettings(backend="searxng", search_url="http://127.0.0.1:8888")).name
        == "searxng"
    )  # type: ignore[union-attr]
    assert "BRAVE_API_KEY" in WebSettings(backend="brave").search_problem()
    monkeypatch.setenv("BRAVE_API_KEY", BRAVE_KEY)
    assert WebSettings(backend="brave").search_key() == BRAVE_KEY
    assert search_backend(WebSettings(backend="brave")).name == "brave"  # type: ignore[union-attr]
    assert "TAVILY_API_KEY" in WebSettings(backend="tavily").search_problem()
