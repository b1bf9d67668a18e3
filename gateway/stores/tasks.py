"""The tasks table: background jobs a person's assistant started, one row each.

A row is the whole truth about a task, so a kill -9 loses none: what it was asked (goal, the
parent's summary, the tools it may use, its model, token cap and deadline), where it came
from and reports to (channel, chat, the chat's session key, and whether that chat was
private), how far it got (state, steps, tokens, cost), whether its one report was made and
whether that report is in the chat's session yet (`noted`).

States: `queued -> running <-> waiting_approval`, then one of the final states below. The
final state and the report are written together: `finish_write` is the statement the runner
hands to the outbox so the outbox row and `reported = 1` commit in one transaction (a kill
between them cannot report twice or never). A final row with `reported = 0` is a report
still owed (its channel was missing); the runner makes it at the next start.

`cancel_requested` is how another process stops a task: the CLI and the panel call
`request_cancel`, which only sets the flag; the gateway that runs the task reads the flag
between steps (and on a short timer while a step runs) and ends it as `cancelled`.

Numbers: each person's tasks are numbered 1, 2, 3, ... (`/tasks cancel N` names one); the
number is taken in the transaction that inserts the row, with the limits on how many may run
at once checked in the same transaction, so two starts racing cannot both pass a full limit.

The table comes from migration 11 (gateway/stores/migrations.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from gateway.stores.database import StateDatabase

__all__ = [
    "ACTIVE",
    "FINAL",
    "NewTask",
    "Task",
    "TaskLimitReached",
    "TaskStore",
]

# A task counts against the limits while it is in one of these.
ACTIVE = ("queued", "running", "waiting_approval")
# Where a task ends: the report says which.
FINAL = ("done", "failed", "cancelled", "timed_out", "capped", "over_budget")

_COLUMNS = (
    "id, person, number, workspace, channel, chat_id, session_key, private, sender_id, goal,"
    " context, tools, model, token_cap, deadline, state, tokens, cost, steps, created_at,"
    " started_at, finished_at, cancel_requested, cancelled_by, result, error, reported,"
    " reported_at, noted, outside"
)
_ACTIVE_SQL = "(" + ", ".join(f"'{state}'" for state in ACTIVE) + ")"


class TaskLimitReached(Exception):
    """Too many tasks running (for this person, or in all); `str()` says which."""


@dataclass(frozen=True, slots=True)
class NewTask:
    """What starting a task decides; the store adds the number, the state and the times."""

    person: str
    workspace: str
    channel: str
    chat_id: str
    session_key: str  # the chat's session: where the result is written for the next turn
    private: bool
    goal: str
    tools: tuple[str, ...]
    token_cap: int
    deadline: float  # epoch seconds
    created_at: float
    context: str = ""  # the parent's summary, if it gave one
    model: str = ""  # "" for the gateway's default chain
    sender_id: str = ""
    # The outside text the starting chat's context window held (a web page read there, say):
    # the goal and summary the model wrote from it carry it into the task (provenance.py).
    outside: str = ""


@dataclass(frozen=True, slots=True)
class Task:
    id: int
    person: str
    number: int
    workspace: str
    channel: str
    chat_id: str
    session_key: str
    private: bool
    sender_id: str
    goal: str
    context: str
    tools: tuple[str, ...]
    model: str
    token_cap: int
    deadline: float
    state: str
    tokens: int
    cost: float
    steps: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    cancel_requested: bool
    cancelled_by: str
    result: str
    error: str
    reported: bool
    reported_at: float | None
    noted: bool  # the report is in the origin chat's session (the next turn knows it)
    outside: str  # the starting chat's outside text (NewTask.outside), "" when none

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @classmethod
    def from_row(cls, row: Any) -> Task:
        values = list(row)
        values[7] = bool(values[7])
        values[11] = _tools(values[11])
        values[22] = bool(values[22])
        values[26] = bool(values[26])
        values[28] = bool(values[28])
        return cls(*values)


def _tools(text: str) -> tuple[str, ...]:
    try:
        names = json.loads(text)
    except ValueError:
        return ()
    return tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()


class TaskStore:
    """Reads and conditional writes of the tasks table (the state database opens it)."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    # -- starting -------------------------------------------------------------------------------

    async def add(self, new: NewTask, *, max_per_person: int, max_total: int) -> Task:
        """Insert a queued task with the person's next number, unless a limit is reached.

        Durable: the parent turn tells the person the task started only after this returns.
        Raises `TaskLimitReached`."""

        def insert(db: sqlite3.Connection) -> int:
            mine, total = db.execute(
                f"SELECT coalesce(sum(person = ?), 0), count(*) FROM tasks"
                f" WHERE state IN {_ACTIVE_SQL}",
                (new.person,),
            ).fetchone()
            if mine >= max_per_person:
                raise TaskLimitReached(
                    f"{mine} of your tasks are already running (at most {max_per_person})"
                )
            if total >= max_total:
                raise TaskLimitReached(
                    f"the gateway already runs {total} tasks (at most {max_total} in all)"
                )
            (number,) = db.execute(
                "SELECT coalesce(max(number), 0) + 1 FROM tasks WHERE person = ?", (new.person,)
            ).fetchone()
            cursor = db.execute(
                "INSERT INTO tasks (person, number, workspace, channel, chat_id, session_key,"
                " private, sender_id, goal, context, tools, model, token_cap, deadline,"
                " created_at, outside) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    new.person,
                    number,
                    new.workspace,
                    new.channel,
                    new.chat_id,
                    new.session_key,
                    int(new.private),
                    new.sender_id,
                    new.goal,
                    new.context,
                    json.dumps(list(new.tools)),
                    new.model,
                    new.token_cap,
                    new.deadline,
                    new.created_at,
                    new.outside,
                ),
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

        task_id = await self.db.commit(insert, durable=True)
        task = await self.get(task_id)
        assert task is not None
        return task

    # -- reading (the runner, /tasks, the panel, the CLI) ---------------------------------------

    async def get(self, task_id: int) -> Task | None:
        rows = await self.db.rows(f"SELECT {_COLUMNS} FROM tasks WHERE id = ?", (task_id,))
        return Task.from_row(rows[0]) if rows else None

    async def by_number(self, person: str, number: int) -> Task | None:
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks WHERE person = ? AND number = ?", (person, number)
        )
        return Task.from_row(rows[0]) if rows else None

    async def list_for(self, person: str, limit: int = 20) -> list[Task]:
        """The person's tasks, the active ones first, then the most recent."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks WHERE person = ?"
            f" ORDER BY state IN {_ACTIVE_SQL} DESC, id DESC LIMIT ?",
            (person, limit),
        )
        return [Task.from_row(r) for r in rows]

    async def list_all(self, limit: int = 50) -> list[Task]:
        """Everyone's tasks, the active ones first, then the most recent (panel, CLI)."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks ORDER BY state IN {_ACTIVE_SQL} DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [Task.from_row(r) for r in rows]

    async def active(self) -> list[Task]:
        """Tasks not finished: what a start-up resumes."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks WHERE state IN {_ACTIVE_SQL} ORDER BY id"
        )
        return [Task.from_row(r) for r in rows]

    async def unreported(self) -> list[Task]:
        """Finished tasks whose report is still owed."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks WHERE state NOT IN {_ACTIVE_SQL} AND reported = 0"
            " ORDER BY id"
        )
        return [Task.from_row(r) for r in rows]

    async def unnoted(self) -> list[Task]:
        """Reported tasks whose report is not yet in the origin chat's session."""
        rows = await self.db.rows(
            f"SELECT {_COLUMNS} FROM tasks WHERE reported = 1 AND noted = 0 ORDER BY id"
        )
        return [Task.from_row(r) for r in rows]

    async def mark_noted(self, task_id: int) -> None:
        await self.db.write("UPDATE tasks SET noted = 1 WHERE id = ?", (task_id,))

    async def cancels_requested(self, task_ids: list[int]) -> set[int]:
        """Which of these tasks someone asked to stop (read fresh: another process writes it)."""
        if not task_ids:
            return set()
        marks = ",".join("?" * len(task_ids))
        rows = await self.db.rows(
            f"SELECT id FROM tasks WHERE cancel_requested = 1 AND id IN ({marks})",
            tuple(task_ids),
        )
        return {int(r[0]) for r in rows}

    # -- cancelling (any process) ---------------------------------------------------------------

    async def request_cancel(self, person: str, number: int, by: str = "") -> bool:
        """Ask the gateway to stop task `number` of `person`; False when there is no such
        task still active. Durable: the asker is told it is being stopped."""
        changed = await self.db.write(
            f"UPDATE tasks SET cancel_requested = 1, cancelled_by = ?"
            f" WHERE person = ? AND number = ? AND state IN {_ACTIVE_SQL}",
            (by, person, number),
            durable=True,
        )
        return changed > 0

    # -- the runner's progress ------------------------------------------------------------------

    async def mark_started(self, task_id: int, at: float) -> None:
        await self.db.write(
            "UPDATE tasks SET state = 'running', started_at = coalesce(started_at, ?)"
            f" WHERE id = ? AND state IN {_ACTIVE_SQL}",
            (at, task_id),
        )

    async def set_waiting(self, task_id: int, waiting: bool) -> None:
        """`waiting_approval` while an exec command of the task waits for the owner."""
        before, after = (
            ("running", "waiting_approval") if waiting else ("waiting_approval", "running")
        )
        await self.db.write(
            "UPDATE tasks SET state = ? WHERE id = ? AND state = ?", (after, task_id, before)
        )

    async def note_step(self, task_id: int, *, tokens: int, cost: float) -> None:
        """One model call done: its tokens and cost added, the step counted (bookkeeping)."""
        await self.db.write(
            "UPDATE tasks SET steps = steps + 1, tokens = tokens + ?, cost = cost + ? WHERE id = ?",
            (tokens, cost, task_id),
        )

    def finish_write(
        self, task_id: int, state: str, *, result: str, error: str, at: float, reported: bool
    ) -> Any:
        """The statement that ends a task, to run inside the transaction adding its report
        to the outbox (OutboxStore.enqueue_outbound's `together`). It changes a task only
        once: a second finish (a restart racing a late step) finds it final already."""
        if state not in FINAL:
            raise ValueError(f"not a final task state: {state}")

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE tasks SET state = ?, result = ?, error = ?,"
                " finished_at = coalesce(finished_at, ?), reported = ?,"
                " reported_at = CASE WHEN ? THEN ? ELSE reported_at END"
                f" WHERE id = ? AND (state IN {_ACTIVE_SQL} OR reported = 0)",
                (state, result, error, at, int(reported), int(reported), at, task_id),
            )

        return write

    async def finish(
        self, task_id: int, state: str, *, result: str, error: str, at: float, reported: bool
    ) -> None:
        """End a task on its own (when no outbox row goes with it), durably."""
        await self.db.commit(
            self.finish_write(task_id, state, result=result, error=error, at=at, reported=reported),
            durable=True,
        )
