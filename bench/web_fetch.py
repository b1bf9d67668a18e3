"""What web_fetch adds on top of downloading a page, and how many tokens its result costs.

A loopback aiohttp server serves each page. For every page the bench times, over N runs:
- raw: a plain aiohttp GET of the same URL (the floor: what any client pays);
- fetch: PageFetcher.fetch (resolve + address check + pinned connection + limits);
- tool: the whole web_fetch tool call (fetch + trafilatura extraction in a worker thread +
  the untrusted framing), with fetch = "any" and the page cache off.
"Added" is tool minus raw: clawgate's own latency for a page. Tokens are estimated the way the
gateway does (4 characters a token) for the raw HTML and for the tool result.

Pages: `article` (the test suite's short article), `news` (a generated ~150 KB news page with
menus, inline scripts, a sidebar and comments around a 1,200-word story), `long` (a generated
~600 KB documentation page); `--page FILE` adds any saved HTML file (say, a page from your
browser) to the set. The generated pages are synthetic: real pages vary more.

    python bench/web_fetch.py [--runs 30] [--page saved.html ...]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.agent.sessions import estimate_tokens
from gateway.agent.tools import ToolContext
from gateway.agent.tools.args import run_checked
from gateway.agent.tools.web_tools import FetchPolicy, WebFetchTool
from gateway.agent.web.addresses import AddressPolicy, parse_networks
from gateway.agent.web.fetch import FetchLimits, PageFetcher
from gateway.agent.web.links import HostAllowlist, SearchLedger
from gateway.agent.web.search import TtlCache
from memory.layout import dm_session_key
from tests.fakes.web_server import ARTICLE

STORY = (
    "the city council said on monday that the new tram line would open next spring after "
    "years of delays caused by funding disputes and a redesign of the central station "
    "residents welcomed the news while shop owners worried about months of roadworks"
)
WORDS = STORY.split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def news_page(rng: random.Random) -> str:
    nav = "".join(f'<li><a href="/section/{i}">Section {i}</a></li>' for i in range(60))
    script = "<script>" + "var x=" + "1234567890" * 2_000 + ";</script>"
    story = "".join(f"<p>{' '.join(sentence(rng, 16) for _ in range(4))}</p>" for _ in range(18))
    side = "".join(
        f'<div class="teaser"><a href="/story/{i}">{sentence(rng, 8)}</a></div>' for i in range(80)
    )
    comments = "".join(
        f'<div class="comment"><b>user{i}</b><p>{sentence(rng, 20)}</p></div>' for i in range(60)
    )
    return (
        f"<!doctype html><html><head><title>Tram line to open next spring</title>{script}"
        f"<style>{'.a{color:red}' * 2000}</style></head><body><header><ul>{nav}</ul>"
        f"</header><main><article><h1>Tram line to open next spring</h1>{story}</article>"
        f"<aside>{side}</aside><section id='comments'>{comments}</section></main>"
        f"<footer>{'Cookie settings. Privacy. Terms. ' * 40}</footer></body></html>"
    )


def long_page(rng: random.Random) -> str:
    code = "fn main() {}\n" * 30
    sections = "".join(
        f"<h2>Chapter {c}</h2>"
        + "".join(f"<p>{' '.join(sentence(rng, 14) for _ in range(5))}</p>" for _ in range(25))
        + f"<pre><code>{code}</code></pre>"
        for c in range(12)
    )
    return (
        f"<!doctype html><html><head><title>The manual</title></head><body>"
        f"<nav>{'<a href=/x>link</a> ' * 300}</nav><article>{sections}</article></body></html>"
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--page", action="append", default=[], type=Path)
    args = parser.parse_args()
    rng = random.Random(7)
    pages = {"article": ARTICLE, "news": news_page(rng), "long": long_page(rng)}
    for path in args.page:
        pages[path.name] = path.read_text(encoding="utf-8", errors="replace")

    app = web.Application()
    for name, html in pages.items():
        app.router.add_get(
            f"/{name}", lambda request, html=html: web.Response(text=html, content_type="text/html")
        )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]

    fetcher = PageFetcher(
        FetchLimits(max_bytes=10_000_000), AddressPolicy(parse_networks(["127.0.0.1/32"]))
    )
    tool = WebFetchTool(
        fetcher,
        FetchPolicy("any", None, SearchLedger(), HostAllowlist([])),  # type: ignore[arg-type]
        max_chars=200_000,
        cache=TtlCache(0),
    )
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ToolContext(Path(tmp), dm_session_key("bench"), True)
        started = time.perf_counter()
        url = f"http://127.0.0.1:{port}/article"
        await run_checked(tool, {"url": url}, ctx)  # imports trafilatura
        first = time.perf_counter() - started
        print(f"first call (imports trafilatura): {first * 1000:.0f} ms\n")
        print(
            f"{'page':<22} {'html KiB':>9} {'raw p50':>8} {'fetch p50':>10} {'tool p50':>9} "
            f"{'tool p95':>9} {'added p50':>10} {'html tok':>9} {'result tok':>11}"
        )
        async with aiohttp.ClientSession() as session:
            for name, html in pages.items():
                url = f"http://127.0.0.1:{port}/{name}"
                raw, fetch, whole = [], [], []
                result = ""
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    async with session.get(url) as response:
                        await response.read()
                    t1 = time.perf_counter()
                    await fetcher.fetch(url)
                    t2 = time.perf_counter()
                    result = await run_checked(tool, {"url": url}, ctx)
                    t3 = time.perf_counter()
                    raw.append(t1 - t0)
                    fetch.append(t2 - t1)
                    whole.append(t3 - t2)
                added = [w - r for w, r in zip(whole, raw, strict=True)]
                print(
                    f"{name[:22]:<22} {len(html.encode()) / 1024:>9.0f} "
                    f"{statistics.median(raw) * 1000:>7.1f}ms "
                    f"{statistics.median(fetch) * 1000:>9.1f}ms "
                    f"{statistics.median(whole) * 1000:>8.1f}ms "
                    f"{pct(whole, 0.95) * 1000:>8.1f}ms "
                    f"{statistics.median(added) * 1000:>9.1f}ms "
                    f"{estimate_tokens(html):>9,} {estimate_tokens(result):>11,}"
                )
    await runner.cleanup()
    print(
        "\nadded = the web_fetch tool call minus a plain GET of the same page; tokens = "
        "characters / 4. Results above 20,000 characters are cut by default "
        "([web] fetch_max_chars), here the cap is 200,000 to show the whole extraction."
    )


if __name__ == "__main__":
    asyncio.run(main())
