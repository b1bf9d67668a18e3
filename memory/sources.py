"""What the recall index reads: the memory files and the owner's DM transcripts.

Sources: `MEMORY.md`, `USER.md`, `memory/**/*.md`, the text of documents the person sent in
their DMs (`inbox/**/*.md`: the extracted text saved beside each document; a group's inbox
lives in its own area and is never read), and `sessions/*.jsonl` whose first line names a DM
session key (`memory.layout.is_dm_session_key`; archived ones from /new included).
Every name comes from `memory.layout`. Hidden names and symlinks that lead outside the
workspace are skipped, as the file tools would refuse them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from memory.chunking import transcript_key
from memory.layout import INBOX_DIR, MEMORY_DIR, PRIVATE_FILES, SESSIONS_DIR, is_dm_session_key

__all__ = ["MEMORY_FILES", "SourceFile", "daily_note_date", "is_memory_path", "scan_sources"]

MEMORY_FILES = PRIVATE_FILES  # USER.md, MEMORY.md (memory.layout)
_DAILY = re.compile(r"^memory/(?:.*/)?(\d{4}-\d{2}-\d{2})[^/]*\.md$")


@dataclass(frozen=True, slots=True)
class SourceFile:
    rel: str  # workspace-relative POSIX path
    source: str  # "memory" | "sessions"
    mtime_ns: int
    size: int


def daily_note_date(rel: str) -> date | None:
    """The date of a dated daily note (`memory/2026-03-14.md`), else None."""
    match = _DAILY.match(rel)
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def is_memory_path(rel: str) -> bool:
    parts = rel.split("/")
    if any(p.startswith(".") or p in ("", "..") for p in parts):
        return False
    if len(parts) == 1:
        return parts[0] in MEMORY_FILES
    if parts[0] in (MEMORY_DIR, INBOX_DIR):
        return rel.endswith(".md")
    return parts[0] == SESSIONS_DIR and len(parts) == 2 and rel.endswith(".jsonl")


def _inside(root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return os.path.commonpath([root, real]) == root


def _entry(root: str, rel: str, path: str, source: str) -> SourceFile | None:
    try:
        if os.path.islink(path) and not _inside(root, path):
            return None
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return SourceFile(rel, source, st.st_mtime_ns, st.st_size)


def scan_sources(workspace: Path, *, sessions: bool = True) -> list[SourceFile]:
    """Every source file with its mtime and size; cheap (stat only), no content read."""
    root = os.path.realpath(workspace)
    found: list[SourceFile] = []
    for name in MEMORY_FILES:
        item = _entry(root, name, os.path.join(root, name), "memory")
        if item:
            found.append(item)
    for folder in (MEMORY_DIR, INBOX_DIR):
        found.extend(_markdown_under(root, folder))
    sessions_root = os.path.join(root, SESSIONS_DIR)
    if sessions and os.path.isdir(sessions_root):
        with os.scandir(sessions_root) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.startswith(".") or not entry.name.endswith(".jsonl"):
                    continue
                item = _entry(root, f"{SESSIONS_DIR}/{entry.name}", entry.path, "sessions")
                if item:
                    found.append(item)
    return found


def _markdown_under(root: str, folder: str) -> list[SourceFile]:
    """Every visible `*.md` below `root/folder`, as memory sources."""
    top = os.path.join(root, folder)
    if not os.path.isdir(top) or not _inside(root, top):
        return []
    found: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not name.endswith(".md"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            item = _entry(root, rel, path, "memory")
            if item:
                found.append(item)
    return found


def is_dm_transcript(text: str) -> bool:
    first = text.split("\n", 1)[0]
    key = transcript_key(first)
    return key is not None and is_dm_session_key(key)
