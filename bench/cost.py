"""What a conversation costs: fixed prompt overhead, prompt-cache share, usage totals, fallback.

Everything runs through the real gateway and the real SDKs against the loopback fake servers,
which report usage the way the real APIs do (tests/fakes/llm_server.py): tokens ESTIMATED as
characters / 4 of each content block's JSON (no tokenizer installed), and prompt caching
simulated from the request (Anthropic: the cache_control breakpoints, 20-block lookback, a
1,024-token minimum; OpenAI: the longest byte-identical prefix in 128-token steps).

1. "hello": prompt tokens of the first request of an owner's DM with every default
   capability on (file, memory and reminder tools; a freshly seeded workspace).
2. Cache share: N turns of one DM (messages of 20-80 words, two minutes apart, one tool round
   in every fifth turn), the share of prompt tokens read from the cache after the first turn,
   Anthropic and OpenAI; for Anthropic also with the previous layout (time in the system
   prompt, no history breakpoint) and the cost of both at the default model's list prices.
3. Usage totals: what the usage ledger recorded against what the fake servers reported.
4. Fallback: the primary answers 529 / 500 / nothing (timeout); a turn must be answered by
   the fallback (another provider on another server) within one retry.

    python bench/cost.py [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.agent.providers import anthropic_provider, build_provider
from gateway.agent.tools.schedule_tools import schedule_tools
from gateway.clock import Clock, FixedClock, SystemClock
from gateway.config.settings import load_settings
from gateway.features.scheduling import build_schedule_desk
from gateway.pipeline.gateway import Gateway
from gateway.stores.state import StateDB
from gateway.stores.usage import Totals
from memory.service import MemoryOptions, MemoryService
from tests.conftest import AllowAll
from tests.fakes.channel import RecordingChannel
from tests.fakes.embedder import FakeEmbedder
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer, FakeOpenAIServer

OWNER = "fakechat-owner"
WORDS = (
    "plan",
    "dinner",
    "friday",
    "tickets",
    "invoice",
    "garden",
    "meeting",
    "flight",
    "doctor",
    "budget",
    "birthday",
    "book",
    "email",
    "report",
    "train",
    "weekend",
    "recipe",
    "school",
    "call",
    "shopping",
    "list",
    "remember",
    "tomorrow",
    "project",
)


def settings_for(root: Path, server: FakeLLMServer, **llm: Any) -> Any:
    provider = "anthropic" if isinstance(server, FakeAnthropicServer) else "openai"
    return load_settings(
        root / "none.toml",
        workspaces_dir=root / "workspaces",
        owner=OWNER,
        timezone="UTC",
        llm={
            "provider": provider,
            "base_url": server.base_url,
            "api_key": "sk-bench-0000000",
            "max_attempts": 1,
            **llm,
        },
        versioning={"enabled": False},
    )


async def gateway_for(
    settings: Any, *, clock: FixedClock | None = None, provider: Any = None
) -> tuple[Gateway, RecordingChannel]:
    """A gateway with every default capability: file, memory and reminder tools."""
    channel = RecordingChannel()
    time: Clock = clock or SystemClock()
    state = StateDB.for_root(settings.workspaces_dir, inbox_retention=settings.inbox_retention)
    desk = build_schedule_desk(settings, time, state.links.last_dm_route, [channel.name])
    gateway = Gateway.build(
        settings,
        provider or build_provider(settings),
        channels=[channel],
        clock=time,
        access=AllowAll(),
        state=state,
        memory=MemoryService(lambda: FakeEmbedder(), MemoryOptions(watch=False)),
        private_tools=schedule_tools(desk) if desk else (),
        schedule_desk=desk,
    )
    await gateway.start()
    return gateway, channel


def prompt_tokens(usage: dict[str, Any]) -> int:
    if "prompt_tokens" in usage:
        return int(usage["prompt_tokens"])
    return int(
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )


def cached_tokens(usage: dict[str, Any]) -> int:
    if "prompt_tokens" in usage:
        return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return int(usage["cache_read_input_tokens"])


async def hello(root: Path, server_class: type[FakeLLMServer]) -> dict[str, int]:
    async with server_class() as server:
        gateway, channel = await gateway_for(settings_for(root / server_class.__name__, server))
        try:
            await channel.inject("owner", "hello")
            await channel.wait_for(1)
        finally:
            await gateway.stop()
        body, usage = server.requests[0], server.reported[0]
    parts = {
        "tools": body.get("tools", []),
        "system": body.get("system") or body["messages"][0]["content"],
    }
    return {
        "prompt": prompt_tokens(usage),
        "tools_n": len(body.get("tools", [])),
        **{name: len(json.dumps(value)) // 4 for name, value in parts.items()},
    }


def message(rng: random.Random, turn: int) -> str:
    return f"({turn}) " + " ".join(rng.choices(WORDS, k=rng.randint(20, 80)))


async def conversation(
    root: Path, server_class: type[FakeLLMServer], turns: int, *, old_layout: bool = False
) -> dict[str, Any]:
    rng = random.Random(26)
    clock = FixedClock(datetime(2026, 11, 5, 9, 0, tzinfo=UTC))
    original = anthropic_provider.anthropic_layout
    if old_layout:  # the layout before streaming: the time in the system, no history breakpoint

        def previous(params: dict[str, Any], now: str) -> dict[str, Any]:
            system = params.get("system", [])
            return {**params, "system": [*system, {"type": "text", "text": now}]}

        anthropic_provider.anthropic_layout = previous  # type: ignore[assignment]
    try:
        async with server_class() as server:
            settings = settings_for(root / f"{server_class.__name__}-{old_layout}", server)
            gateway, channel = await gateway_for(settings, clock=clock)
            per_turn: list[tuple[int, int]] = []
            try:
                for turn in range(1, turns + 1):
                    before = len(server.reported)
                    if turn % 5 == 0:  # a tool round: read a file, then answer
                        server.reply_tool_call("read_file", {"path": "SOUL.md"})
                    await channel.inject("owner", message(rng, turn))
                    await channel.wait_for(turn)
                    sent = server.reported[before:]
                    per_turn.append((sum(map(prompt_tokens, sent)), sum(map(cached_tokens, sent))))
                    clock.advance(timedelta(minutes=2))
                ledger = await gateway.parts.usage.total(None, gateway.parts.usage.periods().today)
            finally:
                await gateway.stop()
            reported = server.reported_totals()
    finally:
        anthropic_provider.anthropic_layout = original  # type: ignore[assignment]
    later = per_turn[1:]
    share = sum(c for _, c in later) / max(1, sum(p for p, _ in later))
    return {
        "per_turn": per_turn,
        "share": share,
        "ledger": ledger,
        "reported": reported,
        "model": settings.llm.resolved_model,
        "prices": gateway.parts.usage.prices,
    }


def equal(ledger: Totals, reported: dict[str, int]) -> bool:
    return (ledger.input, ledger.output, ledger.cache_read, ledger.cache_write) == (
        reported["input"],
        reported["output"],
        reported["cache_read"],
        reported["cache_write"],
    )


async def fallback(root: Path, failure: str) -> dict[str, Any]:
    async with FakeAnthropicServer() as primary, FakeOpenAIServer() as backup:
        settings = settings_for(
            root / f"fallback-{failure}",
            primary,
            model="claude-sonnet-5-5",
            max_attempts=4,
            timeout_seconds=2.0,
            fallbacks=["backup:gpt-5.4-mini"],
            endpoints={
                "backup": {
                    "provider": "openai",
                    "base_url": backup.base_url,
                    "api_key": "sk-bench-backup",
                }
            },
        )
        script: Callable[[], object] = {
            "529 overloaded": lambda: primary.reply_error(529),
            "500 server error": lambda: primary.reply_error(500),
            "timeout (2 s)": lambda: primary.reply_delay(10.0),
        }[failure]
        script()
        gateway, channel = await gateway_for(settings)
        try:
            started = time.perf_counter()
            await channel.inject("owner", "hello?")
            [reply] = await channel.wait_for(1, timeout=60)
            elapsed = time.perf_counter() - started
        finally:
            await gateway.stop()
        return {
            "answered": reply.text.startswith("echo:"),
            "primary": len(primary.requests),
            "backup": len(backup.requests),
            "seconds": elapsed,
        }


async def main() -> None:
    logging.disable(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(
            '1. fixed prompt for "hello" (owner DM, every default capability; tokens are chars/4)'
        )
        for cls in (FakeAnthropicServer, FakeOpenAIServer):
            h = await hello(root, cls)
            print(
                f"   {cls.__name__[4:-6]:<10} {h['prompt']:>6,} prompt tokens "
                f"(tools {h['tools_n']}: ~{h['tools']:,}, system ~{h['system']:,})  "
                f"target <= 3,000: {'yes' if h['prompt'] <= 3000 else 'NO'}"
            )
        print(
            f"\n2. prompt cache over {args.turns} turns of one DM (share of prompt tokens "
            "read from the cache, turns 2..N)"
        )
        runs = [
            ("Anthropic", await conversation(root, FakeAnthropicServer, args.turns)),
            (
                "Anthropic, previous layout",
                await conversation(root, FakeAnthropicServer, args.turns, old_layout=True),
            ),
            ("OpenAI", await conversation(root, FakeOpenAIServer, args.turns)),
        ]
        for label, run in runs:
            turns = " ".join(f"{c / p:.0%}" if p else "-" for p, c in run["per_turn"])
            print(f"   {label:<27} {run['share']:>5.1%}   per turn: {turns}")
        new, old = runs[0][1], runs[1][1]
        for label, run in (("this layout", new), ("previous layout", old)):
            print(
                f"   Anthropic at {new['model']} list prices, {label}: "
                f"${run['ledger'].cost:.4f} for {args.turns} turns "
                f"({run['ledger'].prompt_tokens:,} prompt tokens, "
                f"{run['ledger'].cache_read:,} from the cache)"
            )
        print(
            f"   target >= 80% after the first turn (Anthropic): "
            f"{'yes' if new['share'] >= 0.8 else 'NO'}"
        )
        print("\n3. usage totals: the ledger (state database) against the fake providers' reports")
        for label, run in runs:
            r, led = run["reported"], run["ledger"]
            print(
                f"   {label:<27} in {led.input:,} out {led.output:,} cache read "
                f"{led.cache_read:,} write {led.cache_write:,}; provider: in {r['input']:,} "
                f"out {r['output']:,} read {r['cache_read']:,} write {r['cache_write']:,}: "
                f"{'equal' if equal(led, r) else 'DIFFERENT'}"
            )
        print(
            "\n4. fallback: primary (Anthropic) failing, fallback gpt-5.4-mini on another "
            "server; retry policy 4 attempts"
        )
        for failure in ("529 overloaded", "500 server error", "timeout (2 s)"):
            f = await fallback(root, failure)
            print(
                f"   {failure:<18} answered by the fallback: "
                f"{'yes' if f['answered'] else 'NO'}; calls: primary {f['primary']}, "
                f"fallback {f['backup']} (retries: {f['primary'] + f['backup'] - 2}); "
                f"{f['seconds'] * 1000:,.0f} ms"
            )


if __name__ == "__main__":
    asyncio.run(main())
