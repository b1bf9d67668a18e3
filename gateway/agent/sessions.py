"""Sessions: a transcript on disk plus the in-memory history and token accounting.

The transcript file is the truth; the in-memory copy is a cache that can be dropped at any
time (it is bounded, least recently used first) and rebuilt from disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.agent.conversation import Message, Usage
from gateway.agent.provenance import summarised_source
from gateway.agent.transcript import (
    Transcript,
    entry_to_message,
    message_to_entry,
    repair_history,
    untrusted_field,
)
from gateway.clock import Clock
from gateway.workspace.seed import SESSIONS_DIR

log = logging.getLogger(__name__)

MAX_CACHED_SESSIONS = 512
DROPPED_EVENT = "dropped"  # a message and its turn left out of the history (`drop_turn`)
CHARS_PER_TOKEN = 4
MAX_COUNT = 10**12  # tokens, characters, entry numbers: past this a transcript value is odd


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
    # The transcript entry number of each history message (-1: not from the transcript, e.g.
    # a compaction summary), so a compaction can name where the kept part starts on disk.
    entry_ids: list[int] = field(default_factory=list)
    entry_count: int = 0
    last_usage: Usage | None = None
    # Characters added to the history since the provider last reported usage.
    unmeasured_chars: int = 0
    compactions: int = 0
    flushed_cycle: int = -1  # the compaction cycle whose memory flush already ran
    # Model messages that called tools, ever: a turn that added none changed no file.
    tool_rounds: int = 0

    # The transcript entry of each person's message with a platform id (`drop_turn`).
    _user_entries: dict[str, int] = field(default_factory=dict)

    def record(self, message: Message, *, usage: Usage | None = None, **extra: Any) -> None:
        """Append to the transcript first, then to the in-memory history."""
        entry = {"ts": self.clock.now().isoformat(), **message_to_entry(message), **extra}
        if usage is not None:
            entry["usage"] = usage.as_dict()
        self.transcript.append(entry)
        if message.role == "user" and extra.get("message_id"):
            self._user_entries[str(extra["message_id"])] = self.entry_count
        self.history.append(message)
        self.entry_ids.append(self.entry_count)
        self.entry_count += 1
        if message.tool_calls:
            self.tool_rounds += 1
        self._account(message, usage)

    def record_event(self, event_type: str, **fields: Any) -> None:
        """A bookkeeping line (an error shown to the person, say) that is not model history."""
        self.transcript.append({"ts": self.clock.now().isoformat(), **fields, "type": event_type})
        self.entry_count += 1

    def drop_turn(self, message_id: str, **fields: Any) -> None:
        """Take a person's message, and what its turn recorded since, out of the history.

        For a message given up on (gateway/pipeline/recovery.py): kept in the history, a
        message that stops the gateway would be sent again with every later message. The
        transcript keeps every line; the `dropped` entry tells a reload to leave them out.
        """
        self.record_event(DROPPED_EVENT, message_id=message_id, **fields)
        self._apply_drop(self._user_entries.get(message_id))

    def _apply_drop(self, entry_id: int | None) -> None:
        if entry_id is None or entry_id not in self.entry_ids:
            return  # compacted away, or dropped already
        position = self.entry_ids.index(entry_id)
        # The token count is left as it was: too high until the next measured call (the safe
        # side of the compaction threshold).
        del self.history[position:], self.entry_ids[position:]

    def context_tokens(self) -> int:
        """Provider-reported size of the last request plus an estimate for what came after."""
        measured = 0
        if self.last_usage is not None:
            measured = self.last_usage.context_tokens
        return measured + math.ceil(self.unmeasured_chars / CHARS_PER_TOKEN)

    @property
    def flush_due(self) -> bool:
        return self.flushed_cycle != self.compactions

    def mark_flushed(self, **fields: Any) -> None:
        self.record_event("flush", cycle=self.compactions, **fields)
        self.flushed_cycle = self.compactions

    def compact(
        self, first_kept: int, summary: str | None, overhead_chars: int, **fields: Any
    ) -> None:
        """Replace history[:first_kept] by `summary` (or a drop marker), on disk and here.

        The transcript keeps every original line; the compaction entry only says where the
        kept part starts, so a reload rebuilds exactly this history. A summary of records
        that held outside text holds it too (`untrusted`, gateway/agent/provenance.py); a
        drop without a summary leaves nothing of them.
        """
        first_entry = (
            self.entry_ids[first_kept] if first_kept < len(self.entry_ids) else self.entry_count
        )
        untrusted = summarised_source(self.history[:first_kept]) if summary else ""
        self.record_event(
            "compaction",
            summary=summary,
            first_kept_entry=first_entry,
            overhead_chars=overhead_chars,
            **({"untrusted": untrusted} if untrusted else {}),
            **fields,
        )
        self._apply_compaction(first_kept, summary, overhead_chars, untrusted)

    def position_of_entry(self, first_entry: int) -> int:
        """History position of the first message at or after transcript entry `first_entry`."""
        for position, entry_id in enumerate(self.entry_ids):
            if entry_id >= first_entry:
                return position
        return len(self.history)

    def _apply_compaction(
        self, first_kept: int, summary: str | None, overhead_chars: int, untrusted: str = ""
    ) -> None:
        self.history = [compacted_marker(summary, untrusted), *self.history[first_kept:]]
        self.entry_ids = [-1, *self.entry_ids[first_kept:]]
        self.compactions += 1
        self.last_usage = None
        self.unmeasured_chars = overhead_chars + sum(_chars(m) for m in self.history)

    def _account(self, message: Message, usage: Usage | None) -> None:
        if usage is not None and usage.context_tokens:
            self.last_usage = usage
            self.unmeasured_chars = 0
            return
        self.unmeasured_chars += _chars(message)


SUMMARY_HEADER = "[Summary of the earlier part of this conversation, written at compaction]"
DROPPED_NOTE = (
    "[The earlier part of this conversation was dropped to fit the context window. It is still "
    "on disk in the session transcript; search it with memory tools if you need it.]"
)


def compacted_marker(summary: str | None, untrusted: str = "") -> Message:
    """The message that stands for everything before the kept part (`untrusted`: the
    outside source its summary was made from)."""
    if not summary:
        return Message("user", DROPPED_NOTE)
    return Message("user", f"{SUMMARY_HEADER}\n\n{summary}", untrusted=untrusted)


def is_compaction_marker(message: Message) -> bool:
    return message.role == "user" and (
        message.text.startswith(SUMMARY_HEADER) or message.text == DROPPED_NOTE
    )


# What an image in the history counts for until the provider measures it: about 1,600
# tokens, a resized photo's cost (bench/media.py), as characters.
IMAGE_CHARS = 1_600 * CHARS_PER_TOKEN


def _chars(message: Message) -> int:
    return (
        len(message.text)
        + len(message.images) * IMAGE_CHARS
        + sum(len(call.name) + len(str(call.arguments)) for call in message.tool_calls)
    )


def _usage_from(entry: dict[str, Any]) -> Usage | None:
    raw = entry.get("usage")
    if not isinstance(raw, dict):
        return None
    known = {name: _count(raw.get(name)) for name in Usage.__dataclass_fields__}
    return Usage(**known)


def _count(value: Any, limit: int = MAX_COUNT) -> int:
    """A non-negative whole number from a transcript field; anything else is refused."""
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ValueError(f"not a count: {type(value).__name__}")
    return value


def _replay(session: Session, number: int, entry: dict[str, Any]) -> None:
    """Apply transcript entry `number` to a session being loaded; raises ValueError (or
    TypeError) for an entry whose fields are not what the gateway writes."""
    message = entry_to_message(entry)
    if message is not None:
        usage = _usage_from(entry)
        session.history.append(message)
        session.entry_ids.append(number)
        session._account(message, usage)
        if message.role == "user" and entry.get("message_id"):
            session._user_entries[str(entry["message_id"])] = number
    elif entry.get("type") == DROPPED_EVENT:
        session._apply_drop(session._user_entries.get(str(entry.get("message_id"))))
    elif entry.get("type") == "compaction":
        summary = entry.get("summary")
        first_entry = _count(entry.get("first_kept_entry", session.entry_count))
        session._apply_compaction(
            session.position_of_entry(first_entry),
            summary if isinstance(summary, str) else None,
            _count(entry.get("overhead_chars", 0)),
            untrusted_field(entry),
        )
    elif entry.get("type") == "flush":
        cycle = entry.get("cycle", -1)
        session.flushed_cycle = -1 if cycle == -1 else _count(cycle)


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
        odd: list[int] = []
        for number, entry in enumerate(transcript.load()):
            session.entry_count = number + 1
            try:
                _replay(session, number, entry)
            except (ValueError, TypeError, OverflowError):  # a hand edit: skip that entry
                odd.append(number + 1)
        if odd:
            log.warning(
                "skipped %d entr%s of %s that the gateway did not write (the first: entry %d)",
                len(odd),
                "y" if len(odd) == 1 else "ies",
                transcript.path.name,
                odd[0],
            )
        session.history, session.entry_ids = repair_history(session.history, session.entry_ids)
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
