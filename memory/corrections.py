"""Corrections: find a fact across the memory files and replace, strike or delete its line.

"That's wrong, I moved to Berlin" has to change every place that still says Munich, or the
old fact keeps coming back. The memory files are MEMORY.md, USER.md and the notes under
memory/ (the files recall indexes besides transcripts, which are history and never edited).
A struck line keeps the old fact visible as superseded, with the date and a reason:

    - ~~Alice lives in Munich~~ (superseded 2025-06-20: moved to Berlin)

and the recall index leaves struck lines out (`is_struck`, used by memory.chunking), so a
search never offers the old fact as current; the prompt still shows it, marked. The
functions here are pure text operations plus the file walk: the model's tools
(gateway/agent/tools/corrections.py: path confinement, quotas, atomic writes) and the
command line (`clawgate memory find` / `correct`) share them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memory.layout import MEMORY_DIR, MEMORY_FILE, USER_FILE

__all__ = [
    "Action",
    "CorrectionError",
    "Found",
    "correct_text",
    "corrected_line",
    "find_in_files",
    "is_struck",
    "memory_file_paths",
    "strike",
    "written_lines",
]

Action = Literal["replace", "strike", "delete"]
ACTIONS: tuple[Action, ...] = ("replace", "strike", "delete")
# A list marker or nothing, then the struck text: the whole fact is crossed out.
_STRUCK = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\[[ xX]\]\s+)?~~\S.*?~~")
_MARKER = re.compile(r"^(\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\[[ xX]\]\s+)?)(.*)$")
MAX_FILE_BYTES = 2 * 1024 * 1024  # a memory file larger than this is skipped by find
MAX_FOUND = 50


class CorrectionError(ValueError):
    """The correction cannot be made as asked (nothing written); the message says why."""


@dataclass(frozen=True, slots=True)
class Found:
    path: str  # workspace-relative, '/' separators
    line: int  # 1-based
    text: str
    struck: bool


def is_struck(line: str) -> bool:
    """A line whose fact is crossed out (`- ~~old fact~~ (superseded ...)`)."""
    return bool(_STRUCK.match(line))


def strike(line: str, when: str, reason: str = "") -> str:
    """The line crossed out, keeping its list marker, with the date and the reason."""
    marker, body = _MARKER.match(line.rstrip("\n")).groups()  # type: ignore[union-attr]
    body = body.strip().replace("~~", "")
    why = " ".join(reason.split())
    note = f"superseded {when}: {why}" if why else f"superseded {when}"
    return f"{marker}~~{body}~~ ({note})"


def memory_file_paths(workspace: Path) -> list[str]:
    """MEMORY.md, USER.md and memory/**/*.md that exist, as relative paths (in that order,
    newest notes first); never through a symlink or into a dot-directory."""
    root = Path(os.path.realpath(workspace))
    found = [
        name
        for name in (MEMORY_FILE, USER_FILE)
        if (root / name).is_file() and not (root / name).is_symlink()
    ]
    notes = root / MEMORY_DIR
    notes_found: list[str] = []
    if notes.is_dir() and not notes.is_symlink():
        for folder, dirs, files in os.walk(notes):
            dirs[:] = sorted(
                d for d in dirs if not d.startswith(".") and not (Path(folder) / d).is_symlink()
            )
            for name in sorted(files):
                path = Path(folder) / name
                if name.endswith(".md") and not name.startswith(".") and not path.is_symlink():
                    notes_found.append(path.relative_to(root).as_posix())
    return found + sorted(notes_found, reverse=True)  # the newest dated notes first


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.casefold()) if w]


def find_in_files(
    workspace: Path, query: str, *, limit: int = MAX_FOUND, include_struck: bool = True
) -> list[Found]:
    """Lines of the memory files holding every word of `query` (any order, any case), or
    the query as it is; newest notes first after MEMORY.md and USER.md."""
    wanted = _words(query)
    exact = query.strip().casefold()
    if not wanted and not exact:
        raise CorrectionError("say what to look for")
    root = Path(os.path.realpath(workspace))
    paths = memory_file_paths(root)
    found: list[Found] = []
    for rel in paths:
        path = root / rel
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            folded = line.casefold()
            if (exact and exact in folded) or (
                wanted and all(w in set(_words(line)) for w in wanted)
            ):
                struck = is_struck(line)
                if struck and not include_struck:
                    continue
                found.append(Found(rel, number, line, struck))
                if len(found) >= limit:
                    return found
    return found


def correct_text(
    text: str,
    old_text: str,
    action: Action,
    *,
    new_text: str = "",
    line: int | None = None,
    when: str,
    reason: str = "",
) -> tuple[str, int]:
    """The file's text after the correction, and the line number it changed.

    `old_text` must appear in exactly one line (or in line `line`, when given): quoting what
    is changed means a stale line number can never change the wrong line.
    """
    if action not in ACTIONS:
        raise CorrectionError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    needle = old_text.strip()
    if not needle:
        raise CorrectionError("old_text must quote the line to change")
    if "\n" in needle:
        raise CorrectionError("old_text must be within one line; correct one line at a time")
    replacement = new_text.strip("\n")
    if action == "replace" and not replacement.strip():
        raise CorrectionError("replace needs new_text (use delete to remove the line)")
    lines = text.split("\n")
    matches = [i for i, candidate in enumerate(lines) if needle in candidate]
    if line is not None:
        if not 1 <= line <= len(lines) or needle not in lines[line - 1]:
            raise CorrectionError(
                f"line {line} does not contain old_text"
                + (f"; it is on line(s) {_numbers(matches)}" if matches else "")
            )
        index = line - 1
    elif not matches:
        raise CorrectionError("old_text is not in the file; find the line with memory_find")
    elif len(matches) > 1:
        raise CorrectionError(
            f"old_text is on {len(matches)} lines ({_numbers(matches)}); "
            "quote more of the line, or give its line number"
        )
    else:
        index = matches[0]
    target = lines[index]
    if action == "strike" and is_struck(target):
        raise CorrectionError("that line is already struck")
    corrected = corrected_line(target, needle, replacement) if replacement.strip() else ""
    if action == "replace":
        new_lines = [corrected]
    elif action == "strike":
        new_lines = [strike(target, when, reason)]
        if corrected:
            new_lines.append(corrected)
    else:
        new_lines = []
    return "\n".join([*lines[:index], *new_lines, *lines[index + 1 :]]), index + 1


def written_lines(text: str, changed: int, action: Action, new_text: str = "") -> list[str]:
    """The lines a correction left at line `changed` of its result `text` (none for a
    delete): what the person is shown, so they see the fact as it now reads."""
    count = {"delete": 0, "replace": 1}.get(action, 1 + bool(new_text.strip()))
    return text.split("\n")[changed - 1 : changed - 1 + count]


def corrected_line(line: str, needle: str, replacement: str) -> str:
    """`line` with the quoted `needle` replaced by `replacement`, the rest kept:
    "- Alex takes genmaicha tea, no sugar" with "genmaicha tea, no sugar" -> "sencha tea,
    one sugar" is "- Alex takes sencha tea, one sugar" (the subject is not lost).

    A replacement that already holds the line's other words (the whole corrected line, as
    a model often writes it) takes the line's place, keeping its list marker."""
    marker, body = _MARKER.match(line).groups()  # type: ignore[union-attr]
    new = replacement.strip()
    new_marker, new_body = _MARKER.match(new).groups()  # type: ignore[union-attr]
    at = body.find(needle)
    if at < 0:  # the quote spans the list marker: the whole line is what was quoted
        return new if new_marker else f"{marker}{new}"
    before, after = body[:at].strip(), body[at + len(needle) :].strip()
    whole = (before or after) and new_body.startswith(before) and new_body.endswith(after)
    if whole or not (before or after):
        return new if new_marker else f"{marker}{new}"
    return f"{marker}{body[:at]}{new}{body[at + len(needle) :]}"


def _numbers(indexes: list[int]) -> str:
    shown = ", ".join(str(i + 1) for i in indexes[:10])
    return shown + (", ..." if len(indexes) > 10 else "")
