"""Split memory files into chunks that keep their path and 1-based line range.

Markdown is cut along lines: a chunk grows line by line up to `max_chars`, prefers to start a
new chunk at a heading, and repeats the previous chunk's last `overlap_lines` lines so a fact
that straddles a boundary is whole in at least one chunk. A single line longer than
`max_chars` is split into pieces that all carry that line's number.

A transcript (`sessions/*.jsonl`) contributes only its user and assistant text; each dialogue
entry is one "line" numbered by its line in the JSONL file, so a result points at the real
line a person can open.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from memory.corrections import is_struck

__all__ = ["Chunk", "Line", "chunk_lines", "markdown_lines", "transcript_key", "transcript_lines"]

DIALOGUE_TYPES = {"user": "User", "assistant": "Assistant"}


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based line in the file
    text: str


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    # The file line number of each line of `text` (a long line cut in pieces repeats its
    # number): where a line-level hit points.
    numbers: tuple[int, ...] = ()


def markdown_lines(text: str) -> list[Line]:
    """The file's lines; a struck line (a superseded fact, memory.corrections) is left
    blank, so recall never offers it as current."""
    return [
        Line(number, "" if is_struck(line) else line)
        for number, line in enumerate(text.splitlines(), start=1)
    ]


def transcript_key(first_line: str) -> str | None:
    """The session key from a transcript's first line, or None if it is not a session header."""
    try:
        entry = json.loads(first_line)
    except (ValueError, RecursionError):  # hand-edited lines: skipped
        return None
    if isinstance(entry, dict) and entry.get("type") == "session":
        key = entry.get("key")
        return key if isinstance(key, str) else None
    return None


def transcript_lines(text: str) -> list[Line]:
    """User and assistant text of a JSONL transcript, one Line per entry; torn lines skipped."""
    lines: list[Line] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if '"type"' not in raw:
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # hand-edited lines: skipped
            continue
        if not isinstance(entry, dict):
            continue
        role = DIALOGUE_TYPES.get(str(entry.get("type")))
        body = entry.get("text")
        if role and isinstance(body, str) and body.strip():
            lines.append(Line(number, f"{role}: {' '.join(body.split())}"))
    return lines


def _is_heading(text: str) -> bool:
    return text.startswith("#") and text.lstrip("#").startswith(" ")


def _pieces(lines: Iterable[Line], max_chars: int) -> Iterator[Line]:
    """Lines, with any line longer than max_chars cut into pieces (same line number)."""
    for line in lines:
        text = line.text.rstrip()
        if not text.strip():
            yield Line(line.number, "")
            continue
        while len(text) > max_chars:
            cut = text.rfind(" ", max_chars // 2, max_chars)
            cut = cut if cut > 0 else max_chars
            yield Line(line.number, text[:cut])
            text = text[cut:].lstrip()
        yield Line(line.number, text)


def chunk_lines(lines: Iterable[Line], max_chars: int, overlap_lines: int = 1) -> list[Chunk]:
    """Group lines into chunks of at most about `max_chars` characters."""
    chunks: list[Chunk] = []
    current: list[Line] = []
    size = 0
    fresh = 0  # lines in `current` that are not overlap from the previous chunk

    def flush() -> None:
        nonlocal current, size, fresh
        body = [line for line in current if line.text.strip()]
        if body and fresh:
            text = "\n".join(line.text for line in body)
            chunks.append(
                Chunk(body[0].number, body[-1].number, text, tuple(line.number for line in body))
            )
        keep = (
            [line for line in current if line.text.strip()][-overlap_lines:]
            if (overlap_lines > 0)
            else []
        )
        # Never carry overlap across a heading boundary or larger than half a chunk.
        keep = keep if sum(len(x.text) + 1 for x in keep) <= max_chars // 2 else []
        current, size, fresh = list(keep), sum(len(x.text) + 1 for x in keep), 0

    for line in _pieces(lines, max_chars):
        starts_section = _is_heading(line.text) and size >= max_chars // 3
        if current and fresh and (size + len(line.text) + 1 > max_chars or starts_section):
            flush()
            if starts_section:
                current, size = [], 0
        if not line.text and not current:
            continue
        current.append(line)
        size += len(line.text) + 1
        fresh += 1
    if fresh:
        flush()
    return chunks
