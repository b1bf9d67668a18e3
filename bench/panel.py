"""Page loads of the web panel: the overview with many people and long transcripts.

Builds a workspaces root with `--people` seeded workspaces holding `--lines` transcript lines
in total and a few pending pairing requests, runs a Gateway (instant provider, no channels)
with its panel on a loopback port, logs in, and times full HTTP GETs of the overview (and,
for comparison, one person's sessions and metrics pages, which read transcripts). Prints
p50/p95 in milliseconds. Target: overview p50 < 50 ms at 100 people, 10,000 lines.

    python bench/panel.py [--people 100] [--lines 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp import ClientSession, CookieJar

from bench.turn_overhead import InstantProvider
from channels.base import InboundMessage
from gateway.agent.sessions import transcript_path
from gateway.config.panel import PanelSettings
from gateway.config.settings import load_settings
from gateway.panel.auth import issue_link_code
from gateway.panel.host import PanelHost
from gateway.panel.server import PanelServer
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.pairing import Pairing
from gateway.workspace.seed import ensure_workspace
from memory.layout import dm_session_key
from tests.conftest import AllowAll


def build_root(root: Path, people: int, lines: int) -> list[str]:
    ids = [f"telegram-{1000 + n}" for n in range(people)]
    per_person = max(1, lines // people)
    for person in ids:
        workspace = ensure_workspace(root, person)
        path = transcript_path(workspace, dm_session_key(person))
        rows = [{"type": "session", "key": dm_session_key(person)}]
        for n in range(per_person - 1):
            kind = "user" if n % 3 == 0 else "assistant" if n % 3 == 1 else "delivery"
            rows.append(
                {
                    "ts": f"2026-11-{1 + n % 28:02d}T10:00:{n % 60:02d}+00:00",
                    "type": kind,
                    "text": f"line {n} " + "words " * 20,
                    "ok": True,
                    "usage": {"input_tokens": 900, "output_tokens": 40},
                }
            )
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return ids


async def timed(http: ClientSession, url: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        async with http.get(url, allow_redirects=False) as response:
            await response.read()
            assert response.status == 200, (url, response.status)  # not a login redirect
        times.append((time.perf_counter() - started) * 1000)
    return times


def report(name: str, times: list[float]) -> None:
    ordered = sorted(times)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    print(
        f"{name:<28} p50 {statistics.median(ordered):7.2f} ms   p95 {p95:7.2f} ms   "
        f"({len(times)} requests)"
    )


async def run(people: int, lines: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspaces"
        ids = build_root(root, people, lines)
        settings = load_settings(Path(tmp) / "none.toml", workspaces_dir=root, timezone="UTC")
        gateway = Gateway.build(settings, InstantProvider(), access=AllowAll())
        await gateway.start()
        pairing = Pairing(gateway.state)
        for n in range(3):
            await pairing.request(
                InboundMessage("telegram", str(n), str(n), "hi", sender_name=f"Stranger {n}")
            )
        panel = PanelServer(PanelHost(gateway.parts), PanelSettings(port=0))
        await panel.start()
        try:
            base = panel.url
            code = issue_link_code(panel.panel.auth.state_dir, 60)
            # unsafe: keep cookies of an IP-address host (127.0.0.1), as browsers do
            async with ClientSession(cookie_jar=CookieJar(unsafe=True)) as http:
                async with http.get(f"{base}/login/link?code={code}") as response:
                    page = await response.text()
                    assert "<h1>Overview</h1>" in page, "login failed"
                    assert page.count("/files") >= people, "not every person is listed"
                total = sum(1 for _ in root.glob("*/sessions/*.jsonl"))
                print(
                    f"{people} people, {lines:,} transcript lines in {total} files, "
                    f"3 pending pairing requests"
                )
                await timed(http, base + "/", 10)  # warm up
                report("overview /", await timed(http, base + "/", requests))
                one = ids[0]
                report(
                    f"sessions ({lines // people} lines)",
                    await timed(http, f"{base}/p/{one}/sessions", max(20, requests // 4)),
                )
                report(
                    "metrics (reads transcripts)",
                    await timed(http, f"{base}/p/{one}/metrics", max(20, requests // 4)),
                )
        finally:
            await panel.stop()
            await gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=100)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.people, args.lines, args.requests))


if __name__ == "__main__":
    main()
