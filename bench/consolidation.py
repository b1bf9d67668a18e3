"""Nightly consolidation: tokens a pass costs per day of notes, against a normal day.

Through the real gateway (gateway/features/consolidation.py's `Consolidator`, the OpenAI SDK)
and the loopback fake model, whose usage is computed from each request (characters / 4 of its
JSON, tests/fakes/llm_server.py). Made-up text, so these are cost figures, not quality ones.

A normal day: the owner's 20 DM turns (a question of about a sentence and an answer of two),
with a MEMORY.md of the given size in the prompt, and a daily note of 20 lines written that
day. One of the 20 messages sets a standing instruction, so the day also pays for one
standing-instruction check (gateway/agent/instructions.py); the other 19 fire no check.
Heartbeats are left out, which makes the comparison stricter. The detector that decides
whether a message is worth that check costs no tokens: its time per message is printed last
(wall time, so it moves with the machine's load).

The pass then reads that day (the note and the DM transcript, what a nightly pass reads) with
MEMORY.md and USER.md, and the fake model answers with five `add` operations: its input and
output tokens are the cost of consolidating one day. A pass runs at most once a day, so this
is also its cost per day. `--days N` lets N days of notes pile up before one pass (a gateway
that was off): the cost per day of notes falls, as MEMORY.md is read once.

    python bench/consolidation.py [--turns 20] [--lines 40 120 250] [--days 1 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tidying import memory_file  # noqa: E402
from gateway.agent.instructions import EXTRACT_PROMPT  # noqa: E402
from gateway.agent.providers import build_provider  # noqa: E402
from gateway.clock import FixedClock  # noqa: E402
from gateway.config.settings import load_settings  # noqa: E402
from gateway.features.consolidation import Consolidator  # noqa: E402
from gateway.pipeline.gateway import Gateway  # noqa: E402
from gateway.workspace.seed import ensure_workspace  # noqa: E402
from memory.instructions import looks_like_instruction  # noqa: E402
from tests.conftest import AllowAll  # noqa: E402
from tests.fakes.channel import RecordingChannel  # noqa: E402
from tests.fakes.llm_server import FakeOpenAIServer, Reply, estimate_tokens  # noqa: E402

OWNER = "fakechat-owner"
DAY = datetime(2026, 11, 29, 9, tzinfo=UTC)
RULE = "never book anything without asking me first"
CHECK = EXTRACT_PROMPT.splitlines()[0]


def note(day: int) -> str:
    """A day's note: 20 lines of the kind a flush or the assistant writes."""
    return "".join(
        f"- {9 + n // 3}:{(n * 7) % 60:02d} day {day}: talked about item {n}, the "
        f"plan for the garden shed and who brings the ladder on Saturday.\n"
        for n in range(20)
    )


ADDS = "\n".join(
    f"add MEMORY.md [memory/2026-11-29.md]: Durable fact number {n} about the "
    "garden shed project and the neighbours."
    for n in range(5)
)


def kind_of(body: dict[str, Any]) -> str:
    sent = json.dumps(body["messages"])
    if "Memory consolidation" in sent:
        return "pass"
    return "check" if CHECK in sent else "turn"


def answer(body: dict[str, Any], server: FakeOpenAIServer) -> Reply:
    """Turns, the standing-instruction check and the pass, each with its own answer."""
    kind = kind_of(body)
    text = {"pass": ADDS, "check": f"RULE: {RULE}"}.get(
        kind, "Sure - here is a short answer, with a sentence or two of detail about the week."
    )
    return server.make_text(text, output_tokens=estimate_tokens(text))


def tokens_by_kind(server: FakeOpenAIServer) -> dict[str, int]:
    """Every usage block the fake sent, by the kind of request it answered (in order)."""
    spent: dict[str, int] = {}
    for body, usage in zip(server.requests, server.reported, strict=True):
        kind = kind_of(body)
        spent[kind] = (
            spent.get(kind, 0)
            + int(usage.get("prompt_tokens", 0))
            + int(usage.get("completion_tokens", 0))
        )
    return spent


async def measure(lines: int, turns: int, days: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="clawgate-consolidate-bench-"))
    async with FakeOpenAIServer() as server:
        server.responder = lambda body: answer(body, server)
        settings = load_settings(
            root / "none.toml",
            workspaces_dir=root / "workspaces",
            owner=OWNER,
            timezone="UTC",
            llm={
                "provider": "openai",
                "base_url": server.base_url,
                "api_key": "sk-bench-0000000",
                "max_attempts": 1,
            },
            memory={"enabled": False, "consolidate_max_tokens": 200_000},
        )
        channel = RecordingChannel()
        gateway = Gateway.build(
            settings,
            build_provider(settings),
            channels=[channel],
            clock=FixedClock(DAY),
            access=AllowAll(),
        )
        await gateway.start()
        try:
            ws = ensure_workspace(settings.workspaces_dir, OWNER)
            (ws / "MEMORY.md").write_text(memory_file(lines), encoding="utf-8")
            for n in range(turns):
                text = (
                    RULE
                    if n == turns // 2
                    else (f"message {n}: can you help me plan the week, nothing urgent?")
                )
                await channel.inject("owner", text)
                await channel.wait_for(n + 1, timeout=30)
            await gateway.lanes.drain()
            spent = tokens_by_kind(server)
            day_tokens = sum(spent.values())
            check = spent.get("check", 0)
            for back in range(days):
                day = (DAY - timedelta(days=back)).date()
                path = ws / "memory" / f"{day.isoformat()}.md"
                path.parent.mkdir(exist_ok=True)
                path.write_text(note(back), encoding="utf-8")
                at = datetime.combine(day, datetime.min.time(), UTC).timestamp() + 20 * 3600
                os.utime(path, (at, at))
            outcome = await Consolidator(gateway.parts).visit(OWNER, ws, force=True)
            spent = tokens_by_kind(server)
        finally:
            await gateway.stop()
    return {
        "lines": lines,
        "days": days,
        "status": outcome.status,
        "sources": len(outcome.sources),
        "pass": spent.get("pass", 0),
        "per_day": spent.get("pass", 0) / days,
        "day": day_tokens,
        "check": check,
    }


async def run(args: argparse.Namespace) -> None:
    print(
        f"one consolidation pass vs a normal day ({args.turns} DM turns, one of them a "
        "standing instruction; no heartbeats); tokens as the fake model reports them "
        "(chars / 4)"
    )
    print(
        f"{'MEMORY.md':>9} {'days':>4} {'outcome':>12} {'sources':>7} {'pass':>7} "
        f"{'per day':>8} {'normal day':>11} {'share':>6} {'of it: check':>12}"
    )
    for lines in args.lines:
        for days in args.days:
            row = await measure(lines, args.turns, days)
            print(
                f"{row['lines']:>9} {row['days']:>4} {row['status']:>12} {row['sources']:>7} "
                f"{row['pass']:>7} {row['per_day']:>8.0f} {row['day']:>11} "
                f"{row['per_day'] / row['day']:>6.1%} {row['check']:>12}"
            )
    micros, fired, talk = detector_time()
    print(
        f"standing-instruction detector: {micros:.1f} us per message (mean); small talk "
        f"firing it: {fired} of {talk}"
    )


def detector_time(rounds: int = 2_000) -> tuple[float, int, int]:
    """Microseconds per message of the standing-instruction detector, over small talk, a
    long message and rules; how many of the small-talk messages fire it."""
    talk = [
        "hello",
        "thanks!",
        "ok",
        "still alive?",
        "good morning",
        "what's the weather?",
        "can you summarize my day?",
        "I don't know yet",
        "sounds good",
        "\U0001f44d",
    ]
    long = "Here is the whole story of my week, in detail. " * 80
    rules = [RULE, "always answer in German", "don't message me before 9"]
    messages = [*talk, long, *rules]
    start = time.perf_counter()
    for _ in range(rounds):
        for message in messages:
            looks_like_instruction(message)
    elapsed = time.perf_counter() - start
    return (
        elapsed / (rounds * len(messages)) * 1e6,
        sum(map(looks_like_instruction, talk)),
        len(talk),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--lines", type=int, nargs="*", default=[40, 120, 250])
    parser.add_argument("--days", type=int, nargs="*", default=[1, 3])
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
