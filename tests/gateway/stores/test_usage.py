"""Usage and cost: every model call of every kind of turn is recorded for its person, the
totals equal what the provider reported, costs come from the price table, and /usage and
Prometheus show them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from gateway.agent.conversation import Usage
from gateway.agent.providers import build_provider
from gateway.clock import FixedClock
from gateway.config.usage import ModelPrice
from gateway.features.heartbeat_host import beat_now
from gateway.pipeline.gateway import Gateway
from gateway.stores.prices import DEFAULT_PRICES, PriceTable
from gateway.stores.usage import Totals
from tests.conftest import AllowAll, llm_overrides
from tests.fakes.channel import RecordingChannel

NOW = datetime(2026, 11, 5, 9, 0, tzinfo=UTC)  # a Thursday


def _equal(totals: Totals, reported: dict[str, int]) -> None:
    assert (totals.input, totals.output, totals.cache_read, totals.cache_write) == (
        reported["input"],
        reported["output"],
        reported["cache_read"],
        reported["cache_write"],
    )


async def test_totals_equal_the_providers_reports_for_every_kind(
    llm_server, make_gateway, tmp_path
):
    clock = FixedClock(NOW)
    gateway, channel = await make_gateway(
        llm_server,
        clock=clock,
        owner="fakechat-ann",
        heartbeat={"active_start": "00:00", "active_end": "00:00"},
    )
    await channel.inject("ann", "hello there")
    llm_server.reply_tool_call("list_files", {"path": "."})
    llm_server.reply_text("done")
    await channel.inject("ann", "list my files")
    await channel.inject("bob", "hi, I am Bob")
    await channel.wait_for(3)
    workspace = tmp_path / "workspaces" / "fakechat-ann"
    (workspace / "HEARTBEAT.md").write_text("# Checks\n- Is anything due today?\n")
    outcome = await beat_now(gateway.parts, "fakechat-ann", workspace)
    assert outcome.model_called
    ledger = gateway.parts.usage
    today = ledger.periods().today
    _equal(await ledger.total(None, today), llm_server.reported_totals())
    kinds = await ledger.grouped("kind", "fakechat-ann", today)
    assert set(kinds) == {"conversation", "heartbeat"}
    assert kinds["conversation"].calls == 3 and kinds["heartbeat"].calls == 1
    assert (await ledger.total("fakechat-bob", today)).calls == 1
    # Prometheus counts the same tokens by kind and model.
    model = gateway.settings.llm.resolved_model
    metric = gateway.metrics.usage_tokens
    counted = sum(metric.value(kind=k, model=model, direction="in") for k in kinds)
    assert counted == sum(t.input for t in (await ledger.grouped("kind", None, today)).values())
    assert gateway.metrics.usage_cost.value(kind="conversation", model=model) == pytest.approx(
        kinds["conversation"].cost + (await ledger.total("fakechat-bob", today)).cost
    )
    assert "clawgate_usage_cost_dollars_total" in gateway.metrics.render()


async def test_usage_survives_a_restart_and_costs_follow_the_price_table(
    anthropic_server, make_settings
):
    clock = FixedClock(NOW)
    settings = make_settings(
        **llm_overrides(anthropic_server, model="claude-priced"),
        prices={"claude-priced": {"input": 3.0, "output": 15.0}},
    )
    for run in range(2):
        channel = RecordingChannel()
        gateway = Gateway.build(
            settings, build_provider(settings), channels=[channel], clock=clock, access=AllowAll()
        )
        await gateway.start()
        try:
            await channel.inject("cy", f"message {run} " + "words " * 400)
            await channel.wait_for(1)
            usage = gateway.parts.usage
            totals = await usage.total("fakechat-cy", usage.periods().today)
        finally:
            await gateway.stop()
    assert totals.calls == 2  # the first run's call was kept on disk
    _equal(totals, anthropic_server.reported_totals())
    expected = (
        totals.input * 3.0
        + totals.output * 15.0
        + totals.cache_read * 0.3
        + totals.cache_write * 3.75
    ) / 1_000_000
    assert totals.cost == pytest.approx(expected)
    assert totals.cache_read > 0  # the second run read the first one's cached prefix


def test_price_lookup_dated_names_prefixes_overrides_and_unknown(caplog):
    table = PriceTable(
        {
            "my-local": ModelPrice(input=0, output=0),
            "gpt-5.5": ModelPrice(input=1, output=2, cache_read=0.5),
        }
    )
    assert table.price("claude-sonnet-4-5-20250929") == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert table.price("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert table.price("claude-haiku-4-5-latest") == DEFAULT_PRICES["claude-haiku-4-5"]
    assert table.price("gpt-4o") != table.price("gpt-4o-mini")  # the longest name wins
    assert table.price("gpt-5.5").cache_read == 0.5 and table.price("gpt-5.5").cache_write == 1.25
    assert table.cost("my-local", Usage(1_000_000, 1_000_000)) == 0
    usage = Usage(1_000_000, 100_000, cache_read_tokens=2_000_000, cache_write_tokens=400_000)
    # Sonnet 5.5: $2 in, $10 out, $0.10 cache read, $2.50 cache write per million.
    assert table.cost("claude-sonnet-5-5", usage) == pytest.approx(2 + 1 + 0.2 + 1)
    with caplog.at_level(logging.INFO, logger="gateway.stores.prices"):
        assert table.cost("mystery-model", usage) == 0
        table.cost("mystery-model", usage)
    assert sum("mystery-model" in r.message for r in caplog.records) == 1


async def test_usage_command_today_week_month_by_kind(anthropic_server, make_gateway):
    clock = FixedClock(NOW)
    gateway, channel = await make_gateway(anthropic_server, clock=clock, owner="fakechat-dee")
    ledger = gateway.parts.usage
    await ledger.record("fakechat-dee", "heartbeat", "claude-sonnet-5-5", Usage(1_000, 50))
    clock.advance(timedelta(days=-3))  # Monday: this week, not today
    await ledger.record("fakechat-dee", "flush", "claude-sonnet-5-5", Usage(2_000, 100))
    clock.advance(timedelta(days=-10))  # last month
    await ledger.record("fakechat-dee", "conversation", "claude-sonnet-5-5", Usage(9_999, 1))
    clock.advance(timedelta(days=13))
    await channel.inject("dee", "/usage")
    [answer] = await channel.wait_for(1)
    lines = [line.strip() for line in answer.text.splitlines()]
    assert lines[0].startswith("Today: 1,050 tokens (1,000 in, 50 out")
    assert lines[1].startswith("This week: 3,150 tokens")
    assert lines[2].startswith("This month: 3,150 tokens")
    assert "flush: 2,100 tokens, $0.0050" in lines
    assert "heartbeat: 1,050 tokens, $0.0025" in lines
    assert anthropic_server.requests == []  # a command: no model call

    await channel.inject("dee", "/usage all")
    await ledger.record("fakechat-zed", "conversation", "unknown-model", Usage(10, 10))
    await channel.inject("zed", "/usage all")
    await channel.inject("zed", "/usage")
    await channel.inject("dee", "/usage", chat_type="group", chat_id="g1")
    await channel.wait_for(5)  # each chat's answers in order; chats in parallel
    assert "fakechat-dee: 3,150 tokens" in channel.texts("dee")[1]
    only_owner, own = channel.texts("zed")
    assert only_owner.startswith("Only the owner")
    assert "no price known for unknown-model" in own
    assert channel.texts("g1") == ["Usage is shown only in a direct message with me."]


async def test_running_totals_match_the_table_and_turn_with_the_day(anthropic_server, make_gateway):
    """What a budget check reads (`spent`, kept in memory) is what the table says, includes
    a call counted a moment ago whose row is not written yet, and starts again at midnight
    (the month goes on)."""
    clock = FixedClock(NOW)
    gateway, _ = await make_gateway(anthropic_server, clock=clock)
    ledger = gateway.parts.usage
    model = gateway.settings.llm.resolved_model
    await ledger.record("ann", "conversation", model, Usage(1_000, 100), "telegram:group:-1")
    today = ledger.periods().today
    assert (await ledger.spent("ann", today)).tokens == 1_100  # read from the table
    assert (await ledger.group_spent("telegram:group:-1", today)).tokens == 1_100
    ledger.record_soon("ann", "flush", model, Usage(500, 0))
    assert (await ledger.spent("ann", today)).tokens == 1_600  # before its row is written
    assert (await ledger.spent("ann", ledger.periods().month)).tokens == 1_600
    assert await ledger.spent("ann", today) == await ledger.total("ann", today)
    assert (await ledger.group_spent("telegram:group:-1", today)).tokens == 1_100
    clock.advance(timedelta(days=1))
    tomorrow = ledger.periods().today
    ledger.record_soon("ann", "conversation", model, Usage(10, 0))
    assert (await ledger.spent("ann", tomorrow)).tokens == 10
    assert (await ledger.spent("ann", ledger.periods().month)).tokens == 1_610
    assert (await ledger.group_spent("telegram:group:-1", tomorrow)).tokens == 0
