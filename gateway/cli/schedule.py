"""`clawgate schedule list|add|cancel`: a workspace's reminders from the command line.

Works on the workspace's files whether or not the gateway runs; a running gateway picks a
change up at its next rescan (`[scheduler] rescan_seconds`, 30 s by default).
"""

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import typer

from gateway.cli.common import (
    CliError,
    print_json,
    print_table,
    resolve_workspace,
    settings,
)
from gateway.cli.options import JsonOption, WorkspaceOption

app = typer.Typer(help="reminders and scheduled tasks: list, add, cancel", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="schedule")


def _target(workspace: str | None) -> tuple[Path, ZoneInfo]:
    from gateway.assembly.scheduling import person_zone

    config = settings()
    path = resolve_workspace(workspace, config)
    return path, person_zone(config, path.resolve().name)


@app.command("list", help="the workspace's jobs with their numbers and next runs")
def list_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    from scheduler import ScheduleFileError, list_jobs
    from scheduler.wording import in_words

    path, zone = _target(workspace)
    try:
        views, problems = list_jobs(path, zone)
    except ScheduleFileError as exc:
        raise CliError(str(exc)) from exc
    now = datetime.now(UTC)
    if as_json:
        print_json({"timezone": zone.key, "problems": problems, "jobs": [
            {"id": v.job.id, "kind": v.job.kind, "text": v.job.text, "when": v.job.when,
             "next_run": v.next_run.isoformat() if v.next_run else None,
             "last_outcome": v.record.outcome if v.record else "", "sending": v.sending}
            for v in views]})
        return
    if not views and not problems:
        print("No reminders or scheduled tasks.")
    rows = [(v.job.id, v.job.kind, v.job.text,
             in_words(v.next_run, zone, now).split(";")[0] if v.next_run else "-",
             v.job.when if v.job.recurring else "once") for v in views]
    if rows:
        print_table(("#", "kind", "text", "next run", "repeats"), rows,
                    title=f"schedule of {path} ({zone.key})")
    for problem in problems:
        print(f"not running: {problem}")


@app.command("add", help="add a job, e.g. add 'tomorrow at 9' 'Send the invoice'")
def add_command(
    when: Annotated[str, typer.Argument(help="e.g. 'tomorrow at 9', 'every weekday at 08:30', "
                                             "'in 2 hours', 'cron 0 9 * * 1'")],
    text: Annotated[str, typer.Argument(help="the message (or, with --agent, the task)")],
    agent: Annotated[bool, typer.Option("--agent", help="run TEXT as a task for the assistant "
                                                        "and send its answer")] = False,
    workspace: WorkspaceOption = None,
) -> None:
    from scheduler import ScheduleError, ScheduleFileError, confirmation, create

    config = settings()
    path, zone = _target(workspace)
    now = datetime.now(UTC)
    try:
        job, first = create(path, zone, when, text, "agent" if agent else "message", now,
                            max_jobs=config.scheduler.max_jobs)
    except (ScheduleError, ScheduleFileError) as exc:
        raise CliError(str(exc)) from exc
    print(confirmation(job, first, zone, now))


@app.command("cancel", help="cancel job number ID")
def cancel_command(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="the number from `schedule list`")],
    workspace: WorkspaceOption = None,
) -> None:
    from scheduler import ScheduleFileError, cancel

    path, zone = _target(workspace)
    try:
        job = cancel(path, zone, job_id)
    except ScheduleFileError as exc:
        raise CliError(str(exc)) from exc
    if job is None:
        raise CliError(f"no job #{job_id} in {path}; see `clawgate schedule list`")
    print(f"cancelled #{job.id}: {job.text}")
