"""The web tools the `[web]` settings ask for, made before the gateway's parts and given to
them at construction.

Private contexts get `web_fetch` and `web_search` when `[web] enabled`; groups only when the
owner also set `[web] groups = true`. One fetcher, one search backend with its cache and one
ledger of search results serve every conversation of the process.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING

from gateway.agent.tools.web_tools import FetchPolicy, WebFetchTool, WebSearchTool
from gateway.agent.web.addresses import AddressPolicy, Resolver, parse_networks
from gateway.agent.web.fetch import FetchLimits, PageFetcher
from gateway.agent.web.links import HostAllowlist, SearchLedger, SessionLinks
from gateway.agent.web.search import (
    BraveSearch,
    CachedSearch,
    DdgsSearch,
    SearchBackend,
    SearxngSearch,
    TavilySearch,
    TtlCache,
)
from gateway.config.web import WebSettings

if TYPE_CHECKING:
    from gateway.agent.sessions import SessionStore

log = logging.getLogger(__name__)


def search_backend(web: WebSettings) -> SearchBackend | None:
    """The configured backend, cached; None when it cannot work (web.search_problem says why)."""
    if web.search_problem():
        return None
    timeout = web.search_timeout_seconds
    backend: SearchBackend
    if web.backend == "searxng":
        backend = SearxngSearch(web.search_url, timeout_seconds=timeout)
    elif web.backend == "brave":
        backend = BraveSearch(web.search_key(), web.search_url, timeout_seconds=timeout)
    elif web.backend == "tavily":
        backend = TavilySearch(web.search_key(), web.search_url, timeout_seconds=timeout)
    else:
        backend = DdgsSearch(web.ddgs_engines, timeout_seconds=timeout)
    return CachedSearch(backend, TtlCache(web.search_cache_seconds))


WebTool = WebFetchTool | WebSearchTool


def web_tools(
    web: WebSettings,
    sessions: SessionStore,
    *,
    resolver: Resolver | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> list[WebTool]:
    """`web_fetch` and `web_search` as `[web]` says ([] when off): for the owner's private
    contexts, and for groups too when `web.groups`. `sessions` are read for the links a
    session was given; `resolver` and `ssl_context` are for tests (a fixed host table, a test
    CA). The search key is masked through the settings' secrets (gateway/ops/redaction.py)."""
    if not web.enabled:
        return []
    problem = web.search_problem()
    if problem:
        log.warning("web_search will not work: %s", problem)
    ledger = SearchLedger()
    fetcher = PageFetcher(
        FetchLimits(web.fetch_timeout_seconds, web.fetch_max_bytes, web.fetch_max_redirects),
        AddressPolicy(parse_networks(web.allow_networks)),
        resolver=resolver,
        ssl_context=ssl_context,
    )
    policy = FetchPolicy(web.fetch, SessionLinks(sessions), ledger, HostAllowlist(web.allow_hosts))
    return [
        WebFetchTool(
            fetcher,
            policy,
            max_chars=web.fetch_max_chars,
            groups=web.groups,
            cache=TtlCache(web.search_cache_seconds, max_entries=32),
        ),
        WebSearchTool(
            search_backend(web),
            ledger,
            default_count=web.search_results,
            problem=problem,
            groups=web.groups,
        ),
    ]
