"""HEARTBEAT.md: the checklist, whether it is effectively empty, and its optional tasks block.

The file is Markdown the person edits by hand. HTML comments are for people only and never
reach the model. A file with nothing but headings, comments, blank lines, rules and empty list
items is "effectively empty": a beat over it costs nothing.

An optional `tasks:` block lists checks with their own interval; only the ones that are due go
to the model (see docs/heartbeats.md):

    tasks:
    - name: inbox
      interval: 2h
      prompt: Check memory/inbox.md for anything older than a day.

Reading is total: the file is hostile input (the person's hand, or the model's in the owner's
chat). At most `MAX_CHECKLIST_BYTES` are read, a task that cannot be understood (an interval
of 10^20 weeks, say) is a problem line, and `load_checklist` turns any other failure into a
checklist with one problem, so a beat never raises over it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from memory.layout import HEARTBEAT_FILE, strip_comments

_HEADING = re.compile(r"^#{1,6}(\s.*)?$")
_EMPTY_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])(?:\s+\[[ xX]?\])?$")
_RULE = re.compile(r"^(?:[-*_=]\s*){3,}$")
_TASKS_START = re.compile(r"^tasks\s*:\s*$", re.IGNORECASE)
_ITEM_START = re.compile(r"^\s*-\s+([A-Za-z_]+)\s*:\s*(.*)$")
_ITEM_KEY = re.compile(r"^\s+([A-Za-z_]+)\s*:\s*(.*)$")
_INTERVAL_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DISABLED = {"0", "off", "false", "no", "none", "disabled"}
# Far more than a checklist a model should follow unattended; the rest is not read.
MAX_CHECKLIST_BYTES = 256 * 1024
MAX_INTERVAL = timedelta(days=366)


def parse_interval(text: str) -> timedelta | None:
    """`30m`, `1h`, `1h30m`, `90s`, `2d`, `1w` -> a timedelta; `0` or `off` -> None (disabled)."""
    value = text.strip().lower().replace(" ", "")
    if value in _DISABLED:
        return None
    position, seconds = 0, 0.0
    # Each part matched where the last ended: a search (finditer) would retry the digits from
    # every later position, quadratic in a long run of them ("9" * 40_000 took minutes).
    while match := _INTERVAL_PART.match(value, position):
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        position = match.end()
    if not value or position != len(value) or seconds <= 0:
        raise ValueError(
            f"invalid interval {_shown(text)}: use a number with s, m, h, d or w (30m, 1h30m, "
            "2d), or 0 to disable"
        )
    if not math.isfinite(seconds) or seconds > MAX_INTERVAL.total_seconds():
        raise ValueError(f"interval {_shown(text)} is longer than a year")
    return timedelta(seconds=seconds)


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def format_interval(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    if seconds >= 3600 and seconds % 60 == 0:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds}s"


def is_effectively_empty(text: str) -> bool:
    """Only headings, comments, blank lines, rules and empty list items (no instruction)."""
    for line in strip_comments(text).splitlines():
        stripped = line.strip()
        if not stripped or _HEADING.match(stripped) or _EMPTY_ITEM.match(stripped):
            continue
        if _RULE.match(stripped):
            continue
        return False
    return True


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    every: timedelta
    prompt: str

    def is_due(self, last_run: datetime | None, now: datetime) -> bool:
        return last_run is None or now - last_run >= self.every


@dataclass(frozen=True, slots=True)
class Checklist:
    body: str  # the file without comments and without the tasks block
    tasks: tuple[Task, ...] = ()
    problems: tuple[str, ...] = ()  # tasks that could not be read, for logs and status

    @property
    def body_empty(self) -> bool:
        return is_effectively_empty(self.body)

    @property
    def empty(self) -> bool:
        return self.body_empty and not self.tasks

    def due(self, last_runs: Mapping[str, datetime], now: datetime) -> list[Task]:
        return [task for task in self.tasks if task.is_due(last_runs.get(task.name), now)]

    def render(self, due: list[Task]) -> str:
        """What the model sees as HEARTBEAT.md: the checklist and only the tasks due now."""
        parts = [] if self.body_empty else [_squeeze(self.body)]
        if due:
            lines = [
                f"- {task.name} (every {format_interval(task.every)}): {task.prompt}"
                for task in due
            ]
            parts.append("## Tasks due now\n" + "\n".join(lines))
        return "\n\n".join(parts)


def load_checklist(workspace: Path) -> Checklist | None:
    """The workspace's HEARTBEAT.md parsed (None when there is none); never raises: a file
    that cannot be read is an empty checklist with a problem saying why."""
    path = workspace / HEARTBEAT_FILE
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CHECKLIST_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Checklist("", problems=(f"cannot be read: {exc.strerror or exc}",))
    problems: tuple[str, ...] = ()
    if len(data) > MAX_CHECKLIST_BYTES:
        data = data[:MAX_CHECKLIST_BYTES]
        problems = (f"over {MAX_CHECKLIST_BYTES // 1024} KiB: only the start is read",)
    try:
        checklist = parse_checklist(data.decode("utf-8", errors="replace"))
    except Exception as exc:  # parse_checklist is total; this is the last line of defence
        return Checklist("", problems=(f"cannot be read ({type(exc).__name__})",))
    return Checklist(checklist.body, checklist.tasks, problems + checklist.problems)


def parse_checklist(text: str) -> Checklist:
    lines = strip_comments(text).splitlines()
    start = next((i for i, line in enumerate(lines) if _TASKS_START.match(line)), None)
    if start is None:
        return Checklist("\n".join(lines))
    end = start + 1
    while end < len(lines) and _in_block(lines[end]):
        end += 1
    tasks, problems = _parse_tasks(lines[start + 1 : end])
    body = "\n".join(lines[:start] + lines[end:])
    return Checklist(body, tuple(tasks), tuple(problems))


def _in_block(line: str) -> bool:
    """The block goes on while lines are blank, indented, or list items."""
    return not line.strip() or line[0].isspace() or line.lstrip().startswith("-")


def _parse_tasks(lines: list[str]) -> tuple[list[Task], list[str]]:
    items: list[dict[str, str]] = []
    key = ""
    for line in lines:
        if not line.strip():
            continue
        start = _ITEM_START.match(line)
        pair = _ITEM_KEY.match(line)
        if start:
            key = start.group(1).lower()
            items.append({key: start.group(2).strip()})
        elif pair and items:
            key = pair.group(1).lower()
            items[-1][key] = pair.group(2).strip()
        elif items and key:  # a continuation line of the previous value
            items[-1][key] = f"{items[-1][key]} {line.strip()}".strip()
    tasks: list[Task] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, item in enumerate(items, 1):
        task, problem = _task(item, number, seen)
        if task is not None:
            tasks.append(task)
            seen.add(task.name)
        else:
            problems.append(problem)
    return tasks, problems


def _task(item: dict[str, str], number: int, seen: set[str]) -> tuple[Task | None, str]:
    name = item.get("name", "").strip().strip("\"'")
    prompt = item.get("prompt", "").strip().strip("\"'")
    interval = item.get("interval", item.get("every", "")).strip().strip("\"'")
    label = f"task {number}" + (f" ({name})" if name else "")
    if not name or not prompt:
        return None, f"{label}: needs a name and a prompt"
    if name in seen:
        return None, f"{label}: the name is used twice"
    try:
        every = parse_interval(interval) if interval else None
    except (ValueError, OverflowError) as exc:
        return None, f"{label}: {exc}"
    if every is None:
        return None, f"{label}: needs an interval such as 2h or 1d"
    return Task(name, every, prompt), ""


def _squeeze(text: str) -> str:
    """Drop blank-line runs and surrounding space left by removed comments and blocks."""
    return re.sub(r"\n{3,}", "\n\n", text).strip()
