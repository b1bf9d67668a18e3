"""Loading the workspace's bootstrap files for the prompt, under per-file and total budgets.

Files are re-read every turn because the person edits them by hand; a stat signature check
(mtime, size, inode) lets an unchanged file skip the decode without ever serving stale text.
Which files a context loads, and which it may read at all, is asked of `memory.layout` (the
one place that knows the access rule): a group session never even opens a private file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

from memory.layout import PRIVATE, Access, prompt_files, read_refusal, strip_comments

# Past this size only the head and tail bytes are read: nobody should pay for decoding a
# 50 MB file every turn just to keep 20,000 characters of it.
MAX_FULL_READ_BYTES = 4 * 1024 * 1024
# A cached read is trusted only for files whose mtime is this much older than the moment we
# read them: file timestamps tick coarsely, so a same-size edit within one tick of our read
# would otherwise look unchanged (git calls this "racily clean").
RACY_WINDOW_NS = 2_000_000_000
# Below this many characters of remaining total budget a file is listed, not injected.
MIN_USEFUL_CHARS = 500

Status = Literal["loaded", "truncated", "missing", "unreadable", "withheld", "over_budget"]


@dataclass(frozen=True, slots=True)
class FileReport:
    name: str
    status: Status
    raw_chars: int = 0
    injected_chars: int = 0
    note: str = ""


@dataclass(frozen=True, slots=True)
class ContextFile:
    name: str
    text: str  # what goes into the prompt (possibly truncated); empty when not injected
    report: FileReport


@dataclass(frozen=True, slots=True)
class _Read:
    text: str | None
    raw_chars: int
    partial: bool
    error: str = ""


def context_file_names(today: date, access: Access = PRIVATE) -> list[str]:
    """The files `access` loads into its prompt, in injection order (`memory.layout`)."""
    return prompt_files(access, today)


class ContextFileLoader:
    """Reads a workspace's context files; one loader may serve many workspaces."""

    def __init__(self, file_max_chars: int, total_max_chars: int) -> None:
        self.file_max_chars = file_max_chars
        self.total_max_chars = total_max_chars
        self._cache: dict[Path, tuple[tuple[int, int, int], _Read]] = {}

    def load(
        self,
        workspace: Path,
        *,
        private: bool,
        today: date,
        names: Sequence[str] | None = None,
        area: str = "",
    ) -> list[ContextFile]:
        """The context files in injection order; `names` picks a subset (heartbeat turns).

        A name the context may not read is reported as withheld and never opened.
        """
        access = Access(private, "" if private else area)
        remaining = self.total_max_chars
        files: list[ContextFile] = []
        for name in context_file_names(today, access) if names is None else names:
            if read_refusal(access, name) is not None:
                files.append(ContextFile(name, "", FileReport(name, "withheld")))
                continue
            item = self._budgeted(name, self._read(workspace / name), remaining)
            remaining -= item.report.injected_chars
            files.append(item)
        return files

    def _budgeted(self, name: str, read: _Read, remaining: int) -> ContextFile:
        if read.text is None:
            status: Status = "missing" if read.error == "missing" else "unreadable"
            note = "" if status == "missing" else read.error
            return ContextFile(name, "", FileReport(name, status, note=note))
        budget = min(self.file_max_chars, remaining)
        if budget < MIN_USEFUL_CHARS and read.raw_chars > budget:
            note = "total prompt budget reached"
            return ContextFile(name, "", FileReport(name, "over_budget", read.raw_chars, 0, note))
        if read.raw_chars <= budget and not read.partial:
            report = FileReport(name, "loaded", read.raw_chars, read.raw_chars)
            return ContextFile(name, read.text, report)
        text = truncate_head_tail(read.text, read.raw_chars, budget, name)
        report = FileReport(name, "truncated", read.raw_chars, len(text))
        return ContextFile(name, text, report)

    def _read(self, path: Path) -> _Read:
        try:
            st = path.stat()
        except FileNotFoundError:
            self._cache.pop(path, None)
            return _Read(None, 0, False, "missing")
        except OSError as exc:
            return _Read(None, 0, False, f"cannot stat: {exc.strerror}")
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(path)
        if cached and cached[0] == signature:
            return cached[1]
        result = _read_text(path, st.st_size)
        if time.time_ns() - st.st_mtime_ns > RACY_WINDOW_NS:
            self._cache[path] = (signature, result)
        else:
            self._cache.pop(path, None)
        return result


def _read_text(path: Path, size: int) -> _Read:
    if not path.is_file():
        return _Read(None, 0, False, "not a regular file")
    try:
        with open(path, "rb") as handle:
            if size <= MAX_FULL_READ_BYTES:
                data, partial = handle.read(), False
            else:
                head = handle.read(MAX_FULL_READ_BYTES // 2)
                handle.seek(-(MAX_FULL_READ_BYTES // 2), os.SEEK_END)
                data, partial = head + b"\n" + handle.read(), True
    except OSError as exc:
        return _Read(None, 0, False, f"cannot read: {exc.strerror}")
    if b"\x00" in data:
        return _Read(None, 0, False, "binary content, not text")
    try:
        text = data.decode("utf-8") if not partial else data.decode("utf-8", errors="replace")
    except UnicodeDecodeError:
        return _Read(None, 0, False, "not UTF-8 text")
    text = strip_comments(text)  # the human's notes about the file, as a viewer hides them
    raw_chars = len(text) if not partial else size
    return _Read(text, raw_chars, partial)


def truncate_head_tail(text: str, raw_chars: int, budget: int, name: str) -> str:
    """Fit `text` in `budget`: about 70% head and 20% tail, with a marker pointing at the file.

    The marker is counted inside the budget, so the total budget is a hard limit.
    """
    room = max(budget - len(_marker(name, raw_chars, raw_chars)), 0)
    head_len = min(budget * 7 // 10, room * 7 // 9)
    tail_len = min(budget * 2 // 10, room * 2 // 9)
    marker = _marker(name, max(raw_chars - head_len - tail_len, 0), raw_chars)
    tail = text[-tail_len:] if tail_len else ""
    return (text[:head_len] + marker + tail)[:budget]


def _marker(name: str, omitted: int, raw_chars: int) -> str:
    return (
        f"\n\n[... {omitted:,} characters of {name} omitted here ({raw_chars:,} in total). "
        f'Read the whole file with read_file(path="{name}") before relying on or editing '
        "this part. ...]\n\n"
    )
