"""A voice note waiting in the outbox: an Ogg Opus file and what the platforms ask about it.

A spoken reply goes out through the outbox like a file (`OutboundMessage.file`), so it is
durable, ordered and sent once. The outbox row holds only a path, so what Telegram and Discord
want to know besides the audio (its length, and Discord's waveform) lies beside it, in a small
JSON file of the same name: `<name>.voice.ogg` and `<name>.voice.json`. Both were measured from
the samples when the voice note was made (gateway/agent/media/voice_note.py), so a restart sends
the same voice note with the same figures, and a channel never decodes audio to learn them.

The gateway writes both files (atomically, before the outbox row that names them) and removes
them once the row is finished; channels only read them here.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".voice.ogg"
META_SUFFIX = ".voice.json"
MIME = "audio/ogg"
MAX_META_BYTES = 4096  # seconds and at most 256 waveform points: a few hundred bytes
MAX_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class VoiceClip:
    """A voice note to send: the Ogg Opus file, its length, and Discord's waveform (bytes
    0-255, base64; empty when unknown)."""

    path: Path
    seconds: float
    waveform: str

    @property
    def whole_seconds(self) -> int:
        """What Telegram's `duration` takes: whole seconds, at least 1."""
        return max(1, math.ceil(self.seconds - 1e-6))


def is_voice(path: str | Path) -> bool:
    """Whether an outbox file is a voice note (by its name: gateway-made, never a person's)."""
    return str(path).endswith(SUFFIX)


def paths(directory: Path, name: str) -> tuple[Path, Path]:
    """The voice note's audio file and its figures, for a name without suffix."""
    return directory / f"{name}{SUFFIX}", directory / f"{name}{META_SUFFIX}"


def meta_of(path: Path) -> Path:
    return path.with_name(path.name.removesuffix(SUFFIX) + META_SUFFIX)


def meta_bytes(seconds: float, waveform: str) -> bytes:
    """The figures file's content."""
    return json.dumps({"seconds": round(float(seconds), 3), "waveform": waveform}).encode()


def read_clip(path: Path) -> VoiceClip | None:
    """The voice note at `path` with its figures, or None when the figures are missing or
    unreadable (the channel then sends the audio as a plain file: nothing is lost)."""
    try:
        with open(meta_of(path), "rb") as handle:
            raw = handle.read(MAX_META_BYTES + 1)
        if len(raw) > MAX_META_BYTES:
            return None
        data = json.loads(raw)
        seconds = float(data["seconds"])
        waveform = str(data.get("waveform") or "")
        base64.b64decode(waveform, validate=True)
    except (OSError, ValueError, KeyError, TypeError, binascii.Error):
        return None
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_SECONDS:
        return None
    return VoiceClip(path, seconds, waveform)


def discard(path: Path) -> None:
    """Remove a voice note and its figures (sent, or given up on)."""
    for item in (path, meta_of(path)):
        with contextlib.suppress(OSError):
            item.unlink(missing_ok=True)
