"""End-to-end Telegram throughput: fake Bot API server -> gateway -> back.

The real python-telegram-bot client polls a loopback Bot API fake; the gateway records each
update durably (SQLite, WAL, synchronous=FULL), checks access, routes, runs a turn with a
zero-latency provider and sends the reply through the Bot API. Latency is measured from the
moment an update is queued on the fake server to the moment the reply reaches it. Each sender
waits for its answer before sending again (a person in a DM), so 50 senders means up to 50
turns in flight.

    python bench/channel_throughput.py [--messages 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.turn_overhead import InstantProvider
from channels.telegram import Backoff
from gateway.assembly.platforms import build_gateway
from gateway.config.settings import load_settings
from tests.fakes.telegram_server import FakeTelegramServer


async def run(senders: int, messages: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegramServer(max_poll=1.0) as tg:
            users = [10_000 + i for i in range(senders)]
            settings = load_settings(
                Path(tmp) / "none.toml",
                workspaces_dir=Path(tmp) / "ws",
                timezone="UTC",
                llm={"provider": "anthropic", "api_key": "x"},
                telegram={"token": tg.token, "base_url": tg.base_url,
                          "poll_timeout_seconds": 1, "allow_from": [str(u) for u in users]},
                limits={"messages_per_minute": 0},  # a throughput run, not a limits test
            )
            gateway = build_gateway(settings, InstantProvider(),  # type: ignore[arg-type]
                                    options={"telegram": {"backoff": Backoff(0.05, 0.5)}})
            await gateway.start()
            latencies: list[float] = []

            async def person(user: int) -> None:
                for i in range(messages):
                    queued = time.monotonic()
                    await tg.send_text(user, f"message {i}")
                    replies = tg.by_chat.setdefault(str(user), [])
                    async with tg._changed:
                        await tg._changed.wait_for(lambda: len(replies) > i)  # noqa: B023
                    reply = replies[i]
                    latencies.append(reply.at - queued)

            started = time.monotonic()
            await asyncio.gather(*(person(u) for u in users))
            elapsed = time.monotonic() - started
            await gateway.stop()
    latencies.sort()
    p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
    print(f"{senders:>3} sender(s) x {messages} messages: {len(latencies) / elapsed:7.1f} msg/s, "
          f"p50 {statistics.median(latencies) * 1000:6.1f} ms, p95 {p95 * 1000:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20, help="messages per sender")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for senders in (1, 50):
        asyncio.run(run(senders, args.messages))


if __name__ == "__main__":
    main()
