"""Speech samples to a voice note: Ogg Opus, mono, 48 kHz, with its length and waveform.

Telegram's sendVoice plays Ogg Opus as a voice note; Discord's voice messages want an Ogg
Opus attachment with `duration_secs` and a waveform (one byte per point, at most one point
per 100 ms and at most 256 points, base64). Both are computed here from the samples, never
taken from a backend's word. `decoded` turns whatever an API answered (WAV, MP3, Opus ...)
into samples, so every backend's speech is encoded the same way.

PyAV (libav's codecs, installed with faster-whisper) does the work; everything here is CPU
and blocking, so callers run it on the speech worker thread.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RATE = 48_000  # Opus works at 48 kHz; Telegram's own voice notes are 48 kHz mono
BITRATE = 32_000  # clear speech, about 240 kB for two minutes
WAVEFORM_POINTS = 256
WAVEFORM_STEP_SECONDS = 0.1
MAX_DECODED_SECONDS = 1800.0  # an API answer longer than this is not speech for one reply

Samples = npt.NDArray[np.float32]


class AudioUnreadable(Exception):
    """The bytes are not audio that can be decoded; `str()` says why."""


@dataclass(frozen=True, slots=True)
class VoiceNote:
    """A reply read aloud, ready to send. `seconds` is measured from the samples encoded;
    `waveform` is Discord's (bytes 0-255); `billed_characters` is what an API backend was
    paid to say (0 for a local voice), for usage and budgets; `synthesis_seconds` is the time
    the backend took, encoding included."""

    ogg: bytes
    seconds: float
    waveform: bytes
    text: str
    billed_characters: int = 0
    synthesis_seconds: float = 0.0

    mime = "audio/ogg"
    filename = "voice-message.ogg"

    @property
    def waveform_base64(self) -> str:
        return base64.b64encode(self.waveform).decode("ascii")


def encode(samples: Samples, rate: int) -> tuple[bytes, float]:
    """Mono float samples in [-1, 1] at `rate` as an Ogg Opus file, and its length in
    seconds (the samples', which the container also declares)."""
    import av

    mono = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    out = io.BytesIO()
    with av.open(out, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=RATE, options={"application": "voip"})
        stream.bit_rate = BITRATE
        stream.layout = "mono"
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        block = max(1, rate)  # a second at a time keeps the frames small
        for start in range(0, len(mono), block):
            frame = av.AudioFrame.from_ndarray(
                mono[None, start : start + block], format="flt", layout="mono"
            )
            frame.sample_rate = rate
            for resampled in resampler.resample(frame):
                for packet in stream.encode(resampled):
                    container.mux(packet)
        for resampled in resampler.resample(None):
            for packet in stream.encode(resampled):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue(), len(mono) / rate if rate > 0 else 0.0


def decoded(data: bytes) -> Samples:
    """Any audio PyAV reads, as mono float samples at 48 kHz. Raises `AudioUnreadable`."""
    import av

    parts: list[Samples] = []
    total = 0
    try:
        with av.open(io.BytesIO(data), "r") as container:
            if not container.streams.audio:
                raise AudioUnreadable("the answer has no audio in it")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
            for frame in container.decode(audio=0):
                for resampled in resampler.resample(frame):
                    chunk = resampled.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                    parts.append(chunk)
                    total += len(chunk)
                    if total > MAX_DECODED_SECONDS * RATE:
                        raise AudioUnreadable("the answer is longer than any reply")
            for resampled in resampler.resample(None):
                parts.append(resampled.to_ndarray().reshape(-1).astype(np.float32, copy=False))
    except AudioUnreadable:
        raise
    except Exception as exc:  # PyAV's errors (InvalidDataError, ...) share no useful base
        raise AudioUnreadable(
            f"the answer is not audio that can be decoded ({type(exc).__name__})"
        ) from exc
    if not parts:
        raise AudioUnreadable("the answer holds no sound")
    return np.concatenate(parts)


def waveform(samples: Samples, rate: int) -> bytes:
    """Loudness over time as Discord draws it: one point per 100 ms (at most 256 points,
    spread over the whole note), each the RMS of its stretch scaled so the loudest is 255."""
    mono = np.asarray(samples, dtype=np.float32).reshape(-1)
    if len(mono) == 0 or rate <= 0:
        return b""
    points = int(min(WAVEFORM_POINTS, max(1, np.ceil(len(mono) / (rate * WAVEFORM_STEP_SECONDS)))))
    edges = np.linspace(0, len(mono), points + 1).astype(np.int64)
    squares = np.concatenate([[0.0], np.cumsum(mono.astype(np.float64) ** 2)])
    widths = np.maximum(edges[1:] - edges[:-1], 1)
    rms = np.sqrt((squares[edges[1:]] - squares[edges[:-1]]) / widths)
    peak = float(rms.max())
    if peak <= 1e-9:
        return bytes(points)
    return bytes(np.clip(np.round(rms / peak * 255), 0, 255).astype(np.uint8).tolist())


def voice_note(
    samples: Samples,
    rate: int,
    text: str,
    *,
    billed_characters: int = 0,
    synthesis_seconds: float = 0.0,
) -> VoiceNote:
    """`samples` encoded, measured and drawn: what a backend hands back."""
    ogg, seconds = encode(samples, rate)
    return VoiceNote(
        ogg, seconds, waveform(samples, rate), text, billed_characters, synthesis_seconds
    )
