"""Replies that appear as they are written, end to end: the real python-telegram-bot
and discord.py against the loopback platforms, the real SDKs streaming from the fake model.

The reply is always the one outbox message it was without streaming; a preview is a
Telegram draft (nothing stays), or a message the reply is written into (an edit).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from channels.base import InboundMessage, OutboundMessage
from channels.preview import CURSOR
from channels.telegram import TelegramChannel, render
from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.recovery import answer_key
from gateway.stores.state import StateDB
from retrypolicy import Backoff
from tests.conftest import TEST_KEY, llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer, FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.settle import settled

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}
STORY = (
    "Once upon a time a small gateway learned to show its answers while writing them, "
    "word by word, so nobody had to stare at a typing indicator for half a minute."
)
MENTION = [{"type": "mention", "offset": 0, "length": 9}]


@pytest.fixture
async def tg_gateway(
    make_settings: Any, anthropic_server: FakeAnthropicServer, tg: FakeTelegramServer
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(llm: dict[str, Any] | None = None, **telegram: Any) -> Gateway:
        section = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": ["42"],
            **telegram,
        }
        settings = make_settings(
            llm=llm or llm_overrides(anthropic_server)["llm"], telegram=section
        )
        gateway = build_gateway(settings, build_provider(settings), options={"telegram": FAST})
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop()


async def _until(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def _gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(times)]


async def test_a_private_chat_sees_a_growing_draft_then_the_reply_once(
    tg, tg_gateway, anthropic_server
):
    anthropic_server.stream_delay = 0.1  # 22 pieces: about 2 s of writing
    anthropic_server.reply_text(STORY)
    await tg_gateway()
    await tg.send_text(42, "tell me a story")
    sent = await tg.wait_sent(1)
    assert [s.text for s in sent] == [STORY]  # the reply: one ordinary message
    drafts = [d for d in tg.drafts if d.text]
    assert len(drafts) >= 2  # it grew while written
    assert all(STORY.startswith(d.text) for d in drafts)
    assert len(drafts[-1].text) > len(drafts[0].text)
    assert len({d.draft_id for d in tg.drafts}) == 1 and tg.drafts[0].draft_id != 0
    # at most one update a second per chat (Telegram's pace); a slow run only spaces them more
    assert all(gap >= 0.9 for gap in _gaps([d.at for d in drafts]))
    assert all(d.at <= sent[0].at for d in tg.drafts)  # nothing updates after the reply
    assert anthropic_server.streamed == 1


async def test_streaming_off_sends_only_the_reply(tg, tg_gateway, anthropic_server):
    anthropic_server.reply_text(STORY)
    await tg_gateway(streaming=False)
    await tg.send_text(42, "tell me a story")
    assert [s.text for s in await tg.wait_sent(1)] == [STORY]
    assert tg.drafts == [] and anthropic_server.streamed == 0
    assert not any(method == "editMessageText" for method, _ in tg.calls)


async def test_without_drafts_the_reply_is_written_into_its_preview_message(
    tg, tg_gateway, anthropic_server
):
    anthropic_server.stream_delay = 0.1
    anthropic_server.reply_text(STORY)
    gateway = await tg_gateway(streaming_drafts=False)
    await tg.send_text(42, "tell me a story")
    await _until(lambda: tg.sent and tg.sent[0].text == STORY)
    await settled(gateway.state)
    assert len(tg.sent) == 1  # the preview became the reply: one message in the chat
    message = tg.sent[0]
    assert message.edits >= 2 and message.parse_mode == "HTML"
    edits = [params for method, params in tg.calls if method == "editMessageText"]
    assert all(str(p["text"]).endswith(CURSOR) for p in edits[:-1])
    assert edits[-1]["text"] == STORY and tg.drafts == []


async def test_a_group_preview_is_an_edited_message_at_the_group_pace(
    tg, tg_gateway, anthropic_server
):
    anthropic_server.stream_delay = 0.3  # 22 pieces: about 6.6 s of writing, two intervals
    anthropic_server.reply_text(STORY)
    gateway = await tg_gateway(groups_enabled=True, groups=["-1001"])
    await tg.send_text(
        42, "@claw_bot a story please", chat_id=-1001, chat_type="supergroup", entities=MENTION
    )
    await _until(lambda: bool(tg.finished()), timeout=30)
    await settled(gateway.state)
    assert [s.text for s in tg.sent] == [STORY]  # the preview message became the reply
    updates = [
        (method, at)
        for method, chat, at in tg.call_times
        if chat == "-1001" and method in ("sendMessage", "editMessageText")
    ]
    assert updates[0][0] == "sendMessage" and tg.drafts == []  # no drafts outside private chats
    previews = [at for _, at in updates[:-1]]  # the last update is the reply replacing it
    gaps = _gaps(previews)
    assert gaps, "the reply was written within one interval: the pace was not exercised"
    assert all(gap >= 2.9 for gap in gaps)  # 20 messages a minute


async def test_a_tool_shows_a_progress_line_that_the_text_replaces(
    tg, tg_gateway, anthropic_server
):
    anthropic_server.stream_delay = 0.1
    anthropic_server.reply_tool_call("list_files", {"path": "."}, text="Let me look.")
    anthropic_server.reply_text(STORY, delay=1.5)  # the tool's line shows meanwhile
    await tg_gateway()
    await tg.send_text(42, "what files do I have?")
    assert [s.text for s in await tg.wait_sent(1)] == [STORY]
    shown = [d.text for d in tg.drafts]
    assert "(looking through files...)" in shown
    after = shown[shown.index("(looking through files...)") + 1 :]
    assert after and all(STORY.startswith(text) for text in after)


async def test_a_fallback_after_partial_output_starts_the_preview_again(
    tg, tg_gateway, anthropic_server
):
    async with FakeOpenAIServer() as backup:
        anthropic_server.stream_delay = backup.stream_delay = 0.3
        anthropic_server.reply_text("The primary began to say something", break_after=2)
        backup.reply_text("The backup answers in full.")
        llm = {
            **llm_overrides(anthropic_server)["llm"],
            "fallbacks": ["backup:gpt-backup"],
            "endpoints": {
                "backup": {"provider": "openai", "base_url": backup.base_url, "api_key": TEST_KEY}
            },
        }
        await tg_gateway(llm=llm)
        await tg.send_text(42, "say it")
        assert [s.text for s in await tg.wait_sent(1)] == ["The backup answers in full."]
    shown = [d.text for d in tg.drafts]
    assert shown[0] == "The prim"  # the primary's first piece, shown at once
    last_primary = max(i for i, text in enumerate(shown) if text.startswith("The prim"))
    assert all("The backup answers in full.".startswith(text) for text in shown[last_primary + 1 :])
    assert shown[-1].startswith("The back")


async def test_a_rate_limited_preview_waits_and_the_reply_still_comes_once(
    tg, tg_gateway, anthropic_server
):
    anthropic_server.stream_delay = 0.2  # about 4.5 s of writing
    anthropic_server.reply_text(STORY)
    tg.fail("sendMessageDraft", 429, "Too Many Requests: retry after 2", {"retry_after": 2})
    await tg_gateway()
    await tg.send_text(42, "tell me a story")
    assert [s.text for s in await tg.wait_sent(1)] == [STORY]
    draft_calls = [at for method, _, at in tg.call_times if method == "sendMessageDraft"]
    assert len(draft_calls) >= 2  # it went on after the pause
    assert draft_calls[1] - draft_calls[0] >= 1.9  # the pause Telegram asked for


async def test_sending_the_reply_again_edits_the_same_message(tg):
    """What a restart does with a reply whose send was not recorded: the same edit again.
    Telegram answers "message is not modified"; nothing new appears in the chat."""
    channel = TelegramChannel(tg.token, base_url=tg.base_url, streaming=True, drafts=False)
    await _start(channel)
    try:
        preview = channel.preview("42", direct=True, key="answer:telegram:42:1")
        assert preview is not None
        await preview.show("Half of the")
        await preview.show("Half of the answer")
        reply = OutboundMessage(
            "telegram", "42", "Half of the answer, **all** of it.", replaces=preview.message_id
        )
        await channel.send(reply)
        await channel.send(reply)  # after a crash before the send was recorded
        assert tg.current_texts("42") == ["Half of the answer, <b>all</b> of it."]
        # the preview was deleted by the person: the reply comes as a new message
        tg.sent[0].deleted = True
        await channel.send(reply)
        assert tg.current_texts("42") == ["Half of the answer, <b>all</b> of it."]
        assert len(tg.sent) == 2
    finally:
        await channel.stop()


async def test_a_long_reply_writes_its_first_part_into_the_preview(tg):
    channel = TelegramChannel(tg.token, base_url=tg.base_url, streaming=True, drafts=False)
    await _start(channel)
    try:
        preview = channel.preview("-1001", direct=False, key="answer:telegram:-1001:9")
        assert preview is not None and preview.interval >= 3.0
        await preview.show("word " * 10)
        long = "word " * 2000
        await channel.send(OutboundMessage("telegram", "-1001", long, replaces=preview.message_id))
        parts = [html for html, _ in render(long)]
        assert len(parts) >= 3
        assert tg.current_texts("-1001") == parts  # part one in the preview, then new ones
    finally:
        await channel.stop()


async def _start(channel: TelegramChannel) -> None:
    async def ignore(_msg: Any) -> None:
        return None

    await channel.start(ignore)


async def test_a_restarted_turn_goes_on_in_the_recorded_preview(tg, tg_gateway, anthropic_server):
    """A preview message recorded before a kill: the turn taken up again at the next start
    writes into the same message, and its reply replaces it (no second message)."""
    anthropic_server.stream_delay = 0.05
    first = await tg_gateway(streaming_drafts=False)
    earlier = await first.channels["telegram"].bot.send_message(42, "The answer wa" + CURSOR)
    await first.stop()
    # What the killed process left: the message accepted, its preview begun.
    message = tg.message(42, "continue please")
    msg = InboundMessage(
        "telegram", "42", "42", "continue please", message_id=str(message["message_id"])
    )
    async with StateDB(first.state.path) as state:
        assert await state.inbox.record_inbound(msg)
        await state.previews.record_preview(
            answer_key(msg), "telegram", "42", str(earlier.message_id)
        )
    gateway = await tg_gateway(streaming_drafts=False)
    await _until(lambda: tg.sent[0].text == "echo: continue please")
    await settled(gateway.state)
    assert [s.text for s in tg.sent] == ["echo: continue please"]
    assert await gateway.state.previews.preview_for(answer_key(msg)) == ""  # forgotten once queued


async def test_a_group_reply_that_ends_empty_deletes_its_preview(tg, tg_gateway, anthropic_server):
    """Red-team round 3: a reply that is only HEARTBEAT_OK (nothing left once the token is
    taken out) used to leave its preview, "HEARTBEA ▍", in the group for good."""
    anthropic_server.stream_delay = 1.0  # the first piece is shown before the second comes
    anthropic_server.reply_text("HEARTBEAT_OK")
    anthropic_server.reply_text("Here I am.")
    gateway = await tg_gateway(groups_enabled=True, groups=["-1001"])
    asked = await tg.send_text(
        42, "@claw_bot are you there?", chat_id=-1001, chat_type="supergroup", entities=MENTION
    )
    await _until(lambda: any(s.chat_id == "-1001" for s in tg.sent))  # the preview is up
    await settled(gateway.state, timeout=15)
    await gateway.lanes.drain()
    assert tg.sent[0].text.endswith(CURSOR)  # it was a preview
    assert tg.current_texts(-1001) == []  # and it is gone
    key = answer_key(
        InboundMessage(
            "telegram", "-1001", "42", "", chat_type="group", message_id=str(asked["message_id"])
        )
    )
    assert await gateway.state.previews.preview_for(key) == ""  # and forgotten
    # The next reply in the same group comes as usual.
    await tg.send_text(
        42, "@claw_bot hello?", chat_id=-1001, chat_type="supergroup", entities=MENTION
    )
    await _until(lambda: tg.current_texts(-1001) == ["Here I am."])
