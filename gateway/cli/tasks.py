"""`clawgate tasks list|cancel`: the background tasks, from another process than the gateway.

`list` opens the state database read-only (SQLite `mode=ro`: no migration, no pruning, no
write of any kind), so it is safe beside a running gateway and on a copy. `cancel` writes one
thing, the task's cancel flag (TaskStore.request_cancel, the write `/tasks cancel N` and the
panel's Cancel make); the gateway running the task reads the flag within `[tasks]
poll_seconds`, stops it, and its one report in the chat says it was cancelled.

People are named with `--person` (as `clawgate chat --person`): a task belongs to a person's
id, not to a workspace directory, so `--workspace`'s paths would mean nothing here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from gateway.cli.common import EXIT_FAILED, CliError, json_time, print_json, print_table, settings
from gateway.cli.options import JsonOption
from gateway.pipeline.task_words import STATE_WORDS, when_text
from gateway.stores.database import StateDatabase, StateError, state_path
from gateway.stores.migrations import LATEST
from gateway.stores.tasks import Task, TaskStore
from gateway.workspace.names import shown_name

T = TypeVar("T")

RECENT = 20  # without --all: the active tasks and the most recent ones, this many in all
EVERY = 1_000_000
GOAL_CHARS = 70
TASKS_SINCE = 11  # the migration that made the tasks table

app = typer.Typer(help="background tasks: list, cancel", no_args_is_help=True)

PersonOption = Annotated[
    str | None,
    typer.Option("--person", "-p", metavar="NAME", help="one person's tasks (e.g. telegram-123)"),
]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tasks")


def _path() -> Path:
    return state_path(settings().workspaces_dir)


def _reading(command: Callable[[TaskStore], Awaitable[T]], empty: T) -> T:
    """`command` over the tasks of a read-only state database; `empty` when there is no
    database yet, or one from before tasks existed (the gateway adds the table at its next
    start)."""
    path = _path()
    if not path.exists():
        return empty

    async def go() -> T:
        db = StateDatabase(path)
        try:
            version = await db.open_read_only()
        except StateError as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
        try:
            if version > LATEST:
                raise CliError(
                    f"{path} was written by a newer clawgate (schema {version}, this one "
                    f"reads up to {LATEST}): use that version's command",
                    EXIT_FAILED,
                )
            if version < TASKS_SINCE:
                return empty
            return await command(TaskStore(db))
        finally:
            await db.close()

    return asyncio.run(go())


def _elapsed(task: Task, now: float) -> float:
    end = task.finished_at if task.finished_at is not None else now
    return end - (task.started_at or task.created_at)


def _as_json(task: Task, now: float) -> dict[str, Any]:
    from datetime import UTC, datetime

    def moment(at: float | None) -> str | None:
        return None if at is None else json_time(datetime.fromtimestamp(at, UTC))

    return {
        "person": task.person,
        "number": task.number,
        "state": task.state,
        "active": task.active,
        "cancel_requested": task.cancel_requested,
        "goal": task.goal,
        "channel": task.channel,
        "steps": task.steps,
        "tokens": task.tokens,
        "token_cap": task.token_cap,
        "cost_usd": round(task.cost, 6),
        "elapsed_seconds": round(_elapsed(task, now), 1),
        "created": moment(task.created_at),
        "started": moment(task.started_at),
        "finished": moment(task.finished_at),
        "deadline": moment(task.deadline),
        "reported": task.reported,
    }


def _state_words(task: Task) -> str:
    words = STATE_WORDS.get(task.state, task.state)
    return f"{words} (stopping)" if task.active and task.cancel_requested else words


@app.command("list", help="running and recent tasks: person, number, state, elapsed, cost, goal")
def list_command(
    person: PersonOption = None,
    every: Annotated[
        bool, typer.Option("--all", help=f"every task, not only the {RECENT} most recent")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    limit = EVERY if every else RECENT

    async def read(store: TaskStore) -> list[Task]:
        if person:
            return await store.list_for(person, limit)
        return await store.list_all(limit)

    nothing: list[Task] = []
    tasks = _reading(read, nothing)
    now = time.time()
    if as_json:
        print_json([_as_json(t, now) for t in tasks])
        return
    if not tasks:
        print("no tasks" + (f" for {person}" if person else ""))
        return
    print_table(
        ("person", "#", "state", "elapsed", "tokens", "cost", "goal"),
        (
            (
                t.person,
                t.number,
                _state_words(t),
                when_text(_elapsed(t, now)),
                f"{t.tokens:,}",
                f"${t.cost:.2f}",
                # A goal is hostile text: print_table shows it as one plain line.
                shown_name(t.goal, GOAL_CHARS),
            )
            for t in tasks
        ),
    )
    if any(t.active and not t.cancel_requested for t in tasks):
        print("stop one with: clawgate tasks cancel NUMBER --person NAME")


@app.command("cancel", help="ask the running gateway to stop task NUMBER of a person")
def cancel_command(
    number: Annotated[int, typer.Argument(metavar="NUMBER", help="the task's number", min=1)],
    person: Annotated[
        str,
        typer.Option("--person", "-p", metavar="NAME", help="whose task (numbers are per person)"),
    ],
) -> None:
    found = _reading(lambda store: store.by_number(person, number), None)
    if found is None:
        raise CliError(
            f"{person} has no task #{number}; see `clawgate tasks list --person {person}`"
        )
    if not found.active:
        raise CliError(
            f"task #{number} of {person} has already finished ({found.state})", EXIT_FAILED
        )
    if found.cancel_requested:
        print(f"task #{number} of {person} is already being stopped")
        return

    async def write() -> Task | None:
        db = StateDatabase(_path())  # the schema is current (read above): nothing is migrated
        await db.open()
        try:
            store = TaskStore(db)
            if await store.request_cancel(person, number, by="cli"):
                return None
            return await store.by_number(person, number)  # it finished meanwhile
        finally:
            await db.close()

    try:
        finished = asyncio.run(write())
    except StateError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    if finished is not None:
        raise CliError(
            f"task #{number} of {person} has already finished ({finished.state})", EXIT_FAILED
        )
    print(
        f"stopping task #{number} of {person}: the running gateway stops it within a few "
        "seconds, and its report in the chat says it was cancelled"
    )
