"""The budget guard sits where every model call passes (issue 32): the metered provider.

A new caller that asks a provider for a completion must be seen here and given the metered
provider (the parts that only name a model get a `ModelInfo`, which cannot be called). The
guard's locks serialize one key's calls and are not kept once nobody holds them.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from gateway.pipeline.keyed_locks import KeyedLocks

GATEWAY = Path(__file__).resolve().parents[3] / "gateway"
# Files that call `.complete(` and what they call it on. Providers call their SDK; the metered
# provider calls the router; doctor probes each model on purpose, for no person.
CALLERS = {
    "agent/loop.py": "self.provider",  # AgentLoop(metered): conversations, flush, capture,
    "agent/compaction.py": "self.provider",  # heartbeats, reminders; the summary
    "features/tidying.py": "self.model",  # parts.metered
    "features/consolidation.py": "self.model",  # parts.metered (tidying's DailyPass)
    "agent/instructions.py": "self.provider",  # the compactor's: metered
    "cli/doctor.py": "provider",
    "agent/metrics.py": "self.inner",  # MeteredProvider itself
}


def test_every_model_call_is_made_through_the_metered_provider():
    found: dict[str, set[str]] = {}
    for path in GATEWAY.rglob("*.py"):
        rel = path.relative_to(GATEWAY).as_posix()
        if rel.startswith("agent/providers/"):
            continue
        calls = set(re.findall(r"([\w.]+)\.complete\(", path.read_text(encoding="utf-8")))
        if calls:
            found[rel] = calls
    assert found == {rel: {target} for rel, target in CALLERS.items()}, (
        "a new model caller: give it the metered provider (gateway.parts.metered) and list it here"
    )


async def test_the_parts_that_call_models_hold_the_metered_provider(anthropic_server, make_gateway):
    gateway, _ = await make_gateway(anthropic_server)
    parts = gateway.parts
    assert parts.turns.agent.provider is parts.metered
    assert parts.compactor.provider is parts.metered
    assert parts.compactor.agent is parts.turns.agent
    assert parts.turns.capture is not None and parts.turns.capture.agent is parts.turns.agent
    keeper = parts.compactor.instructions
    assert keeper is not None and keeper.provider is parts.metered
    assert parts.turns.instructions is keeper


async def test_keyed_locks_hold_one_caller_per_key_and_keep_none_after():
    locks, order = KeyedLocks(), []
    first_in, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with locks.hold(["person:ann", "group:g"]):
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with locks.hold(["person:ann"]):
            order.append("second in")

    async def other() -> None:
        await first_in.wait()
        async with locks.hold(["person:bob"]):  # another key: not held up
            order.append("other in")
            release.set()

    await asyncio.gather(first(), second(), other())
    assert order == ["first in", "other in", "first out", "second in"]
    assert len(locks) == 0
