"""Budgets: a person at a cap gets a polite reply and no model call; the owner gets a note at
80% and at the cap, once each, through the delivery path; the owner is capped only by choice;
a heartbeat for a person at a cap is not started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.agent.conversation import Usage
from gateway.clock import FixedClock
from gateway.features.heartbeat_host import beat_now
from gateway.pipeline.budgets import REFUSAL, caps_for

NOW = datetime(2026, 11, 5, 9, 0, tzinfo=UTC)
OWNER = "fakechat-boss"


async def test_a_daily_token_cap_refuses_politely_without_a_model_call(
    anthropic_server, make_gateway
):
    clock = FixedClock(NOW)
    gateway, channel = await make_gateway(
        anthropic_server, clock=clock, owner=OWNER, budget={"daily_tokens": 1_000}
    )
    await channel.inject("boss", "hi, it's the owner")  # the owner's DM route, for notes
    await channel.wait_for(1)
    anthropic_server.reply_text("sure", input_tokens=700, output_tokens=100)
    await channel.inject("ann", "first question")
    await channel.wait_for(3)  # the answer, and the owner's 80% note
    notes = channel.texts("boss")[1:]
    assert notes == [
        "Budget: fakechat-ann has used 80% of the daily cap (800 tokens of 1,000 tokens)."
    ]
    anthropic_server.reply_text("ok", input_tokens=300, output_tokens=50)
    await channel.inject("ann", "second question")  # still under the cap when it starts
    await channel.wait_for(5)
    assert "reached the daily cap" in channel.texts("boss")[-1]
    calls = len(anthropic_server.requests)
    await channel.inject("ann", "third question")
    await channel.inject("ann", "/usage")
    await channel.wait_for(7)
    refusal, usage = channel.texts("ann")[-2:]
    assert refusal == REFUSAL["daily"]
    assert usage.startswith("Today: 1,150 tokens") and "daily cap: 1,150 tokens of 1,000" in usage
    assert len(anthropic_server.requests) == calls  # no model call for either
    assert gateway.metrics.budget_refusals.value(kind="conversation") == 1
    # The owner has no cap of their own by default, and each note was sent once.
    await channel.inject("boss", "and me?")
    await channel.wait_for(8)
    assert channel.texts("boss")[-1] == "echo: and me?"
    assert len(channel.texts("boss")) == 4
    # A new day: answered again (and this prompt alone passes the small cap: a new note).
    clock.advance(timedelta(days=1))
    await channel.inject("ann", "a new day")
    await channel.wait_for(10)
    assert channel.texts("ann")[-1] == "echo: a new day"
    assert "reached the daily cap" in channel.texts("boss")[-1]


async def test_a_monthly_money_cap_and_the_owners_own_cap(anthropic_server, make_gateway):
    clock = FixedClock(NOW)
    gateway, channel = await make_gateway(
        anthropic_server,
        clock=clock,
        owner=OWNER,
        budget={
            "monthly_usd": 5.0,
            "warn_at": 0,
            "workspaces": {OWNER: {"daily_tokens": 100}, "fakechat-vip": {"monthly_usd": 0}},
        },
    )
    settings = gateway.settings
    assert [c.unit for c in caps_for(settings, "fakechat-ann")] == ["usd"]
    assert [(c.period, c.unit) for c in caps_for(settings, OWNER)] == [("daily", "tokens")]
    assert caps_for(settings, "fakechat-vip") == []  # 0: no cap for this person
    model = settings.llm.resolved_model
    await gateway.parts.usage.record("fakechat-ann", "conversation", model, Usage(2_500_000, 0))
    await channel.inject("ann", "hello")
    await gateway.parts.usage.record(OWNER, "conversation", model, Usage(100, 0))
    await channel.inject("boss", "hello")
    await channel.wait_for(2)
    assert channel.texts("ann") == [REFUSAL["monthly"].format(reset="December 1")]
    assert channel.texts("boss") == [REFUSAL["daily"]]
    assert anthropic_server.requests == []


async def test_a_heartbeat_is_not_started_for_a_person_at_a_cap(
    anthropic_server, make_gateway, tmp_path
):
    gateway, channel = await make_gateway(
        anthropic_server,
        clock=FixedClock(NOW),
        owner=OWNER,
        budget={"daily_tokens": 10},
        heartbeat={"active_start": "00:00", "active_end": "00:00"},
    )
    await channel.inject("ann", "hi")
    await channel.wait_for(1)
    workspace = tmp_path / "workspaces" / "fakechat-ann"
    (workspace / "HEARTBEAT.md").write_text("# Checks\n- Anything due?\n")
    calls = len(anthropic_server.requests)
    outcome = await beat_now(gateway.parts, "fakechat-ann", workspace)
    assert (outcome.status, outcome.reason) == ("error", "model call failed (budget)")
    assert len(anthropic_server.requests) == calls
    assert gateway.metrics.budget_refusals.value(kind="heartbeat") == 1
