"""A commit's change as the panel shows it: the changed lines of each file, not git's output.

`git show` is written for git users: commit and index lines, `---`/`+++` headers, `@@` hunk
ranges, and "\\ No newline at end of file", which turns a fact that did not change (the last
line, once a line is added after it) into one removed and one added. The owner wants to see
which lines of MEMORY.md changed. So the diff is read into files and lines here: each line with
its number in the file, a removed/added/unchanged kind, gaps between hunks as "line N", and a
line removed and added again with the same text shown once, unchanged.

Everything here is text from the workspace (hostile): it is only split and compared, and the
template escapes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["DiffLine", "FileDiff", "read_diff"]

_FILE = re.compile(r'^diff --git "?a/(?P<a>.*?)"? "?b/(?P<b>.*?)"?$')
_HUNK = re.compile(r"^@@ -(?P<old>\d+)(?:,\d+)? \+(?P<new>\d+)(?:,\d+)? @@")
# Lines of git's own between a file's `diff --git` and its first hunk.
_META = (
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
)
MAX_LINES = 4_000  # a huge change is cut, with a note: the page stays light


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # "add", "del", "same" or "gap" (the text says where the next lines are)
    number: int | None  # its line in the file (the old file's for a removed line)
    text: str

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-"}.get(self.kind, " ")


@dataclass
class FileDiff:
    path: str
    status: str = "changed"  # "changed", "added", "deleted", "renamed"
    lines: list[DiffLine] = field(default_factory=list)
    binary: bool = False

    @property
    def changed(self) -> int:
        return sum(line.kind in ("add", "del") for line in self.lines)


def read_diff(text: str) -> list[FileDiff]:
    """The files of a unified git diff (the commit header before them is left out), each with
    its lines numbered; no-newline churn folded back into unchanged lines."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    ops: list[tuple[str, str]] = []
    start = (0, 0)
    budget = MAX_LINES

    def flush() -> None:
        nonlocal budget
        if current is not None and ops:
            numbered = _numbered(_fold(ops), *start)
            current.lines.extend(numbered[: max(0, budget)])
            if len(numbered) > budget:
                current.lines.append(
                    DiffLine("gap", None, "(the rest of the change is not shown: too long)")
                )
            budget -= len(numbered)
        ops.clear()

    for line in text.split("\n"):
        found = _FILE.match(line)
        if found:
            flush()
            current = FileDiff(found["b"])
            files.append(current)
            continue
        if current is None:
            continue  # the commit's own header
        hunk = _HUNK.match(line)
        if hunk:
            flush()
            start = (int(hunk["old"]), int(hunk["new"]))
            if current.lines or start[1] > 1:  # where the lines below are, after a gap
                current.lines.append(DiffLine("gap", start[1], f"line {start[1]}"))
            continue
        if not current.lines and not ops and line.startswith(_META):
            if line.startswith("new file mode"):
                current.status = "added"
            elif line.startswith("deleted file mode"):
                current.status = "deleted"
            elif line.startswith("rename to"):
                current.status = "renamed"
            elif line.startswith("+++ b/"):
                current.path = line[6:]
            continue
        if line.startswith("Binary files "):
            current.binary = True
            continue
        if line.startswith("\\"):  # "\ No newline at end of file": git's note, not the file
            continue
        if line[:1] in ("+", "-", " "):
            ops.append((line[0], line[1:]))
    flush()
    for item in files:  # a file whose only change was the final newline shows no lines
        if not item.changed:
            item.lines = []
    return files


def _fold(ops: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Within each run of removed-then-added lines, the lines equal at its start and its end
    are unchanged ones (what the missing final newline makes git report as changed)."""
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(ops):
        if ops[index][0] == " ":
            out.append(ops[index])
            index += 1
            continue
        end = index
        while end < len(ops) and ops[end][0] != " ":
            end += 1
        removed = [text for sign, text in ops[index:end] if sign == "-"]
        added = [text for sign, text in ops[index:end] if sign == "+"]
        head = 0
        while head < min(len(removed), len(added)) and removed[head] == added[head]:
            head += 1
        tail = 0
        while (
            tail < min(len(removed), len(added)) - head and removed[-1 - tail] == added[-1 - tail]
        ):
            tail += 1
        out += [(" ", text) for text in added[:head]]
        out += [("-", text) for text in removed[head : len(removed) - tail]]
        out += [("+", text) for text in added[head : len(added) - tail]]
        out += [(" ", text) for text in added[len(added) - tail :]]
        index = end
    return out


def _numbered(ops: list[tuple[str, str]], old: int, new: int) -> list[DiffLine]:
    lines = []
    for sign, text in ops:
        if sign == "-":
            lines.append(DiffLine("del", old, text))
            old += 1
        elif sign == "+":
            lines.append(DiffLine("add", new, text))
            new += 1
        else:
            lines.append(DiffLine("same", new, text))
            old, new = old + 1, new + 1
    return lines
