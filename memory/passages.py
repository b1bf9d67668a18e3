"""What a search result shows: the line that answers, with the lines around it.

A chunk is cut where its characters run out, not where a conversation's exchange ends, so the
line that answers often sits at a chunk's edge with the question it replies to in the chunk
before. A result whose best line is known (the line leg, `memory.lines`) therefore shows a
passage instead of its chunk: that line, then the lines after and before it taken in turn
(one after, one before, ...) from the same file while they fit in the snippet's budget, read
from whichever chunks hold them. Its `start_line`/`end_line` are the passage's, so what the
model reads and where it points agree. Measured on the LoCoMo development conversations
(bench/recall_locomo.py), the same top 5 chunks shown as passages of the same budget put the
answering line in front of the model more often (docs/memory.md, "Recall").

The line after goes first (`FIRST_SIDE`): in a conversation what follows a line is its
answer or its continuation, and the best line is often the question, not the reply. On the
LoCoMo development conversations the top-5 results' answering line lay just outside the
passage more often after it than before it (226 against 156 of those within 12 lines), and
growing after-first moved snip@5 / hit@1 from 0.878 / 0.633 to 0.884 / 0.645, lower in none
of the five conversations (docs/recall.md, round 4).
"""

from __future__ import annotations

from typing import Any

from memory.lines import split_numbers

__all__ = ["FIRST_SIDE", "Passage", "passage"]

Passage = tuple[int, int, str]  # first line, last line, text
# Which neighbour a passage takes first at each step ("after" or "before"; see above).
FIRST_SIDE = "after"


async def file_lines(db: Any, path: str, first: int, last: int) -> dict[int, str]:
    """The indexed text of the file's lines `first`..`last` by line number (a line cut in
    pieces by the chunker is joined again; overlap between chunks is read once)."""
    rows = await db.execute_fetchall(
        "SELECT text, lines FROM chunks WHERE path = ? AND end_line >= ? AND start_line <= ? "
        "ORDER BY start_line, id",
        (path, first, last),
    )
    pieces: dict[int, list[str]] = {}
    for text, numbers in rows:
        seen: dict[int, list[str]] = {}
        for number, piece in zip(split_numbers(numbers), str(text).split("\n"), strict=False):
            if first <= number <= last:
                seen.setdefault(number, []).append(piece)
        for number, parts in seen.items():
            if len(parts) > len(pieces.get(number, [])):  # the chunk holding more of it
                pieces[number] = parts
    return {number: " ".join(parts) for number, parts in pieces.items()}


async def passage(db: Any, path: str, line: int, budget: int, reach: int = 12) -> Passage | None:
    """The passage around `line` of `path` within `budget` characters, or None when the line
    alone does not fit (the caller then shows a window of its chunk)."""
    lines = await file_lines(db, path, line - reach, line + reach)
    if line not in lines or len(lines[line]) > budget:
        return None
    first = last = line
    used = len(lines[line])
    before, after = line - 1, line + 1
    sides = ("after", "before") if FIRST_SIDE == "after" else ("before", "after")
    while True:
        grew = False
        for side in sides:
            number = before if side == "before" else after
            # Blank lines are not indexed: step over the gap to the next indexed line.
            while number in range(line - reach, line + reach + 1) and number not in lines:
                number += -1 if side == "before" else 1
            if number not in lines or used + 1 + len(lines[number]) > budget:
                continue
            used += 1 + len(lines[number])
            grew = True
            if side == "before":
                first, before = number, number - 1
            else:
                last, after = number, number + 1
        if not grew:
            break
    text = "\n".join(lines[n] for n in range(first, last + 1) if n in lines)
    return first, last, text
