"""Load: 100 people send 20 messages each at once through the fake Telegram server to a real
`clawgate run` process, with a provider that takes 200 ms per answer. Everyone is answered,
in order, and the gateway's resident memory stays bounded."""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import replace

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, rss_mib, start_gateway

PEOPLE = 100
MESSAGES = 20
PROVIDER_DELAY = 0.2
TOKEN = re.compile(r"L-(\d+)-(\d+)-Q")


@pytest.mark.timeout(600)  # 2,000 messages through a real process, bounded at 240 s
async def test_hundred_people_twenty_messages_each(tmp_path, anthropic_server):
    anthropic_server.responder = lambda body: replace(
        anthropic_server.default_reply(body), delay=PROVIDER_DELAY
    )
    users = [60_000 + n for n in range(PEOPLE)]
    rng = random.Random(7)
    expected = PEOPLE * MESSAGES
    queued_at: dict[tuple[int, int], float] = {}
    rss: list[float] = []
    async with FakeTelegramServer(max_poll=0.5) as tg:
        env = gateway_env(
            tmp_path, tg, anthropic_server.base_url, users, CLAWGATE_LLM__TIMEOUT_SECONDS="30"
        )
        process = await start_gateway(env, tmp_path / "gateway.log")
        try:
            for _ in range(300):  # until the gateway polls (process start-up takes seconds)
                if tg.offsets_seen:
                    break
                await asyncio.sleep(0.1)
            rss.append(rss_mib(process.pid))

            async def person(user: int) -> None:
                for n in range(MESSAGES):
                    queued_at[(user, n)] = time.monotonic()
                    await tg.send_text(user, f"question L-{user}-{n}-Q")
                    await asyncio.sleep(rng.uniform(0.0, 0.05))

            started = time.monotonic()
            await asyncio.gather(*(person(user) for user in users))
            for _ in range(2400):  # 240 s at most
                if sum(len(TOKEN.findall(s.text)) for s in tg.sent) >= expected:
                    break
                if len(rss) < 200:
                    rss.append(rss_mib(process.pid))
                await asyncio.sleep(0.1)
            elapsed = time.monotonic() - started
            rss.append(rss_mib(process.pid))
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 60)

    latencies: list[float] = []
    for user in users:
        order: list[int] = []
        for sent in tg.by_chat.get(str(user), []):
            for _, number in TOKEN.findall(sent.text):
                order.append(int(number))
                latencies.append(sent.at - queued_at[(user, int(number))])
        assert order == list(range(MESSAGES)), f"{user}: {order}"
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    print(
        f"\nload: {expected} messages from {PEOPLE} people in {elapsed:.1f} s "
        f"({expected / elapsed:.1f} msg/s), latency p50 {p50:.2f} s p95 {p95:.2f} s, "
        f"gateway resident memory {rss[0]:.0f} MiB idle, peak {max(rss):.0f} MiB"
    )
    assert max(rss) < 400
