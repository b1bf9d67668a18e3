"""The panel's Tasks tab: a person's background tasks, and a Cancel button for active ones.

A page (GET) and an action (POST, CSRF-checked by the middleware like every other action).
The list is the one `/tasks` and `clawgate tasks list` show (TaskStore.list_for: the active
ones first, then the most recent); Cancel makes the same write as `/tasks cancel N` and
`clawgate tasks cancel` (TaskStore.request_cancel sets a flag; the gateway running the task
reads it within `[tasks] poll_seconds` and the task's one report says it stopped).

A goal is text the model wrote from what a person asked: hostile. The template escapes it;
here it is also made one short line with its control and direction-changing characters shown
as U+FFFD (gateway/workspace/names.py `shown_name`, the one way the gateway quotes a name
someone else chose), so it cannot break the table or reorder what is shown around it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiohttp import web

from gateway.panel.context import panel_of, session_of
from gateway.panel.host import PanelError
from gateway.panel.html import person_url, when
from gateway.panel.pages import page, person_of
from gateway.pipeline.task_words import STATE_WORDS, when_text
from gateway.stores.tasks import Task
from gateway.workspace.names import shown_name

GOAL_CHARS = 120  # shown in the table; the whole goal is in the row's tooltip (title)
GOAL_TITLE_CHARS = 2000

# How a state looks: running ones plain, one that waits for the owner in amber, the endings
# that are no success in red.
_STATE_CSS = {
    "waiting_approval": "warn",
    "done": "ok",
    "failed": "bad",
    "timed_out": "bad",
    "capped": "bad",
    "over_budget": "bad",
}


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/p/{person}/tasks", tasks_page)
    router.add_post("/p/{person}/tasks/cancel", task_cancel)


@dataclass(frozen=True, slots=True)
class TaskRow:
    number: int
    state: str  # in words
    css: str
    elapsed: str
    tokens: str
    cost: str
    goal: str
    goal_title: str
    started: str
    cancellable: bool  # active and no cancel asked yet
    stopping: bool  # a cancel was asked; the runner has not ended it yet


def task_row(task: Task, now: float) -> TaskRow:
    start = task.started_at or task.created_at
    end = task.finished_at if task.finished_at is not None else now
    return TaskRow(
        number=task.number,
        state=STATE_WORDS.get(task.state, task.state),
        css=_STATE_CSS.get(task.state, ""),
        elapsed=when_text(end - start),
        tokens=f"{task.tokens:,}",
        cost=f"${task.cost:.2f}",
        goal=shown_name(task.goal, GOAL_CHARS),
        goal_title=shown_name(task.goal, GOAL_TITLE_CHARS),
        started=when(task.created_at),
        cancellable=task.active and not task.cancel_requested,
        stopping=task.active and task.cancel_requested,
    )


async def tasks_page(request: web.Request) -> web.Response:
    """The person's tasks: number, state (waiting for an approval included), elapsed time,
    tokens and cost, the goal; Cancel for the active ones."""
    person, _ = person_of(request)
    host = panel_of(request).host
    now = time.time()
    rows = [task_row(t, now) for t in await host.tasks(person)] if host.tasks_on else []
    return page(
        request,
        "tasks.html",
        "Tasks",
        person=person,
        tab="tasks",
        off="" if host.tasks_on else "Background tasks are off ([tasks] enabled = false).",
        active=[r for r in rows if r.cancellable or r.stopping],
        recent=[r for r in rows if not (r.cancellable or r.stopping)],
        waiting=any(r.css == "warn" for r in rows),
    )


async def task_cancel(request: web.Request) -> web.StreamResponse:
    person, _ = person_of(request)
    form = await request.post()
    session = session_of(request)
    raw = form.get("number", "")
    number = int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) < 10 else 0
    if number < 1:
        session.say("error", "no task number given")
    else:
        try:
            by = f"panel:{session.principal.name}"  # the login that asked, as the chat's is
            session.say("ok", await panel_of(request).host.cancel_task(person, number, by))
        except PanelError as exc:
            session.say("error", str(exc))
    raise web.HTTPSeeOther(person_url(person, "tasks"))
