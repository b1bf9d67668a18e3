"""A loopback stand-in for three search APIs, each in its own wire shape:

- SearXNG: `GET /search?q=...&format=json` -> `{"results": [{"title", "url", "content"}]}`
  (format other than json: 403, as a SearXNG whose settings do not allow it answers)
- Brave: `GET /res/v1/web/search?q=...&count=N` with `X-Subscription-Token` ->
  `{"web": {"results": [{"title", "url", "description"}]}}`
- Tavily: `POST /search` (JSON body `query`, `max_results`) with `Authorization: Bearer` ->
  `{"results": [{"title", "url", "content", "score"}]}`

`queries` records what each API was asked; `fail_with` makes the next answers an HTTP error.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

BRAVE_KEY = "brave-test-key-123456"
TAVILY_KEY = "tvly-test-key-123456"


def hits(query: str, count: int, base: str = "") -> list[dict[str, str]]:
    """`base` (a loopback web server) makes every result a page that can be fetched."""
    return [
        {
            "title": f"Result {n} for {query}",
            "url": f"{base}/article?n={n}" if base else f"https://site{n}.example/{n}",
            "text": f"Snippet {n} about {query}.",
        }
        for n in range(1, count + 1)
    ]


class FakeSearchServer:
    def __init__(self) -> None:
        self.queries: list[tuple[str, str]] = []  # (api, query)
        self.fail_with: int | None = None
        self.raw: str | None = None  # a body sent verbatim instead of results
        self.result_base = ""  # results point at this server when set (see hits)
        self.searxng_json = True  # False: like a SearXNG whose settings.yml lacks json
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/search", self._searxng)
        app.router.add_get("/res/v1/web/search", self._brave)
        app.router.add_post("/search", self._tavily)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSearchServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _answer(self, body: Any) -> web.Response:
        if self.fail_with is not None:
            return web.json_response({"error": "nope"}, status=self.fail_with)
        if self.raw is not None:
            return web.Response(text=self.raw, content_type="application/json")
        return web.json_response(body)

    async def _searxng(self, request: web.Request) -> web.Response:
        if request.query.get("format") != "json" or not self.searxng_json:
            return web.Response(status=403, text="format not allowed")
        query = request.query.get("q", "")
        self.queries.append(("searxng", query))
        results = [
            {"title": h["title"], "url": h["url"], "content": h["text"], "engine": "fake"}
            for h in hits(query, 8, self.result_base)
        ]
        return self._answer({"query": query, "results": results})

    async def _brave(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return web.json_response({"error": "bad token"}, status=401)
        query = request.query.get("q", "")
        self.queries.append(("brave", query))
        count = int(request.query.get("count", "10"))
        results = [
            {"title": h["title"], "url": h["url"], "description": h["text"]}
            for h in hits(query, count, self.result_base)
        ]
        return self._answer({"type": "search", "web": {"results": results}})

    async def _tavily(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            return web.json_response({"detail": "Unauthorized"}, status=401)
        body = await request.json()
        query = str(body.get("query", ""))
        self.queries.append(("tavily", query))
        results = [
            {"title": h["title"], "url": h["url"], "content": h["text"], "score": 0.9}
            for h in hits(query, int(body.get("max_results", 5)), self.result_base)
        ]
        return self._answer({"query": query, "results": results})
