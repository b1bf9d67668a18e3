"""Daily MEMORY.md tidying: tokens per pass and per day per person, against a normal day.

Through the real gateway (gateway/features/tidying.py's `Tidier`, the OpenAI SDK) and the
loopback fake model, whose usage is computed from each request (characters / 4 of its JSON,
tests/fakes/llm_server.py). For MEMORY.md files of several sizes (one line in ten a
duplicate), a pass is forced and the fake model answers with `delete N` for each duplicate:
the input and output tokens are the pass's cost. A pass runs at most once a day per person
(and only when MEMORY.md changed and needs it), so a pass is also the most a day costs.

A normal day, to compare with: the same person's 20 DM turns (short messages and answers)
with that MEMORY.md in the prompt, through the same gateway and fake model; heartbeats are
left out, which makes the comparison stricter.

    python bench/tidying.py [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.agent.providers import build_provider  # noqa: E402
from gateway.clock import FixedClock  # noqa: E402
from gateway.config.settings import load_settings  # noqa: E402
from gateway.features.tidying import Tidier  # noqa: E402
from gateway.pipeline.gateway import Gateway  # noqa: E402
from gateway.workspace.seed import ensure_workspace  # noqa: E402
from tests.conftest import AllowAll  # noqa: E402
from tests.fakes.channel import RecordingChannel  # noqa: E402
from tests.fakes.llm_server import FakeOpenAIServer, estimate_tokens  # noqa: E402

OWNER = "fakechat-owner"
SUBJECTS = [
    "prefers",
    "works at",
    "lives near",
    "is allergic to",
    "plays",
    "drives",
    "reads",
    "collects",
    "volunteers at",
    "studies",
]
THINGS = [
    "green tea",
    "the Westbank library",
    "the old harbour",
    "hazelnuts",
    "the cello",
    "a blue Volvo",
    "Scandinavian crime novels",
    "vintage maps",
    "the food bank",
    "Portuguese on Tuesdays",
]


def memory_file(lines: int) -> str:
    """A MEMORY.md of `lines` facts, one line in ten repeating an earlier one."""
    facts = [
        f"- Person {n // 10} {SUBJECTS[n % 10]} {THINGS[(n * 7) % 10]} (noted {n})."
        for n in range(lines)
    ]
    out = []
    for n, fact in enumerate(facts):
        out.append(fact)
        if n % 10 == 9:
            out.append(facts[n - 5])
    return "# Memory\n\n" + "\n".join(out) + "\n"


def dedup_ops(text: str) -> str:
    """What a model would answer: `delete N` for every repeated line."""
    seen: set[str] = set()
    ops = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip() and line in seen:
            ops.append(f"delete {number}")
        seen.add(line)
    return "\n".join(ops)


def total(server: FakeOpenAIServer, start: int = 0) -> tuple[int, int]:
    blocks = server.reported[start:]
    return (
        sum(int(b.get("prompt_tokens", 0)) for b in blocks),
        sum(int(b.get("completion_tokens", 0)) for b in blocks),
    )


async def measure(lines: int, turns: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="clawgate-tidy-bench-"))
    async with FakeOpenAIServer() as server:
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
            memory={"enabled": False},
        )
        channel = RecordingChannel()
        gateway = Gateway.build(
            settings,
            build_provider(settings),
            channels=[channel],
            clock=FixedClock(datetime(2026, 11, 29, 9, tzinfo=UTC)),
            access=AllowAll(),
        )
        await gateway.start()
        try:
            ws = ensure_workspace(settings.workspaces_dir, OWNER)
            text = memory_file(lines)
            (ws / "MEMORY.md").write_text(text, encoding="utf-8")
            for n in range(turns):
                answer = (
                    f"Sure - here is a short answer to message {n}, with a sentence "
                    "or two of detail."
                )
                server.reply_text(answer, output_tokens=estimate_tokens(answer))
                await channel.inject(
                    "owner", f"message {n}: can you help me plan the week, nothing urgent?"
                )
                await channel.wait_for(n + 1, timeout=30)
            day_in, day_out = total(server)
            before = len(server.reported)
            answer = dedup_ops(text)
            server.reply_text(answer, output_tokens=estimate_tokens(answer))
            outcome = await Tidier(gateway.parts).tidy(OWNER, ws, force=True)
            pass_in, pass_out = total(server, before)
        finally:
            await gateway.stop()
    return {
        "lines": lines,
        "chars": len(text),
        "status": outcome.status,
        "pass": pass_in + pass_out,
        "pass_in": pass_in,
        "pass_out": pass_out,
        "day": day_in + day_out,
    }


async def run(args: argparse.Namespace) -> None:
    print(
        f"one tidying pass vs a normal day ({args.turns} DM turns with the same MEMORY.md "
        "in the prompt, no heartbeats); tokens as the fake model reports them (chars / 4)"
    )
    print(
        f"{'lines':>6} {'chars':>7} {'outcome':>8} {'pass in':>8} {'pass out':>9} "
        f"{'per day':>8} {'normal day':>11} {'share':>6}"
    )
    for lines in args.lines:
        row = await measure(lines, args.turns)
        print(
            f"{row['lines']:>6} {row['chars']:>7} {row['status']:>8} {row['pass_in']:>8} "
            f"{row['pass_out']:>9} {row['pass']:>8} {row['day']:>11} "
            f"{row['pass'] / row['day']:>6.1%}"
        )
    print(
        json.dumps(
            {
                "note": "per day: at most one pass, and none on a day MEMORY.md did "
                "not change or shows no duplicates and stays under 70% of its "
                "prompt budget"
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--lines", type=int, nargs="*", default=[40, 120, 250])
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
