"""A person's own clock: the prompt's time and the day's note follow the zone set for them
(`[scheduler.workspaces.<id>]` or `[heartbeat.workspaces.<id>]` timezone), not the
gateway's, so "remind me at 9" and "what day is it" are answered in their time."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.clock import FixedClock

NOW = datetime(2026, 11, 29, 22, 30, tzinfo=UTC)  # Monday 07:30 in Tokyo


def _time_note(request: dict) -> str:
    for message in reversed(request["messages"]):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        for text in texts:
            if "Current time:" in str(text):
                return str(text)
    raise AssertionError("no time note in the request")


async def test_the_prompt_time_is_the_persons_own(openai_server, make_gateway) -> None:
    openai_server.reply_text("Good morning.")
    _, channel = await make_gateway(
        openai_server,
        owner="fakechat-dan",
        clock=FixedClock(NOW),
        heartbeat={"workspaces": {"fakechat-dan": {"timezone": "Asia/Tokyo"}}},
    )
    await channel.inject("dan", "what day is it?")
    await channel.wait_for(1)
    note = _time_note(openai_server.requests[-1])
    assert "2026-11-30 07:30 JST (Monday)" in note


async def test_without_a_zone_of_their_own_it_is_the_gateways(openai_server, make_gateway) -> None:
    openai_server.reply_text("Good evening.")
    _, channel = await make_gateway(openai_server, owner="fakechat-dan", clock=FixedClock(NOW))
    await channel.inject("dan", "what day is it?")
    await channel.wait_for(1)
    assert "2026-11-29 22:30 UTC (Sunday)" in _time_note(openai_server.requests[-1])
