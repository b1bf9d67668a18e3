"""The panel's usage page: a person's totals by period, kind and model, and their caps."""

from __future__ import annotations

from gateway.agent.conversation import Usage


async def test_usage_page_shows_totals_kinds_models_and_caps(rig):
    await rig.login()
    ledger = rig.gateway.parts.usage
    await ledger.record("owner", "conversation", "claude-sonnet-5-5", Usage(1_234, 56, 7_000))
    await ledger.record("owner", "heartbeat", "home-llama", Usage(400, 20))
    page = await (await rig.client.get("/p/owner/usage")).text()
    assert 'href="/p/owner/usage" class="on"' in page
    assert "<td>1,634</td>" in page  # input tokens today, both calls
    assert "<td>conversation</td>" in page and "<td>heartbeat</td>" in page
    assert "home-llama (no price: $0)" in page
    assert "Cost per day" in page and "no caps for this person" in page
    other = await (await rig.client.get("/p/telegram-42/usage")).text()
    assert "nothing this month" in other and "1,634" not in other
    missing = await rig.client.get("/p/nobody/usage")
    assert missing.status == 404
