"""What the scheduler has done with each job: `.clawgate-schedule-state.jsonl` in the workspace.

Kept apart from the job list (`.clawgate-schedule.json`) on purpose: the job list is what the
person and the tools change and is versioned with the workspace; this file changes at every run
and is bookkeeping (not versioned, but backed up with the workspace). It holds, per job, the
last occurrence handled (delivered, skipped or given up) and its next run as last computed, and
the runs in flight ("pending"): claimed before delivery so a crash can neither lose nor repeat
them (see `scheduler.service`).

It is a journal, one JSON object per line, because a claim must reach the disk before its
delivery and a whole-file rewrite per claim is slow where it matters (1,000 workspaces with a
run due in the same second): appending a line to each and flushing the filesystem once is a
group commit, while replacing 1,000 files costs seconds on ext4. Every change to the state is
an event (`claim`, `result`, `retry`, `done`, `skip`, `next`, `forget`) applied by one method,
`apply`, both live and when the file is read back, so memory and disk cannot drift apart. The
file is compacted (rewritten whole, through a temp file and rename: one `job` line per job and
one `pending` line per run in flight) when it grows past a few lines per job, and at load when
a crash left a torn last line. Only the scheduler writes it; readers (the CLI) only replay.

Replaying is total: a line that cannot be applied, whatever the exception (a bad time, a
number too large, nesting too deep), is skipped and logged, and a file over `MAX_STATE_BYTES`
is not read at all (the state starts empty: due runs fire late or are skipped by the grace
rule, never twice thanks to the delivery keys).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory.atomic import BrokenFile, loads_bounded, read_bounded
from memory.layout import SCHEDULE_STATE_FILE

log = logging.getLogger(__name__)

STATE_FILE = SCHEDULE_STATE_FILE
VERSION = 1
COMPACT_SLACK = 64  # lines beyond 2 per job before the journal is rewritten
# About 300 bytes a job after compaction: room for 100,000 jobs and their runs in flight.
MAX_STATE_BYTES = 64 * 1024 * 1024


def delivery_key(person_id: str, job_id: int, created: datetime, due: datetime) -> str:
    """The idempotency key of one run: which job (its id and creation, since a recreated file
    could reuse an id) and which occurrence. The same run always gets the same key."""
    born = int(created.timestamp())
    return f"schedule/{person_id}/{job_id}.{born}/{due.astimezone(UTC):%Y%m%dT%H%M%SZ}"


@dataclass(slots=True)
class JobRecord:
    last_due: datetime | None = None  # the last occurrence handled
    outcome: str = ""  # sending, fired, late, silent, skipped, failed
    runs: int = 0  # occurrences delivered
    error: str = ""  # why the last attempt failed, if it did
    # The next run as last computed, and a checksum of what it was computed from (schedule,
    # zone, last run): a restart reuses it instead of walking the calendar again.
    next_due: datetime | None = None
    basis: int = 0


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
    unwritten: list[str] = field(default_factory=list)  # journal lines not yet on disk
    lines: int = 0  # lines in the file on disk
    needs_compaction: bool = False

    def record(self, job_id: int) -> JobRecord:
        found = self.jobs.get(job_id)
        if found is None:
            found = self.jobs[job_id] = JobRecord()
        return found

    # -- the changes (each one an event: applied now, appended at the next write) ----------

    def claim(self, key: str, job_id: int, due: datetime, kind: str, text: str, late: str) -> None:
        self._do(
            {
                "e": "claim",
                "key": key,
                "job": job_id,
                "due": _iso(due),
                "kind": kind,
                "text": text,
                "late": late,
            }
        )

    def set_result(self, key: str, result: str) -> None:
        self._do({"e": "result", "key": key, "result": result})

    def retried(self, key: str, attempts: int, error: str) -> None:
        self._do({"e": "retry", "key": key, "attempts": attempts, "error": error})

    def done(self, key: str, outcome: str) -> None:
        self._do({"e": "done", "key": key, "outcome": outcome})

    def skipped(self, job_id: int, last_due: datetime) -> None:
        self._do({"e": "skip", "job": job_id, "last_due": _iso(last_due)})

    def planned(self, job_id: int, next_due: datetime | None, basis: int) -> None:
        self._do({"e": "next", "job": job_id, "next_due": _iso(next_due), "basis": basis})

    def forget(self, job_id: int) -> None:
        if job_id in self.jobs:
            self._do({"e": "forget", "job": job_id})

    def _do(self, event: dict[str, Any]) -> None:
        self.apply(event)
        self.unwritten.append(json.dumps(event, ensure_ascii=False))

    def apply(self, e: dict[str, Any]) -> None:
        """The one place the state changes, live or replayed. Raises on a malformed event."""
        kind = e["e"]
        if kind == "claim":
            due = _need_time(e["due"])
            record = self.record(int(e["job"]))
            record.last_due, record.outcome = due, "sending"
            self.pending[e["key"]] = Pending(
                e["key"], int(e["job"]), due, str(e["kind"]), str(e["text"]), str(e.get("late", ""))
            )
        elif kind == "result":
            if (pending := self.pending.get(e["key"])) is not None:
                pending.result = str(e["result"])
        elif kind == "retry":
            if (pending := self.pending.get(e["key"])) is not None:
                pending.attempts = int(e["attempts"])
                if (failed := self.jobs.get(pending.job_id)) is not None:
                    failed.error = str(e.get("error", ""))
        elif kind == "done":
            pending = self.pending.pop(e["key"], None)
            finished = None if pending is None else self.jobs.get(pending.job_id)
            if pending is not None and finished is not None and finished.last_due == pending.due:
                finished.outcome = str(e["outcome"])
                if finished.outcome in ("fired", "late"):
                    finished.runs += 1
                    finished.error = ""
        elif kind == "skip":
            record = self.record(int(e["job"]))
            record.last_due, record.outcome = _need_time(e["last_due"]), "skipped"
        elif kind == "next":
            record = self.record(int(e["job"]))
            record.next_due, record.basis = _time(e.get("next_due")), int(e.get("basis", 0))
        elif kind == "forget":
            self.jobs.pop(int(e["job"]), None)
        elif kind == "job":  # a compacted record
            self.jobs[int(e["job"])] = JobRecord(
                _time(e.get("last_due")),
                str(e.get("outcome", "")),
                int(e.get("runs", 0)),
                str(e.get("error", "")),
                _time(e.get("next_due")),
                int(e.get("basis", 0)),
            )
        elif kind == "pending":  # a compacted run in flight
            self.pending[e["key"]] = Pending(
                e["key"],
                int(e["job"]),
                _need_time(e["due"]),
                str(e["kind"]),
                str(e["text"]),
                str(e.get("late", "")),
                None if e.get("result") is None else str(e["result"]),
                int(e.get("attempts", 0)),
            )
        elif kind == "state":
            pass
        else:
            raise ValueError(f"unknown event {kind!r}")

    # -- the file ---------------------------------------------------------------------------

    def too_long(self) -> bool:
        return self.lines > 2 * (len(self.jobs) + len(self.pending)) + COMPACT_SLACK

    def snapshot(self) -> str:
        """The whole state as a fresh journal (what compaction writes)."""
        dump = json.dumps
        lines = [dump({"e": "state", "version": VERSION})]
        for job_id, rec in sorted(self.jobs.items()):
            entry: dict[str, Any] = {
                "e": "job",
                "job": job_id,
                "last_due": _iso(rec.last_due),
                "outcome": rec.outcome,
                "runs": rec.runs,
            }
            if rec.error:
                entry["error"] = rec.error
            if rec.next_due is not None:
                entry["next_due"], entry["basis"] = _iso(rec.next_due), rec.basis
            lines.append(dump(entry, ensure_ascii=False))
        for p in self.pending.values():
            lines.append(
                dump(
                    {
                        "e": "pending",
                        "key": p.key,
                        "job": p.job_id,
                        "due": _iso(p.due),
                        "kind": p.kind,
                        "text": p.text,
                        "late": p.late,
                        "result": p.result,
                        "attempts": p.attempts,
                    },
                    ensure_ascii=False,
                )
            )
        return "\n".join(lines) + "\n"

    @classmethod
    def replay(cls, text: str, source: str = STATE_FILE) -> ScheduleState:
        state = cls()
        if text and not text.endswith("\n"):  # a crash tore the last append: drop that line
            text = text[: text.rfind("\n") + 1]
            state.needs_compaction = True
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                event = loads_bounded(line, max_depth=8)
                if not isinstance(event, dict):
                    raise ValueError("not an object")
                state.apply(event)
            except Exception as exc:  # any bad line is skipped; the next compaction drops it
                log.warning(
                    "%s line %d skipped: %s",
                    source,
                    number,
                    f"{type(exc).__name__}: {str(exc)[:120]}",
                )
                state.needs_compaction = True
            state.lines += 1
        state.needs_compaction = state.needs_compaction or state.too_long()
        return state


def state_path(workspace: Path) -> Path:
    return workspace / STATE_FILE


def load_state(workspace: Path) -> ScheduleState:
    """Replay the journal (read-only; a missing or unreadable file is an empty state)."""
    path = state_path(workspace)
    try:
        text = read_bounded(path, MAX_STATE_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ScheduleState()
    except (OSError, BrokenFile) as exc:
        log.warning("schedule state %s is unreadable (%s); starting empty", path, exc)
        return ScheduleState(needs_compaction=True)  # the next write replaces it whole
    return ScheduleState.replay(text, str(path))


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _need_time(value: Any) -> datetime:
    moment = _time(value)
    if moment is None:
        raise ValueError(f"not a time: {value!r}")
    return moment
