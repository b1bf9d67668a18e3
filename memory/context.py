"""What a chunk is embedded with besides its text: the note's date and who is speaking.

A chunk cut from the middle of a conversation says neither when it was said nor, in its
first lines, much about whom: "So I've been seeing someone new" is about a person and a time
the vector cannot see. Embedding `2026-03-14. Maya, Jonah:` in front of the text gives the
vector both (the stored text, the keyword index and the snippet stay the chunk's own text).
Chunks of undated files without speaker lines get no prefix.

Off by default (`RecallIndex(context=True)` turns it on): measured, top-5 on
bench/recall_long.py 57 -> 59%, but 96 -> 94% on bench/recall_dialogues.py and top-1 72 ->
68% on bench/recall.py, all within a few questions, while turning it on re-embeds every chunk.
"""

from __future__ import annotations

import re

from memory.sources import daily_note_date

__all__ = ["CONTEXT_VERSION", "chunk_context", "embedding_text"]

CONTEXT_VERSION = 1  # part of the index configuration: a change re-embeds (new cache keys)
MAX_SPEAKERS = 3
# "- Maya: text", "Maya: text", "User: text" (transcripts): a short capitalized name, a colon.
_SPEAKER = re.compile(r"^(?:[-*] )?([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}): \S", re.MULTILINE)


def chunk_context(rel: str, text: str) -> str:
    """The prefix a chunk of `rel` is embedded with ("" when there is nothing to add)."""
    parts: list[str] = []
    day = daily_note_date(rel)
    if day is not None:
        parts.append(day.isoformat())
    speakers = list(dict.fromkeys(m.group(1) for m in _SPEAKER.finditer(text)))
    if speakers:
        parts.append(", ".join(speakers[:MAX_SPEAKERS]))
    return ". ".join(parts) + ":" if parts else ""


def embedding_text(rel: str, text: str) -> str:
    context = chunk_context(rel, text)
    return f"{context}\n{text}" if context else text
