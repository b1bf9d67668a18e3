"""`clawgate schedule list|add|cancel`: a workspace's reminders from the command line.

Works on the workspace's files whether or not the gateway runs; a running gateway picks a
change up at its next rescan (`[scheduler] rescan_seconds`, 30 s by default). A change is
committed to the workspace's history as `schedule: .clawgate-schedule.json` (not as a hand
edit), and `add` says where the reminder will arrive.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo

import typer

from gateway.cli.common import (
    EXIT_FAILED,
    CliError,
    json_time,
    print_json,
    print_table,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption, WorkspaceOption

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.stores.links import DmRoute

app = typer.Typer(help="reminders and scheduled tasks: list, add, cancel", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="schedule")


def _target(workspace: str | None) -> tuple[Settings, Path, ZoneInfo]:
    config = settings()
    path = resolve_workspace(workspace, config)
    return config, path, config.zone_of(path.resolve().name)


@app.command("list", help="the workspace's jobs with their numbers and next runs")
def list_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    from scheduler import ScheduleFileError, list_jobs
    from scheduler.wording import in_words

    _, path, zone = _target(workspace)
    try:
        views, problems = list_jobs(path, zone)
    except ScheduleFileError as exc:  # the file, not the command: a failure
        raise CliError(str(exc), EXIT_FAILED) from exc
    now = datetime.now(UTC)
    if as_json:
        # Instants in UTC (json_time); `when` is the job's rule as stored in the file.
        print_json(
            {
                "timezone": zone.key,
                "problems": problems,
                "jobs": [
                    {
                        "id": v.job.id,
                        "kind": v.job.kind,
                        "text": v.job.text,
                        "when": v.job.when,
                        "repeats": v.job.recurring,
                        "created": json_time(v.job.created),
                        "next_run": json_time(v.next_run),
                        "last_outcome": v.record.outcome if v.record else "",
                        "sending": v.sending,
                    }
                    for v in views
                ],
            }
        )
        return
    if not views and not problems:
        print("No reminders or scheduled tasks.")
    rows = [
        (
            v.job.id,
            v.job.kind,
            v.job.text,
            in_words(v.next_run, zone, now).split(";")[0] if v.next_run else "-",
            v.job.when if v.job.recurring else "once",
        )
        for v in views
    ]
    if rows:
        print_table(
            ("#", "kind", "text", "next run", "repeats"),
            rows,
            title=f"schedule of {path} ({zone.key})",
        )
    for problem in problems:
        print(f"not running: {problem}")


@app.command("add", help="add a job, e.g. add 'tomorrow at 9' 'Send the invoice'")
def add_command(
    when: Annotated[
        str,
        typer.Argument(
            help="e.g. 'tomorrow at 9', 'every weekday at 08:30', 'in 2 hours', 'cron 0 9 * * 1'"
        ),
    ],
    text: Annotated[str, typer.Argument(help="the message (or, with --agent, the task)")],
    agent: Annotated[
        bool,
        typer.Option("--agent", help="run TEXT as a task for the assistant and send its answer"),
    ] = False,
    workspace: WorkspaceOption = None,
) -> None:
    from scheduler import ScheduleError, ScheduleFileError, confirmation, create

    config, path, zone = _target(workspace)
    now = datetime.now(UTC)
    try:
        job, first = create(
            path,
            zone,
            when,
            text,
            "agent" if agent else "message",
            now,
            max_jobs=config.scheduler.max_jobs,
        )
    except ScheduleError as exc:  # the WHEN or TEXT given
        raise CliError(str(exc)) from exc
    except ScheduleFileError as exc:
        raise CliError(str(exc), EXIT_FAILED) from exc
    _commit(config, path, f"clawgate schedule add: #{job.id} {job.text!r}")
    print(confirmation(job, first, zone, now), _where(config, path.resolve().name))


def _where(config: Settings, person_id: str) -> str:
    """Where the reminder will arrive, from the person's last DM route (if any is stored)."""
    from gateway.features.scheduling import delivery_note
    from gateway.stores.state import StateDB, state_path

    stored = None
    if state_path(config.workspaces_dir).exists():  # a listing never creates the database

        async def read() -> DmRoute | None:
            async with StateDB.for_root(
                config.workspaces_dir, inbox_retention=config.inbox_retention
            ) as state:
                return await state.links.last_dm_route(person_id)

        try:
            stored = asyncio.run(read())
        except Exception:  # a courtesy line: the reminder is made either way
            stored = None
    return delivery_note(person_id, config.owner, stored, None, config.scheduler.grace_hours)


def _commit(config: Settings, workspace: Path, note: str) -> None:
    """Record the change in the workspace's history under its own reason ("schedule"), so the
    log does not call it a hand edit. A folder that is not versioned stays as it is."""
    from gateway.ops.versioning import Versioning

    if (workspace / ".git").exists():
        asyncio.run(
            Versioning(enabled=config.versioning.enabled).commit(workspace, "schedule", note=note)
        )


@app.command("cancel", help="cancel job number ID")
def cancel_command(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="the number from `schedule list`")],
    workspace: WorkspaceOption = None,
) -> None:
    from scheduler import ScheduleFileError, cancel

    config, path, zone = _target(workspace)
    try:
        job = cancel(path, zone, job_id)
    except ScheduleFileError as exc:
        raise CliError(str(exc), EXIT_FAILED) from exc
    if job is None:
        raise CliError(f"no job #{job_id} in {path}; see `clawgate schedule list`")
    _commit(config, path, f"clawgate schedule cancel: #{job.id} {job.text!r}")
    print(f"cancelled #{job.id}: {job.text}")
