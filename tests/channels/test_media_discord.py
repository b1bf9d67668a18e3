"""Voice messages, images and documents from Discord, end to end: the real discord.py client
against the loopback Discord (attachment URLs serve real files), the gateway, a loopback
speech-to-text endpoint and the fake model; and a file sent back with send_file."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from tests.conftest import llm_overrides
from tests.fakes.discord_server import VOICE_MESSAGE
from tests.fakes.media_files import VOICE_NOTE, jpeg, pdf
from tests.fakes.speech import listen

OPTIONS = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}


@pytest.fixture
async def dc_gateway(make_settings, anthropic_server, dc, stt) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(**media: Any) -> Gateway:
        transcription = {"backend": "openai", "base_url": stt.base_url, "api_key": stt.key}
        settings = make_settings(
            **llm_overrides(anthropic_server),
            discord={"token": dc.token, "allow_from": ["301"]},
            media={"transcription": transcription, "speech": {"backend": "none"}, **media},
        )
        gateway = build_gateway(settings, build_provider(settings), options=OPTIONS)
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


def _last_user(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _text(body: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in _last_user(body) if b["type"] == "text")


async def test_a_discord_voice_message_is_heard(dc, stt, dc_gateway, anthropic_server):
    await dc_gateway()
    stt.text = "book a table for two at eight"
    voice = dc.attachment(
        "voice-message.ogg", VOICE_NOTE.read_bytes(), "audio/ogg", voice_seconds=4.2
    )
    await dc.dm(301, "", attachments=[voice])
    sent = await dc.wait_sent(1)
    text = _text(anthropic_server.requests[-1])
    assert "[voice message, 0:04, heard and transcribed]" in text
    assert "book a table for two at eight" in text
    assert sent[0].content.startswith("echo: [voice message")
    assert stt.requests[-1].size == VOICE_NOTE.stat().st_size


async def test_a_discord_image_and_a_pdf(dc, dc_gateway, anthropic_server):
    await dc_gateway()
    image = dc.attachment("whiteboard.jpg", jpeg(2000, 1500), "image/jpeg", width=2000, height=1500)
    await dc.dm(301, "what does the whiteboard say?", attachments=[image])
    await dc.wait_sent(1)
    blocks = _last_user(anthropic_server.requests[-1])
    assert [b["type"] for b in blocks].count("image") == 1
    assert "what does the whiteboard say?" in _text(anthropic_server.requests[-1])

    document = dc.attachment(
        "minutes.pdf", pdf(["Decision: move the launch to May 4."]), "application/pdf"
    )
    await dc.dm(301, "", attachments=[document])
    await dc.wait_sent(2)
    text = _text(anthropic_server.requests[-1])
    assert "[file minutes.pdf, 1 page" in text and "move the launch to May 4" in text


async def test_an_expired_attachment_link_is_said(dc, dc_gateway, anthropic_server):
    await dc_gateway()
    document = dc.attachment("notes.txt", b"hello", "text/plain; charset=utf-8")
    dc.expire(document)
    await dc.dm(301, "", attachments=[document])
    sent = await dc.wait_sent(1)
    assert "no longer has this file" in sent[0].content
    assert anthropic_server.requests == []


async def test_send_file_uploads_to_discord(dc, dc_gateway, anthropic_server):
    gateway = await dc_gateway()
    await dc.dm(301, "hi")
    await dc.wait_sent(1)
    workspace = gateway.settings.workspaces_dir / "discord-301"
    (workspace / "plan.md").write_text("1. pack\n2. go\n")
    anthropic_server.reply_tool_calls(
        [("send_file", {"path": "plan.md", "caption": "the plan"}, "c1")]
    )
    anthropic_server.reply_text("There you go.")
    await dc.dm(301, "send me the plan")
    files = await dc.wait_files(1)
    assert (files[0].filename, files[0].data, files[0].content) == (
        "plan.md",
        b"1. pack\n2. go\n",
        "the plan",
    )
    # Streaming: the reply is an edit of the preview that showed the progress line, which
    # Discord keeps above the file; the order of the chat is not the order of writing.
    async with dc._changed:
        await asyncio.wait_for(dc._changed.wait_for(lambda: "There you go." in dc.texts()), 10)


async def test_a_voice_message_is_answered_with_a_voice_message_and_its_text(
    dc, stt, tts, dc_gateway, anthropic_server
):
    """Discord's voice message: one Ogg Opus attachment with its length and waveform, the
    flag IS_VOICE_MESSAGE and no text; the reply's text follows in its own message."""
    gateway = await dc_gateway(
        speech={"backend": "openai", "base_url": tts.base_url, "api_key": tts.key}
    )
    anthropic_server.reply_text("Table for two at eight is booked.")
    voice = dc.attachment(
        "voice-message.ogg", VOICE_NOTE.read_bytes(), "audio/ogg", voice_seconds=4.2
    )
    await dc.dm(301, "", attachments=[voice])
    upload = (await dc.wait_files(1))[0]
    sent = await dc.wait_sent(1)
    assert upload.flags & VOICE_MESSAGE and upload.content == ""
    assert upload.filename == "voice-message.ogg"
    heard = listen(upload.data)
    assert (heard.container, heard.codec) == ("ogg", "opus")
    assert heard.seconds == pytest.approx(
        len(tts.spoken[-1].input) / tts.chars_per_second, rel=0.15
    )
    assert heard.loudness_variation > 0.4 and heard.rms > 0.02
    assert upload.meta["duration_secs"] == pytest.approx(heard.seconds, abs=0.1)
    waveform = base64.b64decode(upload.meta["waveform"])
    assert 10 <= len(waveform) <= 256 and max(waveform) == 255 and min(waveform) < 128
    assert [m.content for m in sent] == ["Table for two at eight is booked."]
    await gateway.delivery.drain()
    assert len(dc.files) == 1
    assert not list((gateway.state.path.parent / "voice").glob("*"))


async def test_a_text_message_on_discord_gets_text_only_by_default(
    dc, stt, tts, dc_gateway, anthropic_server
):
    gateway = await dc_gateway(
        speech={"backend": "openai", "base_url": tts.base_url, "api_key": tts.key}
    )
    await dc.dm(301, "hello")
    await dc.wait_sent(1)
    await gateway.delivery.drain()
    assert dc.files == [] and tts.spoken == []


async def test_where_voice_messages_are_refused_the_audio_goes_as_a_file(
    dc, stt, tts, dc_gateway, anthropic_server
):
    dc.voice_messages = False
    await dc_gateway(speech={"backend": "openai", "base_url": tts.base_url, "api_key": tts.key})
    voice = dc.attachment(
        "voice-message.ogg", VOICE_NOTE.read_bytes(), "audio/ogg", voice_seconds=4.2
    )
    await dc.dm(301, "", attachments=[voice])
    upload = (await dc.wait_files(1))[0]
    assert not upload.flags & VOICE_MESSAGE and listen(upload.data).codec == "opus"
    assert (await dc.wait_sent(1))[0].content.startswith("echo: [voice message")
