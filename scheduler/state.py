"""What the scheduler has done with each job: `.clawgate-schedule-state.json` in the workspace.

Kept apart from the job list (`.clawgate-schedule.json`) on purpose: the job list is what the
person and the tools change and is versioned with the workspace; this file changes at every run
and is bookkeeping (not versioned, but backed up with the workspace). It holds, per job, the
last occurrence handled (delivered, skipped or given up), and the runs in flight ("pending"):
claimed before delivery so a crash can neither lose nor repeat them (see `scheduler.service`).

Written whole through a temp file and rename (0600); only the scheduler writes it. A missing
file is an empty state; an unreadable one is set aside as `.broken-<time>` and starts empty (the
delivery keys still stop any repeat the outbox remembers).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.files import write_private

log = logging.getLogger(__name__)

STATE_FILE = ".clawgate-schedule-state.json"
VERSION = 1


def delivery_key(person_id: str, job_id: int, created: datetime, due: datetime) -> str:
    """The idempotency key of one run: which job (its id and creation, since a recreated file
    could reuse an id) and which occurrence. The same run always gets the same key."""
    born = int(created.timestamp())
    return f"schedule/{person_id}/{job_id}.{born}/{due.astimezone(UTC):%Y%m%dT%H%M%SZ}"


@dataclass(slots=True)
class JobRecord:
    last_due: datetime | None = None  # the last occurrence handled
    outcome: str = ""  # fired, late, silent, skipped, failed
    runs: int = 0  # occurrences delivered
    error: str = ""  # why the last one failed, if it did


@dataclass(slots=True)
class Pending:
    """A run claimed for delivery and not yet confirmed delivered."""

    key: str
    job_id: int
    due: datetime
    kind: str  # message | agent
    text: str  # message text, or the agent task's prompt
    late: str = ""  # the late marker, e.g. "(late: due 14:00)"; empty when on time
    result: str | None = None  # an agent task's reply, once known (so a retry reuses it)
    attempts: int = 0


@dataclass(slots=True)
class ScheduleState:
    jobs: dict[int, JobRecord] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)

    def record(self, job_id: int) -> JobRecord:
        found = self.jobs.get(job_id)
        if found is None:
            found = self.jobs[job_id] = JobRecord()
        return found

    def to_json(self) -> str:
        data = {
            "version": VERSION,
            "jobs": {
                str(job_id): {
                    "last_due": _iso(rec.last_due), "outcome": rec.outcome, "runs": rec.runs,
                    **({"error": rec.error} if rec.error else {}),
                }
                for job_id, rec in sorted(self.jobs.items())
            },
            "pending": {
                key: {
                    "job": p.job_id, "due": _iso(p.due), "kind": p.kind, "text": p.text,
                    "late": p.late, "result": p.result, "attempts": p.attempts,
                }
                for key, p in self.pending.items()
            },
        }
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ScheduleState:
        if not text.strip():
            return cls()
        data = json.loads(text)
        jobs = {
            int(job_id): JobRecord(_time(rec.get("last_due")), str(rec.get("outcome", "")),
                                   int(rec.get("runs", 0)), str(rec.get("error", "")))
            for job_id, rec in data.get("jobs", {}).items()
        }
        pending: dict[str, Pending] = {}
        for key, p in data.get("pending", {}).items():
            due = _time(p.get("due"))
            if due is None:
                raise ValueError(f"pending run {key} has no due time")
            result = p.get("result")
            pending[key] = Pending(key, int(p["job"]), due, str(p.get("kind", "message")),
                                   str(p.get("text", "")), str(p.get("late", "")),
                                   None if result is None else str(result),
                                   int(p.get("attempts", 0)))
        return cls(jobs, pending)


def state_path(workspace: Path) -> Path:
    return workspace / STATE_FILE


def load_state(workspace: Path) -> ScheduleState:
    path = state_path(workspace)
    try:
        return ScheduleState.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ScheduleState()
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        aside = path.with_name(f"{path.name}.broken-{datetime.now(UTC):%Y%m%dT%H%M%S}")
        log.warning("schedule state %s is unreadable (%s); set aside as %s, starting empty",
                    path, exc, aside.name)
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        return ScheduleState()


def save_state(workspace: Path, state: ScheduleState) -> None:
    write_private(state_path(workspace), state.to_json())


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
