"""The parts of voice replies below the channels: the outbox file's format, the person's
choice on disk, the tidy-up of files a crash left, and the speaker failing or stalling."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from channels import voice as clips
from channels.base import Attachment, ChannelBase, InboundMessage
from gateway.agent.media.speech import SpeechFailed
from gateway.config.media import SpeechSettings
from gateway.pipeline.routing import Route
from gateway.pipeline.voice_choice import VoiceChoices, read_choice, write_choice
from gateway.pipeline.voice_reply import STALE_SECONDS, VoiceReplies
from memory.layout import VOICE_FILE
from tests.fakes.speech import FakeSpeaker, listen

HEARD = Attachment("audio", "f1", "voice.ogg", "audio/ogg", 100, 3.0, label="voice message")


class Platform(ChannelBase):
    name = "telegram"
    voice_notes = True
    max_upload_bytes = 50_000_000


def _route(workspace: Path, *, private: bool = True) -> Route:
    return Route(
        "telegram-42",
        workspace,
        "dm:telegram-42",
        private,
        "telegram",
        "42",
        sender_id="42",
        message_id="7",
    )


def _msg(*, heard: bool = True) -> InboundMessage:
    return InboundMessage(
        "telegram", "42", "42", "", message_id="7", attachments=(HEARD,) if heard else ()
    )


def test_a_clip_is_read_with_its_figures_and_a_broken_one_is_not(tmp_path):
    audio, meta = clips.paths(tmp_path, "r1")
    audio.write_bytes(b"OggS")
    assert clips.read_clip(audio) is None  # no figures: sent as a plain file
    meta.write_bytes(clips.meta_bytes(3.21, "AAEC"))
    clip = clips.read_clip(audio)
    assert clip is not None and clip.seconds == 3.21 and clip.whole_seconds == 4
    assert clips.is_voice(audio) and not clips.is_voice(tmp_path / "photo.ogg")
    for broken in (
        b"{",
        b'{"seconds": "NaN"}',
        b'{"seconds": -1}',
        b'{"seconds": 1e9}',
        b'{"seconds": 2, "waveform": "not base64!"}',
        b"[1]",
        b" " * 5000,
    ):
        meta.write_bytes(broken)
        assert clips.read_clip(audio) is None, broken
    clips.discard(audio)
    assert not audio.exists() and not meta.exists()


def test_the_choice_file_is_read_defensively(tmp_path):
    assert read_choice(tmp_path) is None
    write_choice(tmp_path, "never")
    assert read_choice(tmp_path) == "never"
    assert (tmp_path / VOICE_FILE).stat().st_mode & 0o777 == 0o600
    for hostile in (b'{"reply": "loud"}', b"[]", b"\xff\xfe", b"{" * 5000, b'"always"'):
        (tmp_path / VOICE_FILE).write_bytes(hostile)
        assert read_choice(tmp_path) is None, hostile


async def test_a_group_hears_nothing_unless_allowed_and_a_dm_follows_the_choice(tmp_path):
    speaker = FakeSpeaker()
    voice = VoiceReplies(SpeechSettings(), lambda: speaker, tmp_path / "voice")
    platform = Platform()
    assert await voice.wanted(_route(tmp_path), _msg(), platform)
    assert not await voice.wanted(_route(tmp_path), _msg(heard=False), platform)
    assert not await voice.wanted(_route(tmp_path, private=False), _msg(), platform)
    assert not await voice.wanted(_route(tmp_path), _msg(), ChannelBase())  # the terminal
    write_choice(tmp_path, "always")
    assert await voice.wanted(_route(tmp_path), _msg(heard=False), platform)
    write_choice(tmp_path, "mirror")  # a changed choice is seen at once (same size)
    assert not await voice.wanted(_route(tmp_path), _msg(heard=False), platform)
    write_choice(tmp_path, "always")
    assert await voice.wanted(_route(tmp_path), _msg(heard=False), platform)
    allowed = VoiceReplies(SpeechSettings(groups=True), lambda: speaker, tmp_path / "voice")
    assert await allowed.wanted(_route(tmp_path, private=False), _msg(), platform)
    off = VoiceReplies(SpeechSettings(backend="none"), lambda: speaker, tmp_path / "voice")
    assert not await off.wanted(_route(tmp_path), _msg(), platform)


async def test_the_voice_note_is_kept_under_the_replys_key_until_sent(tmp_path):
    speaker = FakeSpeaker()
    voice = VoiceReplies(SpeechSettings(), lambda: speaker, tmp_path / "voice")
    made = await voice.voice_note_for(
        _route(tmp_path), _msg(), "Hello **there**.", key="answer:telegram:42:7", channel=Platform()
    )
    again = await voice.voice_note_for(
        _route(tmp_path), _msg(), "Hello **there**.", key="answer:telegram:42:7", channel=Platform()
    )
    assert made == again and made.endswith(clips.SUFFIX)  # spoken again: the same files
    clip = clips.read_clip(Path(made))
    assert clip is not None
    assert clip.seconds == pytest.approx(listen(Path(made).read_bytes()).seconds, abs=0.05)
    assert speaker.spoken == ["Hello there.", "Hello there."]
    assert sorted(p.name for p in (tmp_path / "voice").iterdir()) == sorted(
        [Path(made).name, clips.meta_of(Path(made)).name]
    )
    assert (tmp_path / "voice").stat().st_mode & 0o777 == 0o700


async def test_a_failing_or_stalling_voice_leaves_text_only(tmp_path):
    speaker = FakeSpeaker()
    speaker.failure = SpeechFailed("the voice broke")
    voice = VoiceReplies(SpeechSettings(), lambda: speaker, tmp_path / "voice")
    assert (
        await voice.voice_note_for(_route(tmp_path), _msg(), "Hello.", key="k", channel=Platform())
        == ""
    )

    class Stalled(FakeSpeaker):
        async def synthesize(self, text: str):  # type: ignore[no-untyped-def]
            await asyncio.Event().wait()

    stalled = VoiceReplies(
        SpeechSettings(timeout_seconds=0.01), Stalled, tmp_path / "v", margin_seconds=0.05
    )
    async with asyncio.timeout(30):  # the reply's own limit ends it long before
        assert (
            await stalled.voice_note_for(
                _route(tmp_path), _msg(), "Hello.", key="k", channel=Platform()
            )
            == ""
        )
    small = Platform()
    small.max_upload_bytes = 100  # the platform's limit: text only
    assert (
        await VoiceReplies(SpeechSettings(), FakeSpeaker, tmp_path / "w").voice_note_for(
            _route(tmp_path), _msg(), "Hello.", key="k", channel=small
        )
        == ""
    )


def test_the_sweep_removes_only_old_files_no_row_names(tmp_path):
    voice = VoiceReplies(SpeechSettings(), FakeSpeaker, tmp_path)
    files = {}
    for name in ("kept", "old", "new"):
        audio, meta = clips.paths(tmp_path, name)
        audio.write_bytes(b"OggS")
        meta.write_bytes(clips.meta_bytes(1.0, ""))
        files[name] = audio
    past = time.time() - STALE_SECONDS - 60
    for name in ("kept", "old"):
        os.utime(files[name], (past, past))
    assert voice.sweep({str(files["kept"])}) == 1
    assert files["kept"].exists() and files["new"].exists() and not files["old"].exists()
    assert not clips.meta_of(files["old"]).exists()


async def test_voice_command_says_and_keeps_the_choice(tmp_path):
    choices = VoiceChoices(SpeechSettings())
    said = await choices.command(tmp_path, "", private=True)
    assert "mirror" in said and "(the default)" in said
    assert "off" in await choices.command(tmp_path, "OFF", private=True)
    assert read_choice(tmp_path) == "never"
    assert "/voice on" in await choices.command(tmp_path, "sometimes", private=True)
    assert read_choice(tmp_path) == "never"
    group = await choices.command(tmp_path, "on", private=False)
    assert "direct message" in group and read_choice(tmp_path) == "never"
    off = VoiceChoices(SpeechSettings(backend="none"))
    assert "switched off" in await off.command(tmp_path, "on", private=True)
