"""The job list: `.clawgate-schedule.json` in the workspace, readable and safe to edit by hand.

Why a JSON file and not a database: the person can open it, read it, fix a typo or delete a
job with any editor; it is versioned with the workspace (a commit per change, `git log` shows
when a reminder was added or removed) and backed up with it, and it stays tiny (a job is one
short object). It changes only when a job is added, cancelled or edited, never when a job runs:
what the scheduler did is in the separate state file (`scheduler.state`). Its name starts with a
dot so the assistant's file tools cannot see it: jobs change only through the schedule tools,
which are offered in private contexts only.

The format (one object per job; `when` uses the language of `scheduler.when`):

    {"version": 1, "next_id": 4, "jobs": [
      {"id": 1, "kind": "message", "text": "Call the dentist",
       "when": "2026-12-01T15:00:00+01:00", "created": "2026-11-30T09:12:00+00:00"},
      {"id": 2, "kind": "agent", "text": "Summarize today's notes for me",
       "when": "every weekday at 18:00", "created": "2026-11-30T09:13:00+00:00"}]}

Hand edits are safe: a job that cannot be read (bad `when`, unknown kind, duplicate id, a time
out of range) is reported and skipped while the others keep running, and it is written back
untouched when the gateway next changes the file; a file that is not valid JSON is never
overwritten (adding or cancelling fails with the line and column to fix). `created` may be
left out of a hand-written job: the file's modification time stands in for it. Relative forms
("tomorrow at 9") in the file count from `created`. A time without an offset is a wall time
in the workspace's zone. Ids are never reused (`next_id`), so `/reminders cancel 3` cannot hit
a newer job.

Reading is total: the file is hostile input (a hand edit, a restored backup). It is read only up
to `MAX_FILE_BYTES` and parsed only when its nesting is shallow (`memory.atomic.loads_bounded`);
any failure while reading one job, whatever the exception, makes that job a problem, and any
failure of the whole file a `ScheduleFileError`, never anything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from memory.atomic import BrokenFile, loads_bounded, read_bounded
from memory.layout import SCHEDULE_FILE
from scheduler.files import locked, write_private
from scheduler.recurrence import Schedule, ScheduleError
from scheduler.when import parse_when

VERSION = 1
KINDS = ("message", "agent")
MAX_TEXT_CHARS = 2000
# 200 jobs (the default limit) of 2,000 characters are under 1 MiB, 100,000 short ones (the
# highest limit) about 15 MiB; a file past this is refused unread rather than parsed (a hand
# edit gone wrong, a hostile restore).
MAX_FILE_BYTES = 32 * 1024 * 1024
Kind = Literal["message", "agent"]


class ScheduleFileError(Exception):
    """The schedule file cannot be read as a whole; `str()` says where and why."""


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    kind: Kind
    text: str  # the message, or the agent task's prompt
    when: str  # as written in the file
    created: datetime  # aware; intervals count from it
    schedule: Schedule

    @property
    def recurring(self) -> bool:
        return self.schedule.recurring

    def first(self, zone: ZoneInfo) -> datetime | None:
        return self.schedule.first(self.created, zone)

    def next_after(self, moment: datetime, zone: ZoneInfo) -> datetime | None:
        return self.schedule.next_after(moment, zone, self.created)

    def entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "when": self.when,
            "created": self.created.isoformat(timespec="seconds"),
        }


@dataclass(slots=True)
class JobFile:
    """The parsed file: the jobs that could be read, what could not, and the raw entries (so a
    rewrite keeps unreadable hand edits as they were)."""

    jobs: list[Job] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)
    next_id: int = 1
    signature: tuple[int, int, int] | None = None  # (inode, size, mtime_ns) when read

    def get(self, job_id: int) -> Job | None:
        return next((job for job in self.jobs if job.id == job_id), None)


def schedule_path(workspace: Path) -> Path:
    return workspace / SCHEDULE_FILE


def file_signature(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def parse_job(raw: Any, zone: ZoneInfo, default_created: datetime) -> Job:
    """One entry of the file; raises ScheduleError naming what is wrong with it, and nothing
    else (an exception no check foresaw names its type)."""
    try:
        return _parse_job(raw, zone, default_created)
    except ScheduleError:
        raise
    except Exception as exc:  # RecursionError, OverflowError, MemoryError...: the job is broken
        job_id = raw.get("id") if isinstance(raw, dict) else None
        label = f"job {job_id}" if isinstance(job_id, int) and job_id < 10**12 else "a job"
        raise ScheduleError(f"{label} cannot be read ({type(exc).__name__})") from None


def _parse_job(raw: Any, zone: ZoneInfo, default_created: datetime) -> Job:
    if not isinstance(raw, dict):
        raise ScheduleError("a job must be an object with id, kind, text and when")
    job_id = raw.get("id")
    if not isinstance(job_id, int) or isinstance(job_id, bool) or job_id < 1:
        raise ScheduleError(f"bad id {_short(job_id)}: a positive whole number")
    kind = raw.get("kind", "message")
    if kind not in KINDS:
        raise ScheduleError(f"job {job_id}: kind must be 'message' or 'agent', not {_short(kind)}")
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"job {job_id}: text is missing")
    if len(text) > MAX_TEXT_CHARS:
        raise ScheduleError(
            f"job {job_id}: the text is {len(text):,} characters; at most {MAX_TEXT_CHARS}"
        )
    when = raw.get("when")
    if not isinstance(when, str):
        raise ScheduleError(f"job {job_id}: when is missing")
    created = default_created
    if raw.get("created") is not None:
        stamp = raw["created"]
        try:
            if not isinstance(stamp, str) or len(stamp) > 64:
                raise ValueError(stamp)
            created = datetime.fromisoformat(stamp)
            if created.tzinfo is None:
                created = created.replace(tzinfo=zone)
            created.astimezone(UTC)  # a time that cannot be placed in UTC
        except (ValueError, OverflowError):
            raise ScheduleError(f"job {job_id}: created is not an ISO time (in range)") from None
    try:
        schedule = parse_when(when, zone, created)
        schedule.first(created, zone)  # computable, so the scheduler never meets it broken
    except ScheduleError as exc:
        raise ScheduleError(f"job {job_id}: {exc}") from None
    except (OverflowError, ValueError) as exc:
        raise ScheduleError(f"job {job_id}: {when!r} is out of range ({exc})") from None
    return Job(job_id, kind, text, when, created, schedule)


def _short(value: Any) -> str:
    """A value as shown in a problem line: never more than a line, whatever the file held."""
    try:
        shown = repr(value)
    except Exception:  # a 5,000-digit int cannot be shown; RecursionError on deep nesting
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= 60 else shown[:57] + "..."


def parse_file(text: str, zone: ZoneInfo, default_created: datetime) -> JobFile:
    """The whole file; raises ScheduleFileError (and nothing else) when it cannot be used."""
    if not text.strip():
        return JobFile()
    try:
        data = loads_bounded(text)
    except BrokenFile as exc:
        raise ScheduleFileError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs", []), list):
        raise ScheduleFileError('expected {"jobs": [...]} at the top')
    parsed = JobFile(entries=list(data.get("jobs", [])))
    seen: set[int] = set()
    top = 0
    for raw in parsed.entries:
        try:
            job = parse_job(raw, zone, default_created)
        except ScheduleError as exc:
            parsed.problems.append(str(exc))
            if isinstance(raw, dict) and isinstance(raw.get("id"), int):
                top = max(top, raw["id"])
            continue
        top = max(top, job.id)
        if job.id in seen:
            parsed.problems.append(f"job {job.id}: the id is used twice; the second is skipped")
            continue
        seen.add(job.id)
        parsed.jobs.append(job)
    next_id = data.get("next_id", 1)
    parsed.next_id = max(next_id if isinstance(next_id, int) else 1, top + 1)
    return parsed


def read_jobs(workspace: Path, zone: ZoneInfo) -> JobFile:
    """The workspace's jobs (an empty list when there is no file). Raises ScheduleFileError."""
    path = schedule_path(workspace)
    signature = file_signature(path)
    if signature is None:
        return JobFile()
    try:
        text = read_bounded(path, MAX_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return JobFile()
    except BrokenFile as exc:
        raise ScheduleFileError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ScheduleFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ScheduleFileError(f"cannot read {SCHEDULE_FILE}: {exc}") from None
    mtime = datetime.fromtimestamp(signature[2] / 1e9, UTC).replace(microsecond=0)
    try:
        parsed = parse_file(text, zone, mtime)
    except ScheduleFileError as exc:
        raise ScheduleFileError(f"{path}: {exc}") from None
    parsed.signature = signature
    return parsed


def _render(entries: list[Any], next_id: int) -> str:
    lines = ",\n  ".join(json.dumps(entry, ensure_ascii=False) for entry in entries)
    body = f"[\n  {lines}\n ]" if entries else "[]"
    return f'{{"version": {VERSION}, "next_id": {next_id}, "jobs": {body}}}\n'


def add_job(
    workspace: Path,
    zone: ZoneInfo,
    when: str,
    text: str,
    kind: Kind,
    now: datetime,
    *,
    max_jobs: int = 200,
    done: frozenset[int] = frozenset(),
) -> Job:
    """Parse, check and append a job; returns it. `when` is stored in canonical form (relative
    times resolved, so the file says exactly when). `done`: one-shot jobs that have run, dropped
    from the file now (the history keeps them). Raises ScheduleError or ScheduleFileError."""
    text = text.strip()
    if not text:
        raise ScheduleError("the reminder text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ScheduleError(f"the text is {len(text)} characters; at most {MAX_TEXT_CHARS}")
    if kind not in KINDS:
        raise ScheduleError(f"kind must be 'message' or 'agent', not {kind!r}")
    schedule = parse_when(when, zone, now)
    created = now.astimezone(UTC).replace(microsecond=0)
    first = schedule.first(created, zone)
    if not schedule.recurring and (first is None or first <= now):
        raise ScheduleError(f"{when!r} is in the past")
    with locked(workspace):
        current = read_jobs(workspace, zone)
        entries = [e for e in _pinned(current) if not _entry_done(e, done)]
        if len(entries) >= max_jobs:
            raise ScheduleError(
                f"this workspace already has {len(entries)} jobs "
                f"(the limit is {max_jobs}); cancel some first"
            )
        job = Job(current.next_id, kind, text, schedule.canonical(zone), created, schedule)
        entries.append(job.entry())
        write_private(schedule_path(workspace), _render(entries, job.id + 1))
    return job


def cancel_job(
    workspace: Path, zone: ZoneInfo, job_id: int, *, done: frozenset[int] = frozenset()
) -> Job | None:
    """Remove job `job_id`; returns it, or None when there is no such job."""
    with locked(workspace):
        current = read_jobs(workspace, zone)
        job = current.get(job_id)
        if job is None:
            return None
        entries = [
            e
            for e in _pinned(current)
            if not (isinstance(e, dict) and e.get("id") == job_id) and not _entry_done(e, done)
        ]
        write_private(schedule_path(workspace), _render(entries, current.next_id))
    return job


def _pinned(current: JobFile) -> list[Any]:
    """The raw entries, with `created` filled in where a hand edit left it out: the rewrite
    changes the file's modification time, which stood in for it."""
    created = {job.id: job.created for job in current.jobs}
    pinned: list[Any] = []
    for entry in current.entries:
        if isinstance(entry, dict) and entry.get("created") is None and entry.get("id") in created:
            entry = {**entry, "created": created[entry["id"]].isoformat(timespec="seconds")}
        pinned.append(entry)
    return pinned


def _entry_done(entry: Any, done: frozenset[int]) -> bool:
    return isinstance(entry, dict) and entry.get("id") in done
