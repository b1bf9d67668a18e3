"""Speech for the tests: a fast fake voice, a loopback `/v1/audio/speech`, and a listener.

`babble` makes speech-like sound without a voice model: a buzzing vowel (a 120 Hz sawtooth,
a pulse with its harmonics, its pitch drifting) shaped into syllables of about 200 ms with
short pauses between words, so its loudness rises and falls the way speech does (a tone or
white noise would not; silence has none). `FakeSpeaker` says any text as babble, 15
characters a second, through the real Ogg Opus encoder, in milliseconds. `FakeSpeechServer`
speaks OpenAI's wire protocol for `POST /v1/audio/speech` (JSON `model`, `input`, `voice`,
`response_format`; Bearer key; OpenAI's error envelope) beside the transcription fake's
endpoint, and answers babble as WAV or raw PCM. `listen` decodes what a channel received and
measures it, for the tests to assert on.
"""

from __future__ import annotations

import asyncio
import io
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiohttp import web

from gateway.agent.media.voice_note import VoiceNote, voice_note
from tests.fakes.transcription_server import FakeTranscriptionServer, _error

CHARS_PER_SECOND = 15.0


def babble(seconds: float, rate: int = 24_000, *, seed: int = 0) -> np.ndarray:
    """Speech-like float samples in [-1, 1]: syllables of a buzzing vowel and pauses."""
    rng = np.random.default_rng(seed)
    count = max(1, int(seconds * rate))
    t = np.arange(count) / rate
    pitch = 120.0 * (1 + 0.08 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = np.mod(phase, 2 * np.pi) / np.pi - 1  # a sawtooth: the pulse and its harmonics
    envelope = np.zeros(count)
    position = 0
    while position < count:
        syllable = int(rate * rng.uniform(0.12, 0.28))
        window = np.hanning(syllable)[: max(0, min(syllable, count - position))]
        envelope[position : position + len(window)] = window * rng.uniform(0.5, 1.0)
        position += syllable + int(
            rate * (rng.uniform(0.15, 0.35) if rng.random() < 0.3 else rng.uniform(0.0, 0.04))
        )
    samples = voice * envelope
    peak = float(np.abs(samples).max()) or 1.0
    return (0.8 * samples / peak).astype(np.float32)


class FakeSpeaker:
    """A `Speaker` that babbles: the length a voice would take, in milliseconds."""

    name = "fake"
    chars_per_second = CHARS_PER_SECOND

    def __init__(self, *, billed: bool = False) -> None:
        self.billed = billed
        self.spoken: list[str] = []
        self.failure: Exception | None = None

    async def synthesize(self, text: str) -> VoiceNote:
        if self.failure is not None:
            raise self.failure
        self.spoken.append(text)
        samples = babble(max(0.5, len(text) / CHARS_PER_SECOND), seed=len(self.spoken))
        return await asyncio.to_thread(
            voice_note, samples, 24_000, text, billed_characters=len(text) if self.billed else 0
        )

    async def close(self) -> None:
        return None


# --- a loopback OpenAI-compatible /audio/speech ------------------------------------------------


@dataclass
class SpeechRequest:
    model: str
    voice: str
    input: str
    response_format: str
    authorization: str


class FakeSpeechServer(FakeTranscriptionServer):
    """The loopback OpenAI audio API with `/v1/audio/speech` too; what it was asked to say is
    in `spoken` (the key, `fail` and `delay` are the transcription fake's)."""

    RATE = 24_000  # OpenAI's speech is 24 kHz mono

    def __init__(self, *, key: str = "sk-tts-test") -> None:
        super().__init__(key=key)
        self.spoken: list[SpeechRequest] = []
        self.chars_per_second = CHARS_PER_SECOND  # faster for tests of long replies
        self.body: bytes | None = None  # set: answer these bytes instead of speech

    def _routes(self, router: web.UrlDispatcher) -> None:
        super()._routes(router)
        router.add_post("/v1/audio/speech", self._speech)

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        if refusal := self._refusal(request):
            return refusal
        try:
            body: Any = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON", "invalid_request_error")
        text = body.get("input") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            return _error(400, "input is required", "invalid_request_error")
        if len(text) > 4096:
            return _error(400, "input is longer than 4096 characters", "invalid_request_error")
        fmt = str(body.get("response_format") or "mp3")
        self.spoken.append(
            SpeechRequest(
                str(body.get("model", "")),
                str(body.get("voice", "")),
                text,
                fmt,
                request.headers.get("Authorization", ""),
            )
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.body is not None:
            return web.Response(body=self.body, content_type="audio/wav")
        samples = babble(len(text) / self.chars_per_second, self.RATE, seed=len(self.spoken))
        if fmt == "pcm":
            return web.Response(body=pcm16(samples), content_type="audio/pcm")
        if fmt != "wav":
            return _error(400, f"this fake speaks wav and pcm, not {fmt}", "invalid_request_error")
        return web.Response(body=wav_bytes(samples, self.RATE), content_type="audio/wav")


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """Float samples as a 16-bit mono WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm16(samples))
    return out.getvalue()


# --- what a channel received ---------------------------------------------------------------------


@dataclass(frozen=True)
class Heard:
    """A received voice note, decoded: its codec, channels, rate, length (decoded samples),
    overall loudness, and how much its loudness varies over 50 ms windows (coefficient of
    variation: speech ~1, a steady tone or noise ~0) and the share of quiet windows."""

    container: str
    codec: str
    channels: int
    rate: int
    seconds: float
    rms: float
    loudness_variation: float
    quiet_share: float


def listen(data: bytes) -> Heard:
    import av

    with av.open(io.BytesIO(data), "r") as container:
        stream = container.streams.audio[0]
        codec = stream.codec_context.name
        channels = stream.codec_context.channels
        rate = stream.codec_context.sample_rate
        frames = [frame.to_ndarray().astype(np.float64) for frame in container.decode(stream)]
        name = container.format.name
    samples = np.concatenate([f.reshape(f.shape[0], -1) for f in frames], axis=1).mean(axis=0)
    if frames and frames[0].dtype.kind == "i":
        samples = samples / 32768.0
    window = max(1, rate // 20)
    usable = len(samples) // window * window
    energies = np.sqrt((samples[:usable].reshape(-1, window) ** 2).mean(axis=1))
    mean = float(energies.mean()) if len(energies) else 0.0
    variation = float(energies.std() / mean) if mean > 0 else 0.0
    quiet = float((energies < 0.1 * energies.max()).mean()) if len(energies) else 1.0
    return Heard(
        name,
        codec,
        channels,
        rate,
        len(samples) / rate,
        float(np.sqrt((samples**2).mean())) if len(samples) else 0.0,
        variation,
        quiet,
    )
