"""Nothing accepted is lost, nothing blocks everyone: the outbox, per-chat delivery, intake
that only records and hands over, malformed updates, transcript write failures, limits.

Each test here failed before the delivery path existed (see the docstrings for what
happened then)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from channels.base import OutboundMessage
from gateway.agent.providers import build_provider
from gateway.agent.sessions import transcript_path
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import PERSIST_REPLY, Gateway
from gateway.stores.state import StateDB
from gateway.workspace.seed import workspace_path
from retrypolicy import Backoff
from tests.conftest import AllowAll, llm_overrides
from tests.fakes.channel import RecordingChannel
from tests.fakes.telegram_server import FakeTelegramServer
from tests.settle import settled
from tests.state_rows import outbox_counts

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}


class FlakyChannel(RecordingChannel):
    """Fails every send while `down` (a platform outage), then records them again."""

    def __init__(self, name: str = "fakechat") -> None:
        super().__init__(name)
        self.down = False
        self.attempts = 0

    async def send(self, message: OutboundMessage) -> None:
        self.attempts += 1
        if self.down:
            raise ConnectionError("platform unreachable")
        await super().send(message)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer(max_poll=0.3) as server:
        yield server


@pytest.fixture
async def tg_gateway(make_settings, anthropic_server, tg) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(**sections: Any) -> Gateway:
        telegram = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            **sections.pop("telegram", {}),
        }
        settings = make_settings(**llm_overrides(anthropic_server), telegram=telegram, **sections)
        gateway = build_gateway(settings, build_provider(settings), options={"telegram": FAST})
        gateway.delivery.retry_first = 0.05
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def _refused_once(tg: FakeTelegramServer, chat: int) -> None:
    """Until a sendMessage to `chat` was answered with its scripted failure."""
    async with asyncio.timeout(30):
        while not any(
            method == "sendMessage" and to == str(chat) for method, to, _ in tg.call_times
        ):
            await asyncio.sleep(0.02)


def _gateway(make_settings, server, channel, **overrides: Any) -> Gateway:
    settings = make_settings(**llm_overrides(server), **overrides)
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=AllowAll()
    )
    gateway.delivery.retry_first = 0.05
    return gateway


async def test_a_reply_telegram_refused_for_seconds_is_delivered_once(tg, tg_gateway):
    """Before: Telegram answered 502 for ~4 s, the send gave up after 4 tries, the message was
    marked done and the reply never delivered."""
    gateway = await tg_gateway(telegram={"allow_from": ["42"]})
    tg.fail_chat(42, 502, "Bad Gateway", times=5)  # one whole send (4 tries) and one more
    await tg.send_text(42, "are you there?")
    await tg.wait_sent(1, timeout=20)
    await settled(gateway.state)
    assert tg.texts(42) == ["echo: are you there?"]


async def test_an_undelivered_reply_is_sent_after_a_restart_without_a_second_turn(
    make_settings, anthropic_server
):
    """Before: the failed reply was only logged; after a restart nothing was sent."""
    flaky = FlakyChannel()
    flaky.down = True
    first = _gateway(make_settings, anthropic_server, flaky)
    first.delivery.retry_first = 60.0  # no retry before the stop
    await first.start()
    await flaky.inject("ann", "remember the blue door")
    await first.lanes.drain()
    assert flaky.sent == [] and flaky.attempts == 1
    await first.stop(drain_timeout=0.5)

    working = RecordingChannel()
    second = _gateway(make_settings, anthropic_server, working)
    await second.start()
    try:
        await working.wait_for(1)
        await settled(second.state)
        assert working.texts() == ["echo: remember the blue door"]
        assert len(anthropic_server.requests) == 1  # the answer was kept, not computed again
        counts = await outbox_counts(second.state)
        assert counts == {"sent": 1}
    finally:
        await second.stop()


async def test_a_key_makes_a_delivery_exactly_once_across_restarts(make_settings, anthropic_server):
    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    first = await gateway.delivery.deliver("fakechat", "ann", "stand-up in 5", key="rem:1")
    again = await gateway.delivery.deliver("fakechat", "ann", "stand-up in 5", key="rem:1")
    assert await first == "sent" and await again == "duplicate"
    await gateway.stop()
    channel2 = RecordingChannel()
    restarted = _gateway(make_settings, anthropic_server, channel2)
    await restarted.start()
    try:
        outcome = await restarted.delivery.deliver("fakechat", "ann", "stand-up in 5", key="rem:1")
        assert await outcome == "duplicate"
        await restarted.delivery.drain()
        assert channel.texts() == ["stand-up in 5"] and channel2.texts() == []
    finally:
        await restarted.stop()


async def test_a_rate_limited_chat_does_not_stall_another_person(tg, tg_gateway):
    """Before: `/help` was answered from inside the polling loop; a 429 with retry_after 10
    on that chat froze intake for everyone for about 29 s."""
    await tg_gateway(telegram={"allow_from": ["42", "43"]})
    tg.fail_chat(42, 429, "Too Many Requests: retry after 60", {"retry_after": 60})
    await tg.send_text(42, "/help")
    await _refused_once(tg, 42)  # the /help answer is now waiting out its retry_after
    await tg.send_text(43, "hello, anyone?")
    await tg.wait_sent(1, timeout=30)
    assert tg.texts(43) == ["echo: hello, anyone?"]
    assert tg.texts(42) == []  # still waiting: 43 was answered without waiting behind it


async def test_pairing_codes_and_media_replies_do_not_wait_for_the_platform(tg, tg_gateway):
    """A stranger's pairing code stuck behind a 429 must not delay the owner."""
    await tg_gateway(telegram={"allow_from": ["42"]})
    tg.fail_chat(666, 429, "Too Many Requests: retry after 60", {"retry_after": 60})
    await tg.send_text(666, "let me in")  # a stranger: gets a pairing code, rate-limited
    await _refused_once(tg, 666)
    await tg.add_update(
        tg.message(
            42, None, photo=[{"file_id": "p", "file_unique_id": "p", "width": 1, "height": 1}]
        )
    )
    await tg.send_text(42, "and hello")
    await tg.wait_sent(2, timeout=30)
    photo, hello = tg.texts(42)
    assert "photo" in photo and hello == "echo: and hello"
    assert tg.texts(666) == []  # the code still waits out its 60 s: the owner did not


async def test_a_mention_splitting_a_surrogate_pair_is_skipped_not_retried_forever(
    tg, tg_gateway, tmp_path
):
    """Before: UnicodeDecodeError in entity parsing made the same batch retry forever and
    blocked all Telegram intake."""
    gateway = await tg_gateway(
        telegram={"allow_from": ["42"], "groups_enabled": True, "groups": ["-1001"]}
    )
    bad = await tg.add_update(
        tg.message(
            42,
            "\U0001f600@claw_bot hi",
            entities=[{"type": "mention", "offset": 1, "length": 9}],
            chat_id=-1001,
            chat_type="supergroup",
        )
    )
    await tg.send_text(42, "still there?")
    await tg.wait_sent(1, timeout=10)
    assert tg.texts(42) == ["echo: still there?"]
    channel = gateway.channels["telegram"]
    assert channel.skipped == 1
    rows = await gateway.state.db.execute_fetchall(
        "SELECT message_id, status FROM inbox WHERE status = 'failed'"
    )
    assert [tuple(r) for r in rows] == [(f"update-{bad}", "failed")]


async def test_a_transcript_write_failure_is_told_kept_pending_and_retried(
    make_settings, anthropic_server, tmp_path
):
    """Before: the message was dropped with no reply and never retried."""
    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel)
    gateway.persist_backoff = Backoff(0.2, 0.2)
    await gateway.start()
    try:
        await channel.inject("ann", "first")
        await channel.wait_for(1)
        transcript = transcript_path(
            workspace_path(tmp_path / "workspaces", "fakechat-ann"), "fakechat-ann:dm"
        )
        kept = transcript.with_suffix(".kept")
        transcript.rename(kept)
        transcript.mkdir()  # appending now fails (as on an immutable or read-only file)
        await channel.inject("ann", "second")
        await channel.wait_for(2)
        assert channel.texts()[1] == PERSIST_REPLY
        pending = await gateway.state.inbox.pending_inbound()
        assert [m.text for m in pending] == ["second"]
        shutil.rmtree(transcript)
        kept.rename(transcript)
        await channel.wait_for(3, timeout=10)
        assert channel.texts()[2] == "echo: second"
        assert await gateway.state.inbox.pending_inbound() == []
        assert "second" in transcript.read_text()
    finally:
        await gateway.stop()


async def test_one_person_over_the_limits_gets_one_polite_reply(make_settings, anthropic_server):
    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel, limits={"messages_per_minute": 3})
    await gateway.start()
    try:
        for n in range(6):
            await channel.inject("spam", f"message {n}")
        await channel.inject("calm", "hi")
        await gateway.lanes.drain()
        await gateway.delivery.drain()
        spam = channel.texts("spam")
        polite = [text for text in spam if "faster than I can take them" in text]
        assert len(polite) == 1  # once, not once per refused message
        assert sorted(set(spam) - set(polite)) == [f"echo: message {n}" for n in range(3)]
        assert channel.texts("calm") == ["echo: hi"]
        rows = await gateway.state.db.execute_fetchall(
            "SELECT status, count(*) FROM inbox GROUP BY status ORDER BY status"
        )
        assert [tuple(r) for r in rows] == [("done", 4), ("over_limit", 3)]
    finally:
        await gateway.stop()


async def test_a_full_queue_is_refused_politely(make_settings, anthropic_server):
    channel = RecordingChannel()
    gateway = _gateway(
        make_settings,
        anthropic_server,
        channel,
        limits={"queue_per_person": 2, "messages_per_minute": 0},
    )
    anthropic_server.reply_text("slow", delay=0.3)
    await gateway.start()
    try:
        for n in range(4):
            await channel.inject("busy", f"message {n}")
        await gateway.lanes.drain()
        await gateway.delivery.drain()
        texts = channel.texts("busy")
        assert sum("still working through your earlier messages" in t for t in texts) == 1
        assert len(texts) == 3
    finally:
        await gateway.stop()


async def test_a_turn_has_an_overall_deadline(make_settings, anthropic_server):
    """Before: a turn could run 20 tool rounds x 4 tries x 120 s with no overall limit."""
    channel = RecordingChannel()
    gateway = _gateway(
        make_settings, anthropic_server, channel, limits={"turn_deadline_seconds": 0.5}
    )
    anthropic_server.reply_text("too late", delay=60.0)  # only the deadline can end the turn
    await gateway.start()
    try:
        await channel.inject("ann", "think hard")
        await channel.wait_for(1, timeout=30)
        assert "longer than I allow" in channel.texts()[0]
    finally:
        await gateway.stop(drain_timeout=5)


def test_outbox_schema_replaces_the_unused_deliveries_table(tmp_path):
    async def check() -> None:
        async with StateDB(tmp_path / "state.db") as state:
            tables = {
                r[0]
                for r in await state.db.execute_fetchall(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                )
            }
            assert "outbox" in tables and "deliveries" not in tables

    asyncio.run(check())
