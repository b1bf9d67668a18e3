"""A voice note on Discord: sent as a voice message, the way a person's own looks.

Why a voice message and not an audio attachment: a voice message plays inline with its
waveform and length, like the one the person recorded (mobile clients show it as a voice
note, not as a file to open), which is what answering a voice note with a voice note means.
Discord wants it as one Ogg Opus attachment carrying `duration_secs` and `waveform` (base64,
one byte a point), the message flag IS_VOICE_MESSAGE (1 << 13), and no text: the reply's text
goes in its own message(s) after it. discord.py 2.7 has no parameter for this, so the
attachment's metadata is added to its `to_dict` and the flag set on the message parameters;
the request is discord.py's own (rate limits, retries, nonce).

Where Discord refuses the voice message itself (400: a server that disallows voice messages,
or figures it does not accept), the same audio goes as a plain attachment: the person still
hears it, with a player instead of a voice bubble.
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord.http import handle_message_parameters

from channels.voice import VoiceClip

log = logging.getLogger(__name__)

VOICE_MESSAGE_FLAG = 1 << 13


class VoiceFile(discord.File):
    """An upload that says it is a voice message's audio (length and waveform)."""

    def __init__(self, clip: VoiceClip) -> None:
        super().__init__(clip.path, filename="voice-message.ogg")
        self.seconds = clip.seconds
        self.waveform = clip.waveform

    def to_dict(self, index: int) -> dict[str, Any]:
        payload = super().to_dict(index)
        payload.update(
            duration_secs=round(self.seconds, 2), waveform=self.waveform, content_type="audio/ogg"
        )
        return payload


async def send_voice_message(
    client: discord.Client, channel_id: int, clip: VoiceClip, nonce: str | None
) -> None:
    """Post `clip` as a voice message; as an audio attachment where Discord refuses that."""
    if clip.waveform:
        flags = discord.MessageFlags(voice=True)  # IS_VOICE_MESSAGE, VOICE_MESSAGE_FLAG
        voice = VoiceFile(clip)
        try:
            with handle_message_parameters(file=voice, flags=flags, nonce=nonce) as params:
                await client.http.send_message(channel_id, params=params)
            return
        except discord.HTTPException as exc:
            if exc.status != 400:
                raise
            log.info("discord: voice message refused (%s); sending the audio as a file", exc)
        finally:
            voice.close()
    audio = discord.File(clip.path, filename="voice-message.ogg")
    try:
        with handle_message_parameters(file=audio, nonce=nonce) as params:
            await client.http.send_message(channel_id, params=params)
    finally:
        audio.close()
