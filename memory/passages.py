"""What a search result shows: the line that answers, with the lines around it.

A chunk is cut where its characters run out, not where a conversation's exchange ends, so the
line that answers often sits at a chunk's edge with the question it replies to in the chunk
before. A result whose best line is known (the line leg, `memory.lines`) therefore shows a
passage instead of its chunk: that line, then the lines before and after it taken in turn
(one before, one after, ...) from the same file while they fit in the snippet's budget, read
from whichever chunks hold them. Its `start_line`/`end_line` are the passage's, so what the
model reads and where it points agree. Measured on the LoCoMo development conversations
(bench/recall_locomo.py), the same top 5 chunks shown as passages of the same budget put the
answering line in front of the model more often (README, "Recall").
"""

from __future__ import annotations

from typing import Any

from memory.lines import split_numbers

__all__ = ["Passage", "passages"]

Passage = tuple[int, int, str]  # first line, last line, text
REACH = 12  # lines looked at on each side of the best line


def _join_pieces(rows: list[tuple[Any, ...]], first: int, last: int) -> dict[int, str]:
    """Line number -> text for the lines `first`..`last` of (text, lines) chunk rows of one
    file: a line cut in pieces by the chunker is joined again; overlap is read once."""
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


def _grow(lines: dict[int, str], line: int, budget: int, reach: int) -> Passage | None:
    """The passage around `line` from the file's `lines`, or None when it alone is too long."""
    if line not in lines or len(lines[line]) > budget:
        return None
    first = last = line
    used = len(lines[line])
    before, after = line - 1, line + 1
    grew = True
    while grew:
        grew = False
        for step in (-1, 1):
            number = before if step < 0 else after
            # Blank lines are not indexed: step over the gap to the next indexed line.
            while abs(number - line) <= reach and number not in lines:
                number += step
            if number not in lines or used + 1 + len(lines[number]) > budget:
                continue
            used += 1 + len(lines[number])
            grew = True
            if step < 0:
                first, before = number, number - 1
            else:
                last, after = number, number + 1
    return first, last, "\n".join(lines[n] for n in range(first, last + 1) if n in lines)


async def passages(db: Any, wanted: list[tuple[str, int]], budget: int, reach: int = REACH
                   ) -> dict[tuple[str, int], Passage | None]:
    """The passage around each (path, line) within `budget` characters, None for a line that
    alone does not fit (the caller then shows a window of its chunk). One query for all."""
    wanted = list(dict.fromkeys(wanted))
    if not wanted:
        return {}
    rows = await db.execute_fetchall(
        "SELECT path, text, lines FROM chunks WHERE "
        + " OR ".join(["(path = ? AND end_line >= ? AND start_line <= ?)"] * len(wanted))
        + " ORDER BY path, start_line, id",
        [x for path, line in wanted for x in (path, line - reach, line + reach)])
    by_path: dict[str, list[tuple[Any, ...]]] = {}
    for path, text, numbers in rows:
        by_path.setdefault(path, []).append((text, numbers))
    return {(path, line): _grow(_join_pieces(by_path.get(path, []), line - reach,
                                             line + reach), line, budget, reach)
            for path, line in wanted}
