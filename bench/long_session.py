"""A very long session: 2,000 turns through the gateway, with flushes and compactions.

The fake provider reports usage the way a real one does: the input tokens grow with the
request (system prompt, tool schemas and history, at 4 characters a token). It answers flush
turns with an append to today's note and summaries with a valid structured summary, so the
numbers show the gateway's own behaviour: how often it flushes and compacts, what that costs
in tokens and time, and whether memory stays flat.

    python bench/long_session.py [--turns 2000] [--window 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from channels.base import ChannelBase, InboundMessage, MessageHandler, OutboundMessage
from gateway.agent.compaction import Compactor
from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolCall, ToolSpec, Usage
from gateway.config.settings import load_settings
from gateway.pipeline.gateway import Gateway
from memory.layout import dm_session_key
from tests.conftest import AllowAll

SUMMARY = (
    "## Decisions\n- Keep the weekly review on Fridays.\n## Open tasks\n- Draft the report.\n"
    "## Constraints and rules\n- Ask before sending any email.\n## Pending requests\nNone\n"
    "## Exact identifiers\n- Ticket OPS-4411"
)
USER_TEXT = "Here is what happened today at work and what I need next: " + "details " * 40
REPLY_TEXT = "Understood. Here is a plan with the steps and the reasons for each. " + "step " * 120


class GrowingUsageProvider:
    name = "bench"
    model = "growing-usage"

    def __init__(self) -> None:
        self.tokens = {"turn": 0, "flush": 0, "summary": 0}
        self.calls = {"turn": 0, "flush": 0, "summary": 0}

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: object = None,
    ) -> Completion:
        size = len(system.joined()) + sum(len(m.text) for m in messages)
        size += sum(len(json.dumps(t.parameters)) + len(t.description) for t in tools)
        usage = Usage(input_tokens=size // 4, output_tokens=200)
        if system.stable.startswith("You compress conversations"):
            kind, completion = "summary", Completion(SUMMARY, usage=usage)
        elif "Silent memory flush" in messages[-1].text:
            call = ToolCall(
                "f1", "append_file", {"path": _note_path(messages[-1].text), "content": "- fact"}
            )
            kind, completion = "flush", Completion("", (call,), usage=usage)
        elif messages[-1].role == "tool" and messages[-1].tool_call_id == "f1":
            kind, completion = "flush", Completion("NO_REPLY", usage=usage)
        else:
            kind, completion = "turn", Completion(REPLY_TEXT, usage=usage)
        self.calls[kind] += 1
        self.tokens[kind] += usage.input_tokens + usage.output_tokens
        return completion

    async def close(self) -> None:
        return None


def _note_path(prompt: str) -> str:
    start = prompt.index("memory/")
    return prompt[start : start + len("memory/2026-01-01.md")]


class WaitingChannel(ChannelBase):
    name = "bench"

    def __init__(self) -> None:
        self.handler: MessageHandler | None = None
        self.replies: asyncio.Queue[str] = asyncio.Queue()

    async def start(self, handler: MessageHandler) -> None:
        self.handler = handler

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self.replies.put_nowait(message.text)


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def run(turns: int, window: int) -> None:
    compaction_seconds: list[float] = []
    original = Compactor.compact

    async def timed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        begin = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            compaction_seconds.append(time.perf_counter() - begin)

    Compactor.compact = timed  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as root:
        settings = load_settings(
            Path(root) / "none.toml",
            workspaces_dir=Path(root),
            timezone="UTC",
            llm={"context_window": window},
            compaction={"notify": False},
            limits={"messages_per_minute": 0},  # one person, 2,000 turns as fast as possible
        )
        provider = GrowingUsageProvider()
        channel = WaitingChannel()
        gateway = Gateway.build(settings, provider, channels=[channel], access=AllowAll())
        await gateway.start()
        assert channel.handler is not None
        samples: list[tuple[int, float]] = []
        begin = time.perf_counter()
        for turn in range(1, turns + 1):
            await channel.handler(InboundMessage("bench", "me", "me", f"{turn}: {USER_TEXT}"))
            await channel.replies.get()
            if turn % (turns // 10) == 0:
                samples.append((turn, rss_mib()))
        wall = time.perf_counter() - begin
        session = await gateway.parts.sessions.get(
            Path(root) / "bench-me", dm_session_key("bench-me")
        )
        await gateway.stop()

    print(f"turns: {turns} in {wall:.1f} s ({turns / wall:.0f} turns/s), window {window:,}")
    print(f"compactions: {session.compactions}, flushes: {provider.calls['flush'] // 2}")
    spent = provider.tokens
    overhead = (spent["summary"] + spent["flush"]) / max(spent["turn"], 1)
    print(
        f"tokens on summaries: {spent['summary']:,}; on flushes: {spent['flush']:,}; "
        f"on turns: {spent['turn']:,} ({overhead:.1%} overhead)"
    )
    if compaction_seconds:
        mean_ms = sum(compaction_seconds) / len(compaction_seconds) * 1000
        print(
            f"wall time per compaction: mean {mean_ms:.1f} ms, "
            f"max {max(compaction_seconds) * 1000:.1f} ms (instant provider)"
        )
    print(f"session now: {len(session.history)} messages, ~{session.context_tokens():,} tokens")
    print(
        "resident memory (MiB) by turn: " + ", ".join(f"{turn}: {mib:.1f}" for turn, mib in samples)
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=200_000)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.window))


if __name__ == "__main__":
    main()
