"""Telegram end to end: the real python-telegram-bot against a loopback Bot API fake, with the
fake LLM server behind the gateway."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from channels.chunking import utf16_len
from channels.telegram import render
from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from gateway.stores.state import StateDB
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.telegram_server import BOT_USER
from tests.settle import settled
from tests.state_rows import inbound_status

REPO = Path(__file__).resolve().parents[2]
FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}


@pytest.fixture
async def tg_gateway(make_settings, anthropic_server, tg) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(**telegram: Any) -> Gateway:
        section = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            **telegram,
        }
        settings = make_settings(**llm_overrides(anthropic_server), telegram=section)
        gateway = build_gateway(settings, build_provider(settings), options={"telegram": FAST})
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


async def test_dm_in_reply_out_with_typing(tg, tg_gateway, anthropic_server):
    await tg_gateway(allow_from=["42"])
    await tg.send_text(42, "hello there")
    sent = await tg.wait_sent(1)
    assert [(s.chat_id, s.text, s.parse_mode) for s in sent] == [
        ("42", "echo: hello there", "HTML")
    ]
    assert ("42", "typing") in tg.chat_actions
    assert "hello there" in json.dumps(anthropic_server.requests[-1])


async def _approve(tmp_path, code: str, *extra: str) -> str:
    """`clawgate pairing approve` from another process while the gateway runs."""
    env = {
        "CLAWGATE_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
    }  # this checkout's code, not an installed copy
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "pairing",
        "approve",
        "telegram",
        code,
        *extra,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _code(text: str) -> str:
    return text.split("code is ")[1].split(" ")[0]


async def test_unknown_sender_pairs_then_talks(tg, tg_gateway, anthropic_server, tmp_path):
    gateway = await tg_gateway()
    await tg.send_text(55, "hi, who are you?")
    first = (await tg.wait_sent(1))[0].text
    assert "pairing code" in first and "clawgate pairing approve telegram" in first
    code = _code(first)
    assert len(code) == 8 and not set(code) & set("01OI")
    await tg.send_text(55, "hello?")
    assert code in (await tg.wait_sent(2))[1].text  # re-sent once
    await tg.send_text(55, "hello??")
    await tg.wait_confirmed()  # recorded (the offset moves only after the inbox record)
    await settled(gateway.state)
    assert len(tg.sent) == 2  # then silence
    assert anthropic_server.requests == []  # nothing reached the model

    out = await _approve(tmp_path, code.lower())
    assert "55" in out

    # Without writing again: a welcome, then what they wrote while waiting, in order.
    sent = [s.text for s in await tg.wait_sent(6)]
    assert sent[2].startswith("You're approved")
    assert sent[3:] == ["echo: hi, who are you?", "echo: hello?", "echo: hello??"]
    await tg.send_text(55, "now can we talk?")
    assert (await tg.wait_sent(7))[6].text == "echo: now can we talk?"
    assert await gateway.state.access.is_approved("telegram", "55")
    route = await gateway.parts.routes.last_dm_route("telegram-55")
    assert route is not None and (route.channel, route.chat_id) == ("telegram", "55")
    assert await gateway.state.access.pending_welcomes() == []


async def test_owner_approves_their_own_account_in_one_step(
    tg, tg_gateway, anthropic_server, tmp_path
):
    """The owner's first DM gets a code; `approve --owner` makes that chat their own
    assistant (the terminal's `owner` workspace and session), and the DM is answered."""
    gateway = await tg_gateway()
    await tg.send_text(77, "it's me, remember I like green tea")
    code = _code((await tg.wait_sent(1))[0].text)

    out = await _approve(tmp_path, code, "--owner")
    assert "linked telegram:77 to you (owner)" in out

    sent = [s.text for s in await tg.wait_sent(3)]
    assert sent[1].startswith("This account is now linked to you, the owner")
    assert sent[2] == "echo: it's me, remember I like green tea"
    workspaces = tmp_path / "workspaces"
    assert not (workspaces / "telegram-77").exists()  # no second assistant
    transcripts = list((workspaces / "owner" / "sessions").glob("*.jsonl"))
    assert any("green tea" in path.read_text() for path in transcripts)
    route = await gateway.parts.routes.last_dm_route("owner")
    assert route is not None and (route.channel, route.chat_id) == ("telegram", "77")


async def test_allowlist_policy_ignores_strangers(tg, tg_gateway, anthropic_server):
    gateway = await tg_gateway(dm_policy="allowlist", allow_from=["1"])
    await tg.send_text(2, "let me in")
    await tg.send_text(1, "hi")
    sent = await tg.wait_sent(1)
    await tg.wait_confirmed()
    await settled(gateway.state)
    assert [s.chat_id for s in tg.sent] == ["1"] and sent[0].text == "echo: hi"


MEMORY_CANARY = "zebracanary-TG-MEMORY-3301"


async def test_group_needs_mention_and_never_sees_private_memory(
    tg, tg_gateway, anthropic_server, tmp_path
):
    gateway = await tg_gateway(allow_from=["42"], groups_enabled=True, groups=["-1001"])
    owner = ensure_workspace(tmp_path / "workspaces", "owner")
    (owner / "MEMORY.md").write_text(f"# Memory\n- {MEMORY_CANARY}\n")
    group = {"chat_id": -1001, "chat_type": "supergroup"}
    await tg.send_text(42, "just chatting among humans", **group)
    await tg.send_text(
        42, "hello from a group we never allowed @claw_bot", chat_id=-2002, chat_type="group"
    )
    await tg.wait_confirmed()
    await settled(gateway.state)
    assert tg.sent == [] and anthropic_server.requests == []

    mention = "@claw_bot what is the plan?"
    await tg.send_text(
        42, mention, entities=[{"type": "mention", "offset": 0, "length": 9}], **group
    )
    sent = await tg.wait_sent(1)
    assert sent[0].chat_id == "-1001" and sent[0].text == (
        "echo: [Ann, platform id telegram:42] what is the plan?"
    )  # who said it, per platform
    request = json.dumps(anthropic_server.requests[-1])
    assert MEMORY_CANARY not in request and "not a private chat" in request
    # The prompt says who speaks, by the platform's name and id (not the owner here).
    assert "Speaking now: Ann (platform id 42), not the owner" in request

    # A reply to one of the bot's messages counts as addressing it.
    bot_message = {
        "message_id": 1,
        "date": 1,
        "chat": {"id": -1001, "type": "supergroup"},
        "from": BOT_USER,
        "text": "earlier",
    }
    await tg.send_text(7, "and you?", reply_to_message=bot_message, **group)
    assert (await tg.wait_sent(2))[1].text == "echo: [Ann, platform id telegram:7] and you?"


async def test_html_rejected_falls_back_to_plain(tg, tg_gateway, anthropic_server):
    await tg_gateway(allow_from=["42"])
    tg.reject_html = True
    anthropic_server.reply_text("**bold** and `code`")
    await tg.send_text(42, "format something")
    sent = await tg.wait_sent(1)
    assert tg.rejected_html == ["<b>bold</b> and <code>code</code>"]
    assert [(s.text, s.parse_mode) for s in sent] == [("**bold** and `code`", None)]


async def test_long_reply_is_chunked_within_utf16_limit(tg, tg_gateway, anthropic_server):
    gateway = await tg_gateway(allow_from=["42"])
    code = "\n".join(f"print('line {i} 😀')" for i in range(300))
    reply = "Intro paragraph.\n\n" + "word " * 900 + "\n\n```python\n" + code + "\n```\nDone."
    anthropic_server.reply_text(reply)
    await tg.send_text(42, "long please")
    parts = len(render(reply))
    assert parts >= 3
    await tg.wait_sent(parts)
    await settled(gateway.state)  # every chunk sent
    for sent in tg.sent:
        assert utf16_len(sent.text) <= 4096
        assert sent.text.count("<pre>") == sent.text.count("</pre>")
    assert "Done." in tg.sent[-1].text


async def test_stickers_get_a_polite_answer_and_a_lost_photo_is_said(
    tg, tg_gateway, anthropic_server
):
    """What cannot be fetched or used is answered in words, without the model (photos that
    can be fetched are tested in test_media_telegram.py)."""
    await tg_gateway(allow_from=["42"])
    sticker = {
        "file_id": "s1",
        "file_unique_id": "s1",
        "width": 10,
        "height": 10,
        "is_animated": False,
        "is_video": False,
        "type": "regular",
    }
    await tg.add_update(tg.message(42, sticker=sticker))
    sent = await tg.wait_sent(1)
    assert "sticker" in sent[0].text and anthropic_server.requests == []
    photo = [{"file_id": "gone", "file_unique_id": "u1", "width": 10, "height": 10}]
    await tg.add_update(tg.message(42, photo=photo))
    sent = await tg.wait_sent(2)
    assert "photo" in sent[1].text and "no longer has this file" in sent[1].text
    await tg.add_update(tg.message(42, photo=photo, caption="what is in this picture?"))
    await tg.wait_sent(3)
    assert "what is in this picture?" in tg.sent[2].text  # the caption still counts
    assert "no longer has this file" in tg.sent[2].text


async def test_restart_mid_conversation_no_duplicate_no_loss(tg, tg_gateway, anthropic_server):
    gateway = await tg_gateway(allow_from=["42"])
    await tg.send_text(42, "one")
    await tg.wait_sent(1)

    # "two" is recorded and its turn is running when the process dies.
    anthropic_server.reply_delay(30)
    two = await tg.send_text(42, "two")
    for _ in range(100):
        if await inbound_status(gateway.state, "telegram", "42", str(two["message_id"])):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    await gateway.stop(drain_timeout=0.01)

    # While it is down: a new message, and Telegram redelivers "two" (the ack was lost).
    await tg.send_text(42, "three")
    await tg.add_update(two)

    gateway = await tg_gateway(allow_from=["42"])
    await tg.wait_sent(3)
    await tg.wait_confirmed()
    await settled(gateway.state)
    assert tg.texts("42") == ["echo: one", "echo: two", "echo: three"]


async def test_conflict_and_rate_limit_are_retried(tg, tg_gateway, anthropic_server, caplog):
    caplog.set_level(logging.INFO)
    tg.fail(
        "getUpdates",
        409,
        "Conflict: terminated by other getUpdates request; make sure "
        "that only one bot instance is running",
        times=3,
    )
    tg.fail("getUpdates", 429, "Too Many Requests: retry after 1", {"retry_after": 1})
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", {"retry_after": 1})
    gateway = await tg_gateway(allow_from=["42"])
    await tg.send_text(42, "are you there?")
    sent = await tg.wait_sent(1)
    assert [s.text for s in sent] == ["echo: are you there?"]
    channel = gateway.channels["telegram"]
    assert channel.conflicts == 3  # type: ignore[attr-defined]
    ours = [r for r in caplog.records if r.name == "channels.telegram"]
    conflict_lines = [r for r in ours if "409" in r.getMessage()]
    assert len(conflict_lines) == 1 and conflict_lines[0].levelno == logging.ERROR
    assert any("rate limited" in r.getMessage() for r in ours)


async def test_stalled_poll_is_restarted(tg, tg_gateway, anthropic_server):
    tg.hang_polls = 1
    gateway = await tg_gateway(allow_from=["42"])
    await tg.send_text(42, "still alive?")
    assert (await tg.wait_sent(1, timeout=15))[0].text == "echo: still alive?"
    assert gateway.channels["telegram"].stalls == 1  # type: ignore[attr-defined]


async def test_offset_and_inbox_survive_in_state_db(tg, tg_gateway, tmp_path):
    gateway = await tg_gateway(allow_from=["42"])
    await tg.send_text(42, "remember me")
    await tg.wait_sent(1)
    await gateway.stop()
    async with StateDB.for_root(tmp_path / "workspaces") as state:
        offset = await state.offsets.load_offset("telegram")
        assert offset is not None and offset > 1000
        assert await state.inbox.pending_inbound() == []
