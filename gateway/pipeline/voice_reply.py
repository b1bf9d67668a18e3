"""Replies read aloud: decide, speak, and leave the voice note where the outbox sends it from.

The turn runner asks `voice_note_for` once the reply's text is known. When the reply is to be
spoken (gateway/pipeline/voice_choice.py) and the chat's platform takes voice notes, the part
of the reply worth hearing (`speech_text.readout`: no code or tables, links by their host, at
most `max_seconds`) is spoken by the configured backend (gateway/agent/media/speech.py, on its
own speech thread, bounded by `timeout_seconds`) and written, with its length and waveform, as
`<state dir>/voice/<reply key>.voice.ogg` (channels/voice.py) before the outbox row that names
it is added. So the voice note is delivered like any reply: durable, in order, retried, and
once: a restart after the row was added sends the file from disk; a restart before it speaks
the reply again under the same name. The row's file is removed when the row is finished.

The text always goes too (the voice note's caption where it fits, else its own message):
nothing is only audible. Anything that goes wrong here (no usable backend, a failure, the
time limit, a budget cap, a voice note over the platform's size limit) leaves the reply as
text only, and the log says which setting to look at.

An API backend's characters are paid for: the call passes the person's budget check
(`Accounting.admit`, as a model call does) and is recorded in the usage ledger as kind
`speech`, model = the speech model, its characters counted as input tokens (and priced per
million characters, gateway/stores/prices.py). The local voice costs nothing and is not recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from channels import voice as clips
from channels.base import Channel, InboundMessage
from gateway.agent.conversation import Usage
from gateway.agent.media.speech_text import readout
from gateway.agent.providers.base import BudgetExceeded
from gateway.agent.scope import UsageScope
from gateway.config.media import SpeechSettings
from gateway.pipeline.budgets import Accounting
from gateway.pipeline.routing import Route
from gateway.pipeline.voice_choice import VoiceChoices, speaks
from memory.atomic import atomic_write_bytes, make_private_dirs

if TYPE_CHECKING:
    from gateway.agent.media.speech import Speaker
    from gateway.agent.media.voice_note import VoiceNote

log = logging.getLogger(__name__)

VOICE_DIR = "voice"
# Beyond the backend's own limit: the time to write the files (a slow disk must not hold the
# reply for ever either).
MARGIN_SECONDS = 10.0
# Voice notes left behind by a crash between their row being finished and their removal.
STALE_SECONDS = 24 * 3600.0

# Where a group sender's own choice is read: the workspace of the person behind an account.
PersonWorkspace = Callable[[str, str], Awaitable[Path | None]]
# The speech backend, made at the first reply to be spoken: numpy, PyAV and the voice's
# packages load then, never before the gateway's first poll (tests/gateway/assembly/
# test_startup_imports.py).
MakeSpeaker = Callable[[], "Speaker"]


class VoiceReplies:
    def __init__(
        self,
        settings: SpeechSettings,
        make_speaker: MakeSpeaker,
        directory: Path,
        *,
        accounting: Accounting | None = None,
        billed: bool = False,
        person_workspace: PersonWorkspace | None = None,
        margin_seconds: float = MARGIN_SECONDS,
    ) -> None:
        self.settings = settings
        self.make_speaker = make_speaker
        self._speaker: Speaker | None = None
        self.directory = directory
        self.accounting = accounting
        self.billed = billed  # an API backend: its characters cost money
        self.model = settings.model if billed else settings.backend
        self.choices = VoiceChoices(settings)
        self.person_workspace = person_workspace
        self.margin_seconds = margin_seconds
        self._unavailable_said = False

    async def wanted(self, route: Route, msg: InboundMessage, channel: Channel | None) -> bool:
        """Is this reply to be spoken? The backend, the platform, the chat, the person."""
        if not self.choices.available or channel is None or not channel.voice_notes:
            return False
        if route.private:
            return speaks(await self.choices.mode(route.workspace), msg)
        if not self.settings.groups:
            return False
        workspace = (
            await self.person_workspace(route.channel, route.sender_id)
            if self.person_workspace is not None
            else None
        )
        return speaks(await self.choices.mode(workspace), msg)

    async def voice_note_for(
        self, route: Route, msg: InboundMessage, reply: str, *, key: str, channel: Channel | None
    ) -> str:
        """The voice note of `reply` as a file the outbox can send ("" for text only)."""
        try:
            if not await self.wanted(route, msg, channel):
                return ""
        except Exception:  # a choice that cannot be read must not cost the reply
            log.exception("could not decide whether to speak the reply in %s", route.session_key)
            return ""
        assert channel is not None
        speaker = self.speaker
        said = readout(
            reply, max_seconds=self.settings.max_seconds, chars_per_second=speaker.chars_per_second
        )
        if not said.spoken.strip():
            log.info("nothing in the reply to read aloud (only code, tables, links ...)")
            return ""
        started = time.perf_counter()
        note = await self._speak(speaker, route, said.spoken)
        if note is None:
            return ""
        if len(note.ogg) > channel.max_upload_bytes:
            log.warning(
                "voice note of %.0f s is larger than %s takes (%d bytes); sending "
                "text only: lower `CLAWGATE_MEDIA__SPEECH__MAX_SECONDS`",
                note.seconds,
                route.channel,
                len(note.ogg),
            )
            return ""
        try:
            path = await asyncio.to_thread(self._save, note, key)
        except OSError as exc:
            log.warning("could not keep the voice note for the outbox (%s); sending text only", exc)
            return ""
        log.info(
            "voice reply of %.1f s made in %.2f s (%s)",
            note.seconds,
            time.perf_counter() - started,
            speaker.name,
        )
        return str(path)

    @property
    def speaker(self) -> Speaker:
        if self._speaker is None:
            self._speaker = self.make_speaker()
        return self._speaker

    async def _speak(self, speaker: Speaker, route: Route, text: str) -> VoiceNote | None:
        from gateway.agent.media.speech import SETTING, SpeechFailed, SpeechUnavailable

        limit = self.settings.timeout_seconds + self.margin_seconds
        scope = UsageScope(route.person_id, "speech", route.group)
        try:
            async with asyncio.timeout(limit):
                if not self.billed or self.accounting is None:
                    return await speaker.synthesize(text)
                async with self.accounting.admit(scope):
                    note = await speaker.synthesize(text)
                    await self.accounting.after_call(
                        scope, self.model, Usage(input_tokens=note.billed_characters)
                    )
                    return note
        except SpeechUnavailable as exc:
            if not self._unavailable_said:  # the same sentence for every reply otherwise
                self._unavailable_said = True
                log.warning("voice replies cannot work as configured: %s", exc)
        except SpeechFailed as exc:
            log.warning(
                "the reply could not be spoken (%s); sending text only (see "
                "`%s` and `CLAWGATE_MEDIA__SPEECH__TIMEOUT_SECONDS`)",
                exc,
                SETTING,
            )
        except BudgetExceeded:
            log.info("voice reply for %s skipped: a budget cap is reached", route.person_id)
        except TimeoutError:
            log.warning(
                "speaking the reply took longer than %.0f s; sending text only "
                "(`CLAWGATE_MEDIA__SPEECH__TIMEOUT_SECONDS`)",
                limit,
            )
        except Exception:
            log.exception("speaking the reply failed; sending text only")
        return None

    def _save(self, note: VoiceNote, key: str) -> Path:
        """Both files, durable, before the outbox row names them; the name follows the reply's
        key, so speaking it again after a restart replaces the same files."""
        make_private_dirs(self.directory)
        name = (
            hashlib.sha256(key.encode()).hexdigest()[:32]
            if key
            else f"once-{os.getpid()}-{time.monotonic_ns()}"
        )
        audio, meta = clips.paths(self.directory, name)
        atomic_write_bytes(audio, note.ogg)
        atomic_write_bytes(meta, clips.meta_bytes(note.seconds, note.waveform_base64))
        return audio

    def sweep(self, keep: Collection[str]) -> int:
        """Remove voice notes no pending outbox row names that are older than a day (a crash
        between a row's end and its file's removal); returns how many."""
        try:
            entries = list(self.directory.glob(f"*{clips.SUFFIX}"))
        except OSError:
            return 0
        removed = 0
        now = time.time()
        for path in entries:
            try:
                old = now - path.stat().st_mtime > STALE_SECONDS
            except OSError:
                continue
            if old and str(path) not in keep:
                clips.discard(path)
                removed += 1
        return removed

    async def close(self) -> None:
        if self._speaker is not None:
            await self._speaker.close()
