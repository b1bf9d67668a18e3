"""Split a long reply into messages a platform accepts, without breaking code blocks.

Limits differ in unit: Telegram counts UTF-16 code units (4096), Discord characters (2000).
A cut prefers a paragraph break, then a line break, then a space, and only then a hard cut.
A cut inside a fenced code block closes the fence at the end of one chunk and reopens it
(with its language) at the start of the next, so every chunk renders on its own.

Each chunk is an exact slice of the reply (`body`) plus the fence lines added around it, so
`"".join(c.body for c in chunks) == reply` always: nothing is lost or invented.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Literal

Units = Literal["chars", "utf16"]

TELEGRAM_LIMIT = 4096
DISCORD_LIMIT = 2000

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$")
_FENCE_START = re.compile(r" {0,3}(`{3}|~{3})")


@dataclass(frozen=True, slots=True)
class MessagePart:
    """One platform message cut from a long reply (not a recall chunk: memory/chunking.py)."""

    body: str  # an exact slice of the original text
    reopen: str = ""  # a fence line re-opened before the body, e.g. "```python\n"
    close: str = ""  # a fence closed after the body, e.g. "\n```"

    @property
    def text(self) -> str:
        return self.reopen + self.body + self.close


@dataclass(frozen=True, slots=True)
class _Fence:
    open_start: int  # the opening line
    open_end: int  # just after the opening line's newline: the code starts here
    close_start: int  # the closing line (len(text) if the fence never closes)
    close_end: int
    opener: str  # the opening line, e.g. "```python"
    marker: str  # "```" or "~~~~"


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def measure(text: str, units: Units) -> int:
    return utf16_len(text) if units == "utf16" else len(text)


def fences(text: str) -> list[_Fence]:
    """The fenced code blocks of a Markdown text, by offsets."""
    found: list[_Fence] = []
    pos = 0
    current: tuple[int, int, str, str] | None = None  # open_start, open_end, opener, marker
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line)
        pos = end
        match = _FENCE.match(line.rstrip("\r\n"))
        if match is None:
            continue
        marker = match.group(1)
        if current is None:
            if marker[0] == "`" and "`" in match.group(2):
                continue  # "```code```" on one line is inline code, not a fence
            current = (start, end, line.strip(), marker)
        elif (
            marker[0] == current[3][0]
            and len(marker) >= len(current[3])
            and not match.group(2).strip()
        ):
            found.append(_Fence(current[0], current[1], start, end, current[2], current[3]))
            current = None
    if current is not None:
        found.append(_Fence(current[0], current[1], len(text), len(text), current[2], current[3]))
    return found


def _inside(cut: int, blocks: list[_Fence]) -> _Fence | None:
    """The block whose code a cut at `cut` falls in (a cut on the closing line counts)."""
    for block in blocks:
        if block.open_end <= cut <= block.close_start:
            return block
    return None


def _on_fence_line(cut: int, blocks: list[_Fence]) -> int | None:
    """If `cut` is strictly inside a fence line, the start of that line."""
    for block in blocks:
        if block.open_start < cut < block.open_end:
            return block.open_start
        if block.close_start < cut < block.close_end:
            return block.close_start
    return None


def split_chunks(text: str, limit: int, units: Units = "chars") -> list[MessagePart]:
    """Split `text` into chunks whose `.text` measures at most `limit` in `units`."""
    if limit < 32:
        raise ValueError("limit too small to split messages sensibly")
    if measure(text, units) <= limit:
        return [MessagePart(text)] if text else []
    blocks = fences(text)
    widest_close = max((measure("\n" + b.marker, units) for b in blocks), default=0)
    prefix = [0]
    for char in text:
        prefix.append(prefix[-1] + (2 if units == "utf16" and ord(char) > 0xFFFF else 1))
    chunks: list[MessagePart] = []
    start = 0
    reopen = ""
    while start < len(text):
        if measure(reopen, units) > limit // 4:
            reopen = (_inside(start, blocks) or blocks[0]).marker + "\n"
        if prefix[-1] - prefix[start] + measure(reopen, units) <= limit:
            end = len(text)
        else:
            budget = limit - measure(reopen, units) - widest_close
            max_end = bisect.bisect_right(prefix, prefix[start] + budget) - 1
            end = _choose_cut(text, start, max(max_end, start + 1), blocks)
        block = _inside(end, blocks) if end < len(text) else None
        body = text[start:end]
        close = ""
        if block is not None:
            close = ("" if body.endswith("\n") else "\n") + block.marker
        chunks.append(MessagePart(body, reopen, close))
        reopen = block.opener + "\n" if block is not None else ""
        start = end
    return chunks


def _choose_cut(text: str, start: int, max_end: int, blocks: list[_Fence]) -> int:
    window = text[start:max_end]
    half = len(window) // 2
    candidates: list[int] = []
    for separator, min_offset in (("\n\n", half), ("\n", half), (" ", half), ("\n", 0), (" ", 0)):
        index = window.rfind(separator)
        if index >= 0 and index + len(separator) > min_offset:
            candidates.append(start + index + len(separator))
            break
    end = candidates[0] if candidates else max_end
    fence_line = _on_fence_line(end, blocks)
    if fence_line is not None and fence_line > start:
        end = fence_line
    # "text ```python" mid-line is no fence; cut before it and the next chunk would start
    # with one. Step back until the next chunk starts with something harmless.
    while end > start + 1 and text[end - 1] != "\n" and _FENCE_START.match(text, end):
        end -= 1
    return end


def split_text(text: str, limit: int, units: Units = "chars") -> list[str]:
    """The chunks as the strings to send."""
    return [chunk.text for chunk in split_chunks(text, limit, units)]
