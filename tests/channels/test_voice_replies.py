"""Voice notes answered with voice notes, through the fake Telegram and Discord.

The speech comes from the loopback OpenAI-compatible endpoint (tests/fakes/speech.py: fast
babble over the real wire protocol), except in the one test of the real local voice. What
the platforms receive is decoded with PyAV: Ogg Opus, its real length, speech-like sound.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from channels.voice import SUFFIX
from gateway.agent.media.speech import bundled_voice
from gateway.pipeline.gateway import Gateway
from tests.fakes.discord_server import VOICE_MESSAGE, FakeDiscordServer, patch_discord
from tests.fakes.media_files import VOICE_NOTE
from tests.fakes.speech import FakeSpeechServer, listen

LONG = " ".join(f"Sentence number {n} of a long answer, said plainly." for n in range(40))


@pytest.fixture
async def tts() -> AsyncIterator[FakeSpeechServer]:
    async with FakeSpeechServer() as server:
        yield server


def speech(tts: FakeSpeechServer, **extra: Any) -> dict[str, Any]:
    return {"speech": {"backend": "openai", "base_url": tts.base_url, "api_key": tts.key,
                       **extra}}


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
        tg, stt, tts, media_gateway, anthropic_server):
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
