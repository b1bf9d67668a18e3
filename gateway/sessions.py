"""Sessions: a transcript on disk plus the in-memory history and token accounting.

The transcript file is the truth; the in-memory copy is a cache that can be dropped at any
time (it is bounded, least recently used first) and rebuilt from disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.clock import Clock
from gateway.conversation import Message, Usage
from gateway.transcript import Transcript, entry_to_message, message_to_entry, repair_history
from gateway.workspace import SESSIONS_DIR

MAX_CACHED_SESSIONS = 512
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A rough count (4 characters a token) for what the provider has not measured yet."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def transcript_path(workspace: Path, key: str) -> Path:
    """`sessions/<readable key>-<hash>.jsonl`: readable for people, collision-free for keys."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", key).strip("_")[:60] or "session"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
    return workspace / SESSIONS_DIR / f"{readable}-{digest}.jsonl"


@dataclass
class Session:
    key: str
    workspace: Path
    transcript: Transcript
    clock: Clock
    history: list[Message] = field(default_factory=list)
    last_usage: Usage | None = None
    # Characters added to the history since the provider last reported usage.
    unmeasured_chars: int = 0

    def record(self, message: Message, *, usage: Usage | None = None, **extra: Any) -> None:
        """Append to the transcript first, then to the in-memory history."""
        entry = {"ts": self.clock.now().isoformat(), **message_to_entry(message), **extra}
        if usage is not None:
            entry["usage"] = usage.as_dict()
        self.transcript.append(entry)
        self.history.append(message)
        self._account(message, usage)

    def record_event(self, event_type: str, **fields: Any) -> None:
        """A bookkeeping line (an error shown to the person, say) that is not model history."""
        self.transcript.append({"ts": self.clock.now().isoformat(), **fields, "type": event_type})

    def context_tokens(self) -> int:
        """Provider-reported size of the last request plus an estimate for what came after."""
        measured = 0
        if self.last_usage is not None:
            measured = self.last_usage.context_tokens
        return measured + math.ceil(self.unmeasured_chars / CHARS_PER_TOKEN)

    def _account(self, message: Message, usage: Usage | None) -> None:
        if usage is not None and usage.context_tokens:
            self.last_usage = usage
            self.unmeasured_chars = 0
            return
        self.unmeasured_chars += len(message.text) + sum(
            len(call.name) + len(str(call.arguments)) for call in message.tool_calls
        )


class SessionStore:
    """Opens sessions by (workspace, key), loading transcripts off the event loop."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._open: OrderedDict[tuple[Path, str], Session] = OrderedDict()

    async def get(self, workspace: Path, key: str) -> Session:
        cache_key = (workspace, key)
        session = self._open.get(cache_key)
        if session is None:
            session = await asyncio.to_thread(self._load, workspace, key)
            self._open[cache_key] = session
            while len(self._open) > MAX_CACHED_SESSIONS:
                self._open.popitem(last=False)
        self._open.move_to_end(cache_key)
        return session

    def _load(self, workspace: Path, key: str) -> Session:
        transcript = Transcript(transcript_path(workspace, key))
        session = Session(key, workspace, transcript, self._clock)
        messages: list[Message] = []
        for entry in transcript.load():
            message = entry_to_message(entry)
            if message is None:
                continue
            messages.append(message)
            usage = entry.get("usage")
            measured = Usage(**usage) if isinstance(usage, dict) else None
            session._account(message, measured)
        session.history = repair_history(messages)
        if not transcript.path.exists():
            session.record_event("session", key=key)
        return session

    def reset(self, workspace: Path, key: str) -> Path | None:
        """Start a fresh session; the old transcript is kept beside it under a dated name."""
        self._open.pop((workspace, key), None)
        current = transcript_path(workspace, key)
        if not current.exists():
            return None
        stamp = self._clock.now().strftime("%Y%m%dT%H%M%S%fZ")
        archived = current.with_name(f"{current.stem}.{stamp}.jsonl")
        current.rename(archived)
        return archived
