"""Reminders and scheduled tasks at exact times, durable across restarts.

Pure logic with its own files in each workspace: this package never imports `gateway` or
`channels`. The gateway implements `SchedulerHost` (delivery through its outbox to the person's
last DM route, light agent turns) and runs one `Scheduler` for all workspaces, giving it the
host when it starts (`Scheduler.start(host)`).

- `when`: the small language of times ("tomorrow at 9", "every weekday at 08:30", cron)
- `recurrence`: next-run computation (cronsim + zoneinfo) and the DST rule
- `jobs`: the job list file `.clawgate-schedule.json` (versioned, safe to edit by hand)
- `state`: what ran, and runs in flight (`.clawgate-schedule-state.json`)
- `service`: the heap, the fire protocol, late and missed runs, metrics
- `book`: add, list, cancel (tools, /reminders, CLI; the gateway's schedule desk calls them)
"""

from memory.layout import SCHEDULE_FILE
from scheduler.book import JobView, cancel, confirmation, create, list_jobs, render_list
from scheduler.jobs import Job, ScheduleFileError, read_jobs
from scheduler.recurrence import Cron, Every, Once, Schedule, ScheduleError, resolve_local
from scheduler.service import (
    Scheduler,
    SchedulerHost,
    SchedulerMetrics,
    SchedulerPolicy,
    WorkspaceRef,
)
from scheduler.state import STATE_FILE, delivery_key
from scheduler.when import FORMS, parse_when

__all__ = [
    "FORMS",
    "SCHEDULE_FILE",
    "STATE_FILE",
    "Cron",
    "Every",
    "Job",
    "JobView",
    "Once",
    "Schedule",
    "ScheduleError",
    "ScheduleFileError",
    "Scheduler",
    "SchedulerHost",
    "SchedulerMetrics",
    "SchedulerPolicy",
    "WorkspaceRef",
    "cancel",
    "confirmation",
    "create",
    "delivery_key",
    "list_jobs",
    "parse_when",
    "read_jobs",
    "render_list",
    "resolve_local",
]
