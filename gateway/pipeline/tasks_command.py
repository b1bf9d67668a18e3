"""`/tasks` and `/tasks cancel N`: a person's background tasks, answered without the model.

The list is the running ones first, then the most recent (number, state, elapsed time,
tokens and cost, the goal shortened). A cancel only writes the request to the state database
(the same write the CLI and the panel make from their own processes); the gateway running the
task sees it within `[tasks] poll_seconds` and stops it, and the task's one report says so.

Only in a private context: a group sees no one's tasks.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gateway.pipeline.task_words import listing_line

if TYPE_CHECKING:
    from gateway.pipeline.routing import Route
    from gateway.stores.tasks import TaskStore

USAGE = "Usage: /tasks (running and recent) or /tasks cancel N (N: a number from the list)."
SHOWN = 10


async def tasks_command(
    store: TaskStore | None, route: Route, args: str, now: float | None = None
) -> str:
    if not route.private:
        return "Tasks are only available in a direct message with the assistant."
    if store is None:
        return "Background tasks are turned off on this gateway ([tasks] enabled = false)."
    words = args.split()
    if not words:
        return await _listing(store, route.person_id, time.time() if now is None else now)
    if len(words) == 2 and words[0].lower() == "cancel" and words[1].lstrip("#").isdigit():
        number = int(words[1].lstrip("#"))
        who = f"{route.channel}:{route.sender_id}" if route.sender_id else route.channel
        if await store.request_cancel(route.person_id, number, by=who):
            return f"Stopping task #{number}; its report will say when it has stopped."
        task = await store.by_number(route.person_id, number)
        if task is None:
            return f"There is no task #{number} (see /tasks for the numbers)."
        return f"Task #{number} has already finished ({task.state})."
    return USAGE


async def _listing(store: TaskStore, person: str, now: float) -> str:
    tasks = await store.list_for(person, SHOWN)
    if not tasks:
        return "No tasks yet. Ask me for a longer job and I can run it in the background."
    lines = ["Your tasks:"]
    for task in tasks:
        start = task.started_at or task.created_at
        end = task.finished_at if task.finished_at is not None else now
        lines.append(
            listing_line(task.number, task.state, end - start, task.tokens, task.cost, task.goal)
        )
    lines.append("/tasks cancel N stops one.")
    return "\n".join(lines)
