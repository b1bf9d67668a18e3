"""Adding, listing and cancelling jobs: what the tools, `/reminders` and the CLI call.

Works on the files alone, with or without a running scheduler (the CLI runs in another
process); after a change in the gateway process, call `Scheduler.reload(person_id)` so the
heap follows at once (otherwise the next rescan picks it up). Blocking: call from a thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from scheduler.jobs import Job, Kind, add_job, cancel_job, read_jobs
from scheduler.recurrence import Once
from scheduler.state import JobRecord, ScheduleState, load_state
from scheduler.wording import from_now, in_words, when_words

__all__ = ["JobView", "cancel", "confirmation", "create", "list_jobs", "render_list"]


@dataclass(frozen=True, slots=True)
class JobView:
    job: Job
    next_run: datetime | None
    record: JobRecord | None
    sending: bool  # a run is claimed and not yet confirmed delivered


def _done(jobs: list[Job], state: ScheduleState, zone: ZoneInfo) -> frozenset[int]:
    """One-shot jobs whose run was handled (delivered, skipped or given up)."""
    busy = {p.job_id for p in state.pending.values()}
    done = set()
    for job in jobs:
        record = state.jobs.get(job.id)
        if (
            isinstance(job.schedule, Once)
            and job.id not in busy
            and record is not None
            and record.last_due is not None
            and _ran(job, record.last_due, zone)
        ):
            done.add(job.id)
    return frozenset(done)


def _ran(job: Job, last_due: datetime, zone: ZoneInfo) -> bool:
    try:
        return job.next_after(last_due, zone) is None
    except (OverflowError, ValueError):  # a hand-edited state time out of range: keep the job
        return False


def list_jobs(workspace: Path, zone: ZoneInfo) -> tuple[list[JobView], list[str]]:
    """The workspace's live jobs (done one-shots left out) and the file's problems."""
    parsed = read_jobs(workspace, zone)
    state = load_state(workspace)
    done = _done(parsed.jobs, state, zone)
    busy = {p.job_id for p in state.pending.values()}
    views = []
    for job in parsed.jobs:
        if job.id in done:
            continue
        record = state.jobs.get(job.id)
        try:
            if record is None or record.last_due is None:
                next_run = job.first(zone)
            else:
                next_run = job.next_after(record.last_due, zone)
        except Exception:
            next_run = None
        views.append(JobView(job, next_run, record, job.id in busy))
    return views, parsed.problems


def create(
    workspace: Path,
    zone: ZoneInfo,
    when: str,
    text: str,
    kind: Kind,
    now: datetime,
    *,
    max_jobs: int = 200,
) -> tuple[Job, datetime | None]:
    """Add a job; returns it and its first run. Raises ScheduleError / ScheduleFileError."""
    parsed = read_jobs(workspace, zone)
    done = _done(parsed.jobs, load_state(workspace), zone)
    job = add_job(workspace, zone, when, text, kind, now, max_jobs=max_jobs, done=done)
    return job, job.first(zone)


def cancel(workspace: Path, zone: ZoneInfo, job_id: int) -> Job | None:
    parsed = read_jobs(workspace, zone)
    done = _done(parsed.jobs, load_state(workspace), zone)
    if job_id in done:
        return None
    return cancel_job(workspace, zone, job_id, done=done)


def confirmation(job: Job, next_run: datetime | None, zone: ZoneInfo, now: datetime) -> str:
    """What the tool tells the model: the job and its resolved next run, in words and ISO."""
    kind = "agent task" if job.kind == "agent" else "reminder"
    when = (
        "never (the schedule has no future run)"
        if next_run is None
        else in_words(next_run, zone, now)
    )
    repeat = f"; repeats {job.when}" if job.recurring else ""
    return f"Scheduled {kind} #{job.id}: {job.text!r}. Next run: {when}{repeat}."


def render_list(views: list[JobView], problems: list[str], zone: ZoneInfo, now: datetime) -> str:
    """The person's jobs as plain text with their ids (for /reminders and the CLI)."""
    if not views and not problems:
        return "No reminders or scheduled tasks."
    lines = []
    for view in views:
        job = view.job
        label = "task" if job.kind == "agent" else "reminder"
        if view.sending:
            nxt = "sending now"
        elif view.next_run is None:
            nxt = "no further run"
        elif view.next_run <= now:
            nxt = (
                f"overdue, was due {when_words(view.next_run, zone)} "
                f"({from_now(view.next_run, now)}); sent as soon as the gateway runs"
            )
        else:
            nxt = in_words(view.next_run, zone, now).split(";")[0]
        repeat = f" ({job.when})" if job.recurring else ""
        lines.append(f"{job.id}. [{label}] {job.text} - next: {nxt}{repeat}")
    for problem in problems:
        lines.append(f"! not running: {problem}")
    return "\n".join(lines)
