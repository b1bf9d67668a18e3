"""The gateway's own cost per turn, with a provider that answers instantly.

What is measured is everything clawgate does around the model, on the path a Telegram DM
takes: the durable inbox record (each message carries a platform message id, so it is written
with synchronous=FULL before the turn starts), the real access check (the people are approved
in the state database, as after pairing), routing, session lane, reading the workspace files
from disk, prompt assembly, transcript appends, the outbox row that marks the message answered,
and delivery. The channel is a stand-in for python-telegram-bot (bench/channel_throughput.py
measures the whole message through the real library). Prints p50/p95 latency and turns/s for
1 session, for 20 sessions all sending at once (latency there is mostly waiting in line:
20 turns in flight share 2 cores), and for 20 sessions sending at a steady 300 turns/s, and
how many commits the state database made (group commit: the writes that arrive together
share one).

    python bench/turn_overhead.py [--turns 2000] [--sessions 20] [--daily-tokens N]

`--daily-tokens` gives every person that daily cap (never reached: the provider reports
little usage), to measure what the budget check at each model call costs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from channels.base import ChannelBase, InboundMessage, MessageHandler, OutboundMessage
from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec, Usage
from gateway.assembly.platforms import build_gateway
from gateway.config.settings import load_settings


class InstantProvider:
    name = "instant"
    model = "zero-latency"

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: object = None,
    ) -> Completion:
        return Completion("ok", usage=Usage(input_tokens=1000, output_tokens=10))

    async def close(self) -> None:
        return None


class TimingChannel(ChannelBase):
    """Resolves a future per chat when its reply is sent. Named and durable like the
    Telegram channel, so its messages take the same path (inbox record, access, outbox)."""

    name = "telegram"
    durable = True

    def __init__(self) -> None:
        self.handler: MessageHandler | None = None
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.ids = itertools.count(1)

    async def start(self, handler: MessageHandler) -> None:
        self.handler = handler

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self.waiting.pop(message.chat_id).set_result(time.perf_counter())

    async def turn(self, person: str, text: str) -> float:
        assert self.handler is not None
        done = asyncio.get_running_loop().create_future()
        self.waiting[person] = done
        start = time.perf_counter()
        await self.handler(
            InboundMessage("telegram", person, person, text, message_id=str(next(self.ids)))
        )
        return (await done) - start


async def _person(
    channel: TimingChannel, person: str, turns: int, pause: float = 0.0, offset: float = 0.0
) -> list[float]:
    await asyncio.sleep(offset)  # staggered starts, or every session would fire in lockstep
    latencies = []
    for n in range(turns):
        latencies.append(await channel.turn(person, f"message {n} from {person}"))
        if pause:
            await asyncio.sleep(pause)
    return latencies


async def run(turns: int, sessions: int, daily_tokens: int = 0) -> None:
    with tempfile.TemporaryDirectory() as root:
        settings = load_settings(
            Path(root) / "none.toml",
            workspaces_dir=Path(root),
            timezone="UTC",
            limits={"messages_per_minute": 0},  # one sender, hundreds of turns a second
            budget={"daily_tokens": daily_tokens},
        )
        channel = TimingChannel()
        gateway = build_gateway(
            settings, InstantProvider(), extra_channels=[channel], with_platforms=False
        )
        await gateway.start()
        people = [f"p{n}" for n in range(sessions)]
        for person in ["warmup", "solo", *people]:
            await gateway.state.access.approve("telegram", person, "bench")
        await _person(channel, "warmup", 20)

        writer = gateway.state.writer

        def commits() -> tuple[int, int]:
            return writer.writes, writer.commits

        begin, before = time.perf_counter(), commits()
        single = await _person(channel, "solo", turns)
        single_rate = turns / (time.perf_counter() - begin)
        _report("1 session", single, single_rate, before, commits())

        per_person = max(turns // sessions, 5)
        for person in people:  # first contact seeds the workspace: not part of a turn's cost
            await channel.turn(person, "hello")
        begin, before = time.perf_counter(), commits()
        results = await asyncio.gather(*(_person(channel, p, per_person) for p in people))
        many = [latency for result in results for latency in result]
        rate = len(many) / (time.perf_counter() - begin)
        _report(f"{sessions} sessions, all at once", many, rate, before, commits())

        # The same sessions sending at a steady 300 turns/s in total, as people do.
        pause = sessions / 300
        begin, before = time.perf_counter(), commits()
        results = await asyncio.gather(
            *(
                _person(channel, p, per_person, pause, pause * i / sessions)
                for i, p in enumerate(people)
            )
        )
        paced = [latency for result in results for latency in result]
        _report(
            f"{sessions} sessions, 300/s",
            paced,
            len(paced) / (time.perf_counter() - begin),
            before,
            commits(),
        )
        await gateway.stop()


def _report(
    label: str, latencies: list[float], rate: float, before: tuple[int, int], after: tuple[int, int]
) -> None:
    """`before`/`after`: the state database's (writes, commits) around the phase."""
    ms = sorted(x * 1000 for x in latencies)
    p50 = statistics.median(ms)
    p95 = ms[int(len(ms) * 0.95) - 1]
    writes, commits = after[0] - before[0], after[1] - before[1]
    print(
        f"{label:>26}: {len(ms):5d} turns  p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  "
        f"{rate:7.0f} turns/s  {writes / max(commits, 1):4.1f} writes/commit"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--daily-tokens", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.sessions, args.daily_tokens))


if __name__ == "__main__":
    main()
