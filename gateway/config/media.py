"""The `[media]` settings section: voice notes, photos and documents people send, files the
assistant sends back, and replies read aloud (docs/media.md)."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

_Lower = BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v)


class TranscriptionSettings(BaseModel):
    """How voice notes become text: `local` (faster-whisper on this machine, no account),
    `openai` (any OpenAI-compatible /audio/transcriptions endpoint) or `none`."""

    model_config = ConfigDict(extra="forbid")

    backend: Annotated[Literal["local", "openai", "none"], _Lower] = "local"
    # local: a faster-whisper (CTranslate2) model folder; empty: the bundled tiny.en model.
    model_path: str = ""
    # local: int8 (fastest on a CPU), int8_float32, float32, ...
    compute_type: str = "int8"
    # Spoken language as an ISO code ("en", "de"); empty: detected (multilingual models only).
    language: str = ""
    # openai: the endpoint (empty: OpenAI's), its key (else OPENAI_API_KEY) and model.
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "whisper-1"
    timeout_seconds: float = Field(120.0, gt=0)
    # Longer voice notes are not transcribed (the person is told).
    max_seconds: float = Field(900.0, gt=0)

    def resolved_api_key(self) -> str:
        return _key_or_environment(self.api_key)


class SpeechSettings(BaseModel):
    """How replies are read aloud, `[media.speech]` beside `[media.transcription]` (voice in,
    voice out): `local` (Piper on this machine, no account), `openai` (any OpenAI-compatible
    /audio/speech endpoint) or `none`. `reply`: `mirror` answers a voice note with a voice
    note, `always` speaks every reply, `never` none; the text is always sent as well."""

    model_config = ConfigDict(extra="forbid")

    backend: Annotated[Literal["local", "openai", "none"], _Lower] = "local"
    reply: Annotated[Literal["mirror", "always", "never"], _Lower] = "mirror"
    # Voice replies in groups too (a group hears what the assistant says to it).
    groups: bool = False
    # The longest voice reply, estimated from the text; the rest is only sent as text.
    max_seconds: float = Field(120.0, ge=5, le=900)
    # local: a Piper voice file (.onnx with its .onnx.json beside); empty: the bundled
    # en_US-joe-medium voice.
    voice_path: str = ""
    # openai: the endpoint (empty: OpenAI's), its key (else OPENAI_API_KEY), model and voice.
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "tts-1"
    voice: str = "alloy"
    # Per reply, synthesis and encoding together.
    timeout_seconds: float = Field(60.0, gt=0)

    def resolved_api_key(self) -> str:
        return _key_or_environment(self.api_key)


def _key_or_environment(key: SecretStr | None) -> str:
    if key is not None and key.get_secret_value():
        return key.get_secret_value()
    return os.environ.get("OPENAI_API_KEY", "")


class MediaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True  # false: attachments get a polite "text only" reply, as before
    # Largest file fetched from a platform (Telegram serves bots at most 20 MB anyway).
    max_download_mb: float = Field(20.0, gt=0, le=2000)
    # Does the model take images? auto: decided from the provider and model name.
    vision: Annotated[Literal["auto", "on", "off"], _Lower] = "auto"
    # The newest images kept as images in the conversation; older ones become a one-line note.
    images_in_context: int = Field(3, ge=0, le=50)
    # Photos larger than this (megapixels) are refused rather than decoded.
    max_image_megapixels: float = Field(80.0, gt=0, le=1000)
    # A document's text given to the model with the message; the rest is saved beside it.
    document_max_chars: int = Field(40_000, ge=1_000, le=2_000_000)
    # A PDF is read for at most this many pages and seconds, whatever text it holds (in a
    # child process killed at the deadline).
    document_max_pages: int = Field(1000, ge=1, le=100_000)
    document_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    # Files processed at once (decoding, resizing, reading), on threads and processes of
    # their own: what the rest of the gateway waits on is never used up by media.
    workers: int = Field(2, ge=1, le=32)
    transcription: TranscriptionSettings = Field(default_factory=TranscriptionSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)

    @property
    def max_download_bytes(self) -> int:
        return int(self.max_download_mb * 1024 * 1024)
