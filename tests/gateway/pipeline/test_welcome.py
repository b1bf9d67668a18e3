"""After approval: a welcome, then the messages that waited, in order; a denial drops them."""

from __future__ import annotations

import asyncio

import pytest

from gateway.agent.providers import build_provider
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.pairing import ChannelAccess, ChannelPolicy, Pairing
from gateway.pipeline.welcome import MAX_WAITING_ANSWERED, WELCOME
from gateway.stores.state import StateDB
from tests.conftest import llm_overrides
from tests.fakes.channel import RecordingChannel


@pytest.fixture
async def paired(anthropic_server, make_settings):
    settings = make_settings(**llm_overrides(anthropic_server))
    state = StateDB.for_root(settings.workspaces_dir)
    channel = RecordingChannel("telegram")
    access = ChannelAccess(state, {"telegram": ChannelPolicy(dm_policy="pairing")})
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=access, state=state
    )
    gateway.approvals.interval = 3600  # no poll during the test: only what it triggers
    await gateway.start()
    yield gateway, channel
    await gateway.stop()


async def _cli(gateway: Gateway, decision: str, code: str) -> None:
    """What `clawgate pairing approve|deny` does: its own connection to the state database."""
    async with StateDB(gateway.state.path) as other:
        pairing = Pairing(other)
        if decision == "approve":
            await pairing.approve("telegram", code)
        else:
            await pairing.deny("telegram", code)


async def test_a_message_right_after_approval_waits_for_the_older_ones(paired, anthropic_server):
    gateway, channel = paired
    await channel.inject("9", "first")
    [request] = await Pairing(gateway.state).pending("telegram")
    await channel.inject("9", "second")
    await _cli(gateway, "approve", request.code)
    # The approval is not polled yet; the next message itself triggers the follow-up.
    await channel.inject("9", "third")
    await gateway.lanes.drain()
    assert channel.texts()[2:] == [
        WELCOME + " Now to what you wrote while you waited:",
        "echo: first",
        "echo: second",
        "echo: third",
    ]
    assert await gateway.approvals.check() == 0  # announced once


async def test_a_message_during_the_polls_follow_up_waits_for_the_older_ones(
    paired, anthropic_server
):
    gateway, channel = paired
    await channel.inject("9", "first")
    [request] = await Pairing(gateway.state).pending("telegram")
    await _cli(gateway, "approve", request.code)
    # The poll is sending the welcome (held here) when the person writes again.
    welcome_held, release = asyncio.Event(), asyncio.Event()
    announce = gateway.approvals.announce

    async def slow_announce(*args: str) -> None:
        welcome_held.set()
        await release.wait()
        await announce(*args)

    gateway.approvals.announce = slow_announce
    poll = asyncio.create_task(gateway.approvals.check())
    await welcome_held.wait()
    newer = asyncio.create_task(channel.inject("9", "second"))
    await asyncio.sleep(0.05)
    release.set()
    assert await poll == 1
    await newer
    await gateway.lanes.drain()
    assert channel.texts()[1:] == [
        WELCOME + " Now to what you wrote while you waited:",
        "echo: first",
        "echo: second",
    ]


async def test_denied_sender_waiting_messages_are_dropped(paired, anthropic_server):
    gateway, channel = paired
    await channel.inject("9", "let me in")
    [request] = await Pairing(gateway.state).pending("telegram")
    await _cli(gateway, "deny", request.code)
    assert await gateway.approvals.check() == 0
    await gateway.lanes.drain()
    assert anthropic_server.requests == []
    assert await gateway.state.inbox.waiting_inbound("telegram", "9") == []


async def test_only_the_first_waiting_messages_are_answered(paired, anthropic_server):
    gateway, channel = paired
    for n in range(MAX_WAITING_ANSWERED + 5):
        await channel.inject("9", f"message {n}")
    [request] = await Pairing(gateway.state).pending("telegram")
    await _cli(gateway, "approve", request.code)
    assert await gateway.approvals.check() == 1
    await gateway.lanes.drain()
    answers = [text for text in channel.texts() if text.startswith("echo: ")]
    assert answers == [f"echo: message {n}" for n in range(MAX_WAITING_ANSWERED)]
    assert await gateway.state.inbox.pending_inbound() == []


async def test_linking_a_waiting_account_to_the_owner_answers_it(paired, anthropic_server):
    from gateway.pipeline.links import link_accounts
    from gateway.pipeline.welcome import WELCOME_OWNER

    gateway, channel = paired
    await channel.inject("9", "it's me")
    async with StateDB(gateway.state.path) as other:
        await link_accounts(
            other, gateway.settings.workspaces_dir, "owner", ["owner", "telegram:9"]
        )
    assert await gateway.approvals.check() == 1
    await gateway.lanes.drain()
    assert channel.texts()[1].startswith(WELCOME_OWNER)
    assert channel.texts()[2] == "echo: it's me"
    assert (gateway.settings.workspaces_dir / "owner" / "sessions").is_dir()


async def test_a_strangers_waiting_words_are_dropped_after_the_code_lifetime(tmp_path):
    """Kept only while a pairing code could still be approved (the inbox keeps no stranger's
    words beyond that)."""
    from datetime import UTC, datetime, timedelta

    from channels.base import InboundMessage
    from gateway.stores.inbox import WAITING_TTL

    async with StateDB(tmp_path / "state.db") as state:
        now = datetime.now(UTC)
        old = InboundMessage(
            "telegram",
            "9",
            "9",
            "an old secret",
            message_id="1",
            received_at=now - WAITING_TTL - timedelta(minutes=1),
        )
        new = InboundMessage("telegram", "9", "9", "a recent one", message_id="2", received_at=now)
        for msg in (old, new):
            assert await state.inbox.record_inbound(msg)
            await state.inbox.mark_done(msg, "waiting")
        await state.inbox.prune_inbox(now)
        waiting = await state.inbox.waiting_inbound("telegram", "9")
        assert [m.text for m in waiting] == ["a recent one"]
        bodies = await state.database.rows("SELECT payload FROM inbox_body")
        assert not any("old secret" in row[0] for row in bodies)
