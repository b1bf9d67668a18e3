"""Budgets under a burst (issue 32, item 2): the real race, through the real python-telegram-bot
against the loopback Bot API, the real Anthropic SDK against the fake model, which reports the
usage of every call.

A cap holds at each model call, whatever is queued or in flight: ten messages pushed at once
(one getUpdates batch) end with the tokens billed at most one call past the cap, and every
message gets a reply (the answer, or the polite over-budget line). Ten group chats at once
for a capped owner pass one check at a time. A group chat has a daily cap of its own; a turn
whose tool rounds reach the cap ends with the refusal; a compaction the cap refuses drops
nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.budgets import REFUSAL
from gateway.pipeline.gateway import Gateway
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.settle import settled

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}
USER, BOSS = 42, 7070
OWNER = f"telegram-{BOSS}"
CAP = 5_000
CALL = 1_300  # tokens each model call reports: 1,000 in, 300 out
ANSWERED = 4  # checks at 0, 1,300, 2,600 and 3,900 pass; the fifth sees 5,200
MENTION = [{"type": "mention", "offset": 0, "length": 9}]


def _billed(body: dict[str, Any], server: FakeAnthropicServer) -> Reply:
    """The echo, reporting CALL tokens, a little slow: calls made together overlap."""
    reply = server.make_text(
        f"echo: {server.last_user_text(body)}", input_tokens=1_000, output_tokens=CALL - 1_000
    )
    return replace(reply, delay=0.2)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as server:
        yield server


@pytest.fixture
async def start(
    make_settings: Any, anthropic_server: FakeAnthropicServer, tg: FakeTelegramServer
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []
    anthropic_server.responder = lambda body: _billed(body, anthropic_server)

    async def make(budget: dict[str, Any], **telegram: Any) -> Gateway:
        section = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": [str(USER), str(BOSS)],
            **telegram,
        }
        settings = make_settings(
            **llm_overrides(anthropic_server), telegram=section, owner=OWNER, budget=budget
        )
        gateway = build_gateway(settings, build_provider(settings), options={"telegram": FAST})
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def _spent(gateway: Gateway, person: str) -> int:
    return (await gateway.parts.usage.total(person, gateway.parts.usage.periods().today)).tokens


async def _quiet(gateway: Gateway) -> None:
    """Every message answered, every usage row written, every budget note queued and sent."""
    await settled(gateway.state, timeout=30)
    await gateway.parts.accounting.settled()
    await settled(gateway.state, timeout=30)


async def test_ten_messages_at_once_stop_one_call_past_the_daily_cap(tg, start, anthropic_server):
    # Queued before the gateway polls: its first getUpdates takes all eleven at once.
    await tg.add_update(tg.message(BOSS, "hi, it's the owner"))  # the notes' DM route
    for n in range(1, 11):
        await tg.add_update(tg.message(USER, f"question {n}"))
    gateway = await start({"daily_tokens": CAP})
    await tg.wait_sent(11, timeout=30)
    await _quiet(gateway)

    replies = tg.texts(USER)
    assert replies == [f"echo: question {n}" for n in range(1, ANSWERED + 1)] + [
        REFUSAL["daily"]
    ] * (10 - ANSWERED)  # every message answered, in order
    spent = await _spent(gateway, f"telegram-{USER}")
    assert spent == ANSWERED * CALL and CAP <= spent < CAP + CALL  # one call past, at most
    reported = anthropic_server.reported_totals()
    assert sum(reported.values()) == spent + CALL  # what the model reported: theirs + the owner's
    assert any("reached the daily cap" in text for text in tg.texts(BOSS))
    assert gateway.metrics.budget_refusals.value(kind="conversation") == 10 - ANSWERED


async def test_ten_group_chats_at_once_hold_the_owners_own_cap(tg, start, anthropic_server):
    """Ten turns in flight at once, all billed to one capped person: each call's check waits
    for the calls before it to be billed, so ten checks cannot all pass at 0 tokens."""
    groups = [str(-1000 - n) for n in range(10)]
    for n, chat in enumerate(groups):
        await tg.add_update(
            tg.message(
                500 + n,
                f"@claw_bot question {n}",
                chat_id=int(chat),
                chat_type="supergroup",
                entities=MENTION,
            )
        )
    gateway = await start(
        {"workspaces": {OWNER: {"daily_tokens": CAP}}}, groups_enabled=True, groups=groups
    )
    await tg.wait_sent(10, timeout=30)
    await _quiet(gateway)

    per_group = {chat: tg.texts(chat) for chat in groups}
    assert all(len(texts) == 1 for texts in per_group.values()), per_group
    answers = [t for texts in per_group.values() for t in texts if t.startswith("echo: ")]
    refusals = [t for texts in per_group.values() for t in texts if t == REFUSAL["daily"]]
    assert (len(answers), len(refusals)) == (ANSWERED, 10 - ANSWERED), per_group
    spent = await _spent(gateway, OWNER)
    assert spent == ANSWERED * CALL and spent < CAP + CALL
    assert len(anthropic_server.requests) == ANSWERED


async def test_a_group_chat_has_a_daily_cap_of_its_own(tg, start, anthropic_server):
    """Group turns are billed to the owner, who has no cap: the group's own cap stops ten
    members' messages one call past it, with a clear line in the group, and the owner's
    own DM is still answered."""
    chat = -1001
    await tg.add_update(tg.message(BOSS, "hi, it's the owner"))
    for n in range(10):
        await tg.add_update(
            tg.message(
                600 + n,
                f"@claw_bot question {n}",
                chat_id=chat,
                chat_type="supergroup",
                entities=MENTION,
            )
        )
    gateway = await start({"group_daily_tokens": CAP}, groups_enabled=True, groups=[str(chat)])
    await tg.wait_sent(11, timeout=30)
    await _quiet(gateway)

    in_group = tg.texts(chat)
    assert [t.split("] ")[-1] for t in in_group[:ANSWERED]] == [
        f"question {n}" for n in range(ANSWERED)
    ]
    assert in_group[ANSWERED:] == [REFUSAL["group"]] * (10 - ANSWERED)
    assert CAP <= await _spent(gateway, OWNER) - CALL < CAP + CALL  # the owner's hi, + group
    note = [t for t in tg.texts(BOSS) if t.startswith("Budget:")]
    assert note == [
        f"Budget: the group telegram chat {chat} reached its daily cap of 5,000 "
        f"tokens (5,200 tokens used). I answer there again tomorrow; [budget] "
        f"group_daily_tokens in clawgate.toml sets the cap."
    ]
    await tg.send_text(BOSS, "and my own DM?")  # the owner's own caps: none
    await tg.wait_sent(len(tg.finished()) + 1, timeout=30)
    assert tg.texts(BOSS)[-1] == "echo: and my own DM?"


async def test_tool_rounds_stop_at_the_cap_with_the_refusal(anthropic_server, make_gateway):
    """One message whose model keeps calling tools: the per-call check stops the turn one
    call past the cap, and the person hears why."""

    def tool_round(body: dict[str, Any]) -> Reply:
        reply = anthropic_server.make_tool_calls([("list_files", {}, None)])
        usage = {"input_tokens": 1_000, "output_tokens": CALL - 1_000}
        return replace(reply, computed_usage=False, body={**reply.body, "usage": usage})

    anthropic_server.responder = tool_round
    gateway, channel = await make_gateway(
        anthropic_server, budget={"daily_tokens": CAP}, owner="fakechat-boss"
    )
    await channel.inject("ann", "look around as long as you like")
    await channel.wait_for(1)
    assert channel.texts("ann") == [REFUSAL["daily"]]
    assert len(anthropic_server.requests) == ANSWERED
    assert await _spent(gateway, "fakechat-ann") == ANSWERED * CALL


async def test_a_compaction_refused_by_the_cap_drops_nothing(anthropic_server, make_gateway):
    """The memory flush before a compaction takes the last call under the cap; the summary's
    call is then refused: the session is not cut without a summary (the fallback for a
    failing model) and the turn ends with the refusal."""
    anthropic_server.responder = lambda body: replace(_billed(body, anthropic_server), delay=0)
    gateway, channel = await make_gateway(
        anthropic_server,
        owner="fakechat-boss",
        budget={"daily_tokens": 2 * CALL},
        llm={"context_window": 4_000},
        compaction={"reserve_tokens": 1_000, "keep_recent_tokens": 1_000},
    )
    await channel.inject("ann", "a short first message")
    await channel.wait_for(1)
    long = "many words " * 1_000  # ~2,750 tokens: with the first call's 1,000, compaction
    await channel.inject("ann", long)
    await channel.wait_for(2)
    assert channel.texts("ann") == ["echo: a short first message", REFUSAL["daily"]]
    assert len(anthropic_server.requests) == 2  # the answer, the flush; no summary
    session = await gateway.parts.sessions.get(
        gateway.settings.workspaces_dir / "fakechat-ann", "fakechat-ann:dm"
    )
    assert session.compactions == 0
    assert next(m.text for m in session.history if m.role == "user").endswith(
        "a short first message"
    )
