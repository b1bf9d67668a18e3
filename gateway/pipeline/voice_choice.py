"""Whether a reply is spoken: the owner's setting, each person's `/voice` choice, the chat.

`[media.speech] reply` is the default for everyone: `mirror` (a voice note is answered with a
voice note), `always` or `never`. A person changes it for themselves with `/voice on` (always),
`/voice off` (never) or `/voice mirror`; `/voice` alone says what holds for them now. The choice
is kept in their own workspace (`.clawgate-voice.json`, a dot-file no tool shows), so it lasts
across restarts and moves with the workspace in a backup. In a group chat a reply is spoken
only when the owner allows it (`[media.speech] groups`, off by default), and then as the
speaker's own choice says; a choice is made in a direct message, never in a group.

A missing or unreadable choice file means "no choice made": the owner's default holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Literal

from channels.base import InboundMessage
from gateway.config.media import SpeechSettings
from memory.atomic import atomic_write_text, read_bounded
from memory.layout import VOICE_FILE

log = logging.getLogger(__name__)

Choice = Literal["on", "off", "mirror"]
Mode = Literal["mirror", "always", "never"]
CHOICES: dict[str, Mode] = {"on": "always", "off": "never", "mirror": "mirror"}
_MAX_BYTES = 1024
_REMEMBERED = 4096  # people whose choice is kept in memory

USAGE = "Send /voice on, /voice off or /voice mirror (or /voice alone to see the setting)."
_SAID = {
    "always": "Voice replies: on. I answer every message with a voice note and its text.",
    "never": "Voice replies: off. I answer in text only.",
    "mirror": "Voice replies: mirror. I answer a voice note with a voice note and its text, "
    "and text with text.",
}


def read_choice(workspace: Path) -> Mode | None:
    """The person's own choice, or None when they made none (or it cannot be read)."""
    try:
        data = json.loads(read_bounded(workspace / VOICE_FILE, _MAX_BYTES))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring the voice choice in %s: %s", workspace.name, type(exc).__name__)
        return None
    mode = data.get("reply") if isinstance(data, dict) else None
    return mode if mode in ("mirror", "always", "never") else None


def write_choice(workspace: Path, mode: Mode) -> None:
    atomic_write_text(workspace / VOICE_FILE, json.dumps({"reply": mode}) + "\n")


def heard(msg: InboundMessage) -> bool:
    """Did the person speak (a voice note, an audio file, a video note)?"""
    return any(item.kind == "audio" for item in msg.attachments)


def speaks(mode: Mode, msg: InboundMessage) -> bool:
    return mode == "always" or (mode == "mirror" and heard(msg))


class VoiceChoices:
    """The owner's defaults and each person's choice, read where a reply is decided."""

    def __init__(self, settings: SpeechSettings) -> None:
        self.settings = settings
        # Asked for every reply: each choice file is read again only when it changed (a stat
        # on the event loop, no thread hop per message).
        # The key is (inode, mtime, size): each write replaces the file (a new inode), and file
        # times are coarse (two writes within a few ms share one).
        self._read: dict[Path, tuple[tuple[int, int, int], Mode | None]] = {}

    @property
    def available(self) -> bool:
        return self.settings.backend != "none"

    async def mode(self, workspace: Path | None) -> Mode:
        """What holds for the person whose workspace this is (None: someone without one)."""
        own = self._own(workspace) if workspace is not None else None
        return own or self.settings.reply

    def _own(self, workspace: Path) -> Mode | None:
        path = workspace / VOICE_FILE
        try:
            stat = os.stat(path)
        except OSError:
            self._read.pop(path, None)
            return None
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        seen = self._read.get(path)
        if seen is not None and seen[0] == key:
            return seen[1]
        mode = read_choice(workspace)  # at most 1 KB
        if len(self._read) >= _REMEMBERED:
            self._read.pop(next(iter(self._read)))
        self._read[path] = (key, mode)
        return mode

    async def command(self, workspace: Path, args: str, *, private: bool) -> str:
        """`/voice [on|off|mirror]` from the person whose workspace this is."""
        word = args.strip().lower()
        if not self.available:
            return (
                "Voice replies are switched off on this gateway (the owner sets "
                "`[media.speech] backend`)."
            )
        if not private:
            state = (
                "on here, as each person chose in a direct message with me"
                if self.settings.groups
                else "off in group chats (the owner decides)"
            )
            if word:
                return f"Voice replies are {state}. Change yours in a direct message with me."
            return f"Voice replies are {state}."
        if not word:
            own = await asyncio.to_thread(read_choice, workspace)
            said = _SAID[own or self.settings.reply]
            return said + ("" if own else " (the default)") + "\n" + USAGE
        mode = CHOICES.get(word)
        if mode is None:
            return f"I don't know /voice {args.strip()[:40]}. {USAGE}"
        await asyncio.to_thread(write_choice, workspace, mode)
        return _SAID[mode]
