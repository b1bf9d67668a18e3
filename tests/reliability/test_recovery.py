"""Recovery after a crash, and the message path's bounds.

- A reply already in the session transcript but not in the outbox when the process died is
  delivered as recorded after the restart: the model is not asked again (before: it was,
  with the answer as the last message of the history, so it answered nothing, that was
  delivered, and the transcript held two answers).
- A resumed turn that stopped before its answer continues with the person's message (or the
  tool results since) last: the model never gets an empty or missing user message.
- A long reply sent in parts keeps its progress: a retry, or a restart, sends only the parts
  the platform has not accepted (before: a 3-part reply whose second part met five 502s sent
  part 1 twice). On Discord a send repeated after a kill carries the same nonce and is not
  posted twice. A file (send_file) is its message's first part: the same holds for it.
- A message whose turn keeps being cut short is given up after a bounded number of retries,
  marked failed and reported (before: pending forever, taken up at every start).
- A turn whose prompt or tools cannot be built ends with a short reply (before: no reply, the
  message pending).

The states "as a kill left them" are written with the same calls the turn makes (inbox
record, session transcript appends), so they are exactly what the process leaves on disk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from channels.base import InboundMessage
from channels.telegram import render
from gateway.agent.conversation import Message, ToolCall
from gateway.agent.providers import build_provider
from gateway.agent.transcript import INTERRUPTED_TOOL_RESULT, Transcript
from gateway.assembly.platforms import build_gateway
from gateway.cli.ops import collect_status
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.recovery import GIVE_UP_REPLY, MAX_RETRIES
from gateway.pipeline.turn_setup import TurnSetup
from gateway.pipeline.turns import SETUP_REPLY
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff
from tests.conftest import AllowAll, llm_overrides
from tests.fakes.channel import RecordingChannel
from tests.fakes.discord_server import FakeDiscordServer, patch_discord
from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.state_rows import inbound_counts, inbound_status, outbox_counts

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}


def _gateway(
    make_settings: Callable[..., Any], server: FakeAnthropicServer, channel: RecordingChannel
) -> Gateway:
    settings = make_settings(**llm_overrides(server))
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=AllowAll()
    )
    gateway.delivery.retry_first = 0.05
    return gateway


def _message(text: str, number: int = 1) -> InboundMessage:
    return InboundMessage("fakechat", "ann", "ann", text, message_id=f"m-{number}")


async def _leave_as_killed(gateway: Gateway, msg: InboundMessage, *after: Message) -> Path:
    """The disk as a kill leaves it mid-turn: `msg` recorded in the inbox (pending, nothing in
    the outbox) and in its session transcript, followed by `after` (what the turn recorded
    before the kill). Returns the transcript's path."""
    await gateway.state.open()
    try:
        assert await gateway.state.inbox.record_inbound(msg)
        route = await gateway.router.resolve(msg)
        ensure_workspace(gateway.settings.workspaces_dir, route.person_id)
        session = await gateway.parts.sessions.get(route.workspace, route.session_key)
        session.record(
            Message("user", msg.text),
            channel=msg.channel,
            chat_id=msg.chat_id,
            sender_id=msg.sender_id,
            message_id=msg.message_id,
        )
        for message in after:
            session.record(message)
        return session.transcript.path
    finally:
        await gateway.state.close()


def _answers(path: Path) -> list[str]:
    return [
        str(e.get("text"))
        for e in Transcript(path).load()
        if e.get("type") == "assistant" and not e.get("tool_calls")
    ]


def _last_user_content(request: dict[str, Any]) -> Any:
    last = request["messages"][-1]
    assert last["role"] == "user", f"the model was asked to continue {last['role']!r}"
    return last["content"]


async def test_a_reply_recorded_before_a_kill_is_delivered_as_recorded(
    make_settings, anthropic_server
):
    """Before: the turn ran again with the answer last in the history; the fake model (like
    a real one given an assistant turn last) answered something else, which was delivered
    instead of the recorded reply, and the transcript held two answers."""
    msg = _message("what is the door code?")
    recorded = "The door code is 4711, as you told me on Monday."
    path = await _leave_as_killed(
        _gateway(make_settings, anthropic_server, RecordingChannel()),
        msg,
        Message("assistant", recorded),
    )

    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    try:
        await channel.wait_for(1)
        await gateway.lanes.drain()
        await gateway.delivery.drain()
        assert channel.texts() == [recorded]
        assert anthropic_server.requests == []  # never regenerated
        assert _answers(path) == [recorded]  # one answer to one message
        assert await inbound_status(gateway.state, "fakechat", "ann", "m-1") == "done"
        assert await outbox_counts(gateway.state) == {"sent": 1}
    finally:
        await gateway.stop()


async def test_an_error_reply_recorded_before_a_kill_is_delivered_as_recorded(
    make_settings, anthropic_server
):
    """A reply that is not the model's text (here the tool-round note) is kept as a `reply`
    event; the restart delivers it, not a new turn."""
    msg = _message("tidy my notes")
    channel = RecordingChannel()
    first = _gateway(make_settings, anthropic_server, channel)
    path = await _leave_as_killed(first, msg)
    note = "I stopped after 20 rounds of tool calls without finishing."
    Transcript(path).append(
        {
            "type": "reply",
            "channel": "fakechat",
            "chat_id": "ann",
            "message_id": "m-1",
            "text": note,
        }
    )
    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    try:
        await channel.wait_for(1)
        await gateway.lanes.drain()
        assert channel.texts() == [note] and anthropic_server.requests == []
    finally:
        await gateway.stop()


@pytest.mark.parametrize("cut", ["before the model answered", "between tool call and result"])
async def test_a_turn_cut_short_continues_with_the_person_s_message_last(
    make_settings, anthropic_server, cut
):
    msg = _message("please list my files")
    after = (
        []
        if cut == "before the model answered"
        else [Message("assistant", "", tool_calls=(ToolCall("t1", "list_files", {}),))]
    )
    path = await _leave_as_killed(
        _gateway(make_settings, anthropic_server, RecordingChannel()), msg, *after
    )
    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    try:
        await channel.wait_for(1)
        await gateway.lanes.drain()
    finally:
        await gateway.stop()
    assert len(anthropic_server.requests) == 1
    content = _last_user_content(anthropic_server.requests[0])
    if not after:
        assert content == "please list my files" or content[0]["text"] == "please list my files"
        assert channel.texts() == ["echo: please list my files"]
    else:  # the interrupted call got its result; the person's message is still the question
        assert content[0]["type"] == "tool_result"
        assert INTERRUPTED_TOOL_RESULT in json.dumps(content)
    entries = Transcript(path).load()
    assert [e.get("message_id") for e in entries if e.get("type") == "user"] == ["m-1"]
    assert len(_answers(path)) == 1


async def test_a_message_whose_turn_keeps_being_cut_short_is_given_up(
    make_settings, anthropic_server
):
    """Before: pending forever, its turn taken up (and cut short) at every start."""

    def hang(body: dict[str, Any]) -> Any:
        return replace(anthropic_server.default_reply(body), delay=30.0)

    anthropic_server.responder = hang
    channel = RecordingChannel()
    for run in range(MAX_RETRIES + 1):  # the first try and every retry are cut short
        gateway = _gateway(make_settings, anthropic_server, channel)
        await gateway.start()
        if run == 0:
            await channel.inject("ann", "a message that stops the gateway")
        for _ in range(200):
            if len(anthropic_server.requests) == run + 1:
                break
            await asyncio.sleep(0.02)
        assert len(anthropic_server.requests) == run + 1
        await gateway.stop(drain_timeout=0.1)  # the turn is cancelled: still pending

    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    try:
        await channel.wait_for(1)
        await gateway.lanes.drain()
        assert channel.texts() == [GIVE_UP_REPLY.format(tries=MAX_RETRIES + 1)]
        assert len(anthropic_server.requests) == MAX_RETRIES + 1  # not asked again
        assert (await inbound_counts(gateway.state)).get("failed") == 1
        assert gateway.metrics.messages_given_up.value(channel="fakechat") == 1
    finally:
        await gateway.stop()
    # the owner sees it in `clawgate status` (the log says which message)
    status = await asyncio.to_thread(collect_status, gateway.settings)  # a CLI: its own loop
    assert status["messages"]["given_up"] == 1
    # and the session works again for the next message
    anthropic_server.responder = None
    gateway = _gateway(make_settings, anthropic_server, channel)
    await gateway.start()
    try:
        await channel.inject("ann", "hello again")
        await channel.wait_for(2)
        assert channel.texts()[-1] == "echo: hello again"
    finally:
        await gateway.stop()


class _BrokenSetup:
    """The gateway's turn setup (gateway/pipeline/turn_setup.py), except that building the
    prompt or the tools fails (what a hostile file the parsers do not bound yet did:
    RecursionError from a skill's front matter), while `broken` names the part."""

    def __init__(self, setup: TurnSetup) -> None:
        self.setup = setup
        self.broken = ""

    def context_files(self, route):  # type: ignore[no-untyped-def]
        if self.broken == "prompt":
            raise RecursionError("maximum recursion depth exceeded")
        return self.setup.context_files(route)

    def tools_for(self, route):  # type: ignore[no-untyped-def]
        if self.broken == "tools":
            raise ValueError("a tool server sent a schema that cannot be read")
        return self.setup.tools_for(route)

    def system_prompt(self, route, files):  # type: ignore[no-untyped-def]
        return self.setup.system_prompt(route, files)

    def tool_context(self, route):  # type: ignore[no-untyped-def]
        return self.setup.tool_context(route)

    def capability_lines(self, route):  # type: ignore[no-untyped-def]
        return self.setup.capability_lines(route)


@pytest.mark.parametrize("part", ["prompt", "tools"])
async def test_a_turn_that_cannot_be_assembled_still_gets_an_answer(
    make_settings, anthropic_server, part, caplog
):
    """Before: no reply at all; the message stayed pending and was tried at every start."""
    channel = RecordingChannel()
    gateway = _gateway(make_settings, anthropic_server, channel)
    setup = gateway.turns.prompt = _BrokenSetup(gateway.parts.setup)
    setup.broken = part
    await gateway.start()
    try:
        await channel.inject("ann", "hi there")
        await channel.wait_for(1)
        assert channel.texts() == [SETUP_REPLY]
        assert anthropic_server.requests == []
        assert "could not prepare the turn" in caplog.text
        assert await inbound_counts(gateway.state) == {"done": 1}
        assert gateway.metrics.turns.value(outcome="setup_error") == 1
        setup.broken = ""  # fixed: the next message is answered as usual
        await channel.inject("ann", "and now?")
        await channel.wait_for(2)
        # answered by the model (the failed message stays in the history, as after any error)
        assert channel.texts()[-1].endswith("and now?")
    finally:
        await gateway.stop()


# -- multi-part replies: progress per part ------------------------------------------------------


def _long_reply() -> str:
    """Three paragraphs of ~3,000 characters each: three Telegram messages."""
    return "\n\n".join(f"PART-{name} " + " ".join([f"{name.lower()}word"] * 400) for name in "ABC")


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer(max_poll=0.3) as server:
        yield server


def _tg_gateway(make_settings, anthropic_server, tg) -> Gateway:  # type: ignore[no-untyped-def]
    settings = make_settings(
        **llm_overrides(anthropic_server),
        telegram={
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": ["42"],
        },
    )
    gateway = build_gateway(settings, build_provider(settings), options={"telegram": FAST})
    gateway.delivery.retry_first = 0.05
    return gateway


async def test_a_retried_multi_part_reply_does_not_repeat_its_first_part(
    make_settings, anthropic_server, tg
):
    """Before: part 1 was sent twice (the retry started from the top)."""
    text = _long_reply()
    parts = [html for html, _ in render(text)]
    assert len(parts) == 3
    anthropic_server.reply_text(text)
    tg.fail_chat(42, 502, "Bad Gateway", times=5, after=1)  # part 2 meets five 502s
    gateway = _tg_gateway(make_settings, anthropic_server, tg)
    await gateway.start()
    try:
        await tg.send_text(42, "write me a long one")
        await tg.wait_sent(3, timeout=30)
        await gateway.delivery.drain()
        assert tg.texts(42) == parts
        assert await outbox_counts(gateway.state) == {"sent": 1}
    finally:
        await gateway.stop()


async def test_a_restart_sends_only_the_parts_not_yet_accepted(make_settings, anthropic_server, tg):
    """A kill after part 1 was accepted (and recorded): the restart sends parts 2 and 3."""
    text = _long_reply()
    parts = [html for html, _ in render(text)]
    image = _tg_gateway(make_settings, anthropic_server, tg)
    await image.state.open()
    try:
        row = await image.state.outbox.enqueue_outbound("telegram", "42", text)
        assert row is not None
        await image.state.outbox.note_parts(row, 1)
    finally:
        await image.state.close()
    gateway = _tg_gateway(make_settings, anthropic_server, tg)
    await gateway.start()
    try:
        await tg.wait_sent(2, timeout=10)
        await gateway.delivery.drain()
        assert tg.texts(42) == parts[1:]
        assert await outbox_counts(gateway.state) == {"sent": 1}
    finally:
        await gateway.stop()


async def test_discord_recognises_a_reply_sent_just_before_a_kill(
    make_settings, anthropic_server, monkeypatch
):
    """The crash window on Discord: the reply reached Discord, the kill came before the
    outbox recorded it. The restart sends it again with the same nonce (from the outbox row)
    and Discord returns the message it has instead of posting a second one."""
    options = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}
    async with FakeDiscordServer() as dc:
        patch_discord(monkeypatch, dc)
        settings = make_settings(
            **llm_overrides(anthropic_server), discord={"token": dc.token, "allow_from": ["301"]}
        )
        image = build_gateway(settings, build_provider(settings), options=options)
        await image.state.open()
        try:
            row = await image.state.outbox.enqueue_outbound("discord", "302", "see you at noon")
        finally:
            await image.state.close()
        await dc.accept("302", "see you at noon", nonce=f"cg{row}.0")  # before the kill
        gateway = build_gateway(settings, build_provider(settings), options=options)
        await gateway.start()
        try:
            for _ in range(500):
                if (await outbox_counts(gateway.state)).get("sent"):
                    break
                await asyncio.sleep(0.02)
            assert await outbox_counts(gateway.state) == {"sent": 1}
            assert dc.texts("302") == ["see you at noon"]  # once
        finally:
            await gateway.stop()


# -- files in the outbox (send_file): the file is the message's first part ----------------------


async def test_a_file_whose_caption_does_not_fit_keeps_its_progress_over_a_restart(
    make_settings, anthropic_server, tg, tmp_path
):
    """A file with a text longer than a Telegram caption goes out as the file, then the
    text's parts. A kill after the file was accepted (and recorded) does not upload it again;
    a row that had not started sends the file first, without a caption."""
    text = _long_reply()
    parts = [html for html, _ in render(text)]
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan\n")
    image = _tg_gateway(make_settings, anthropic_server, tg)
    await image.state.open()
    try:
        started = await image.state.outbox.enqueue_outbound("telegram", "42", text, file=str(plan))
        assert started is not None
        await image.state.outbox.note_parts(started, 1)  # the file was accepted before the kill
        assert await image.state.outbox.enqueue_outbound("telegram", "42", text, file=str(plan))
    finally:
        await image.state.close()
    gateway = _tg_gateway(make_settings, anthropic_server, tg)
    await gateway.start()
    try:
        await tg.wait_sent(6, timeout=20)
        await gateway.delivery.drain()
        assert tg.texts(42) == parts + parts
        [sent] = tg.files
        assert (sent.method, sent.filename, sent.caption) == ("sendDocument", "plan.md", "")
        assert await outbox_counts(gateway.state) == {"sent": 2}
    finally:
        await gateway.stop()


async def test_discord_recognises_a_file_sent_just_before_a_kill(
    make_settings, anthropic_server, monkeypatch, tmp_path
):
    """The upload carries the nonce of its outbox row too: repeated after a kill, Discord
    returns the message it has and the file is not posted twice."""
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan\n")
    options = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}
    async with FakeDiscordServer() as dc:
        patch_discord(monkeypatch, dc)
        settings = make_settings(
            **llm_overrides(anthropic_server), discord={"token": dc.token, "allow_from": ["301"]}
        )
        image = build_gateway(settings, build_provider(settings), options=options)
        await image.state.open()
        try:
            row = await image.state.outbox.enqueue_outbound(
                "discord", "302", "the plan", file=str(plan)
            )
        finally:
            await image.state.close()
        await dc.accept(
            "302", "the plan", nonce=f"cg{row}.0", uploads=[("plan.md", plan.read_bytes())]
        )  # before the kill
        gateway = build_gateway(settings, build_provider(settings), options=options)
        await gateway.start()
        try:
            for _ in range(500):
                if (await outbox_counts(gateway.state)).get("sent"):
                    break
                await asyncio.sleep(0.02)
            assert await outbox_counts(gateway.state) == {"sent": 1}
            assert [f.filename for f in dc.files] == ["plan.md"]  # once
        finally:
            await gateway.stop()
