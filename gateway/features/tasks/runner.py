"""Running background tasks: each its own session and asyncio task, its limits enforced, its
state in the state database, resumed after a restart.

- **Its own session and lane**: a task's session is `task_session_key(person, id)`, a fresh
  context (the identity files, then the goal and the parent's summary as the first message);
  it runs as its own asyncio task, beside the chat lanes, so it never holds the person's chat
  (and not in the shared lanes either: a task of an hour must not count as a turn in flight).
- **Its tools**: the ones it was given, always a subset of its parent's private chat's tools
  as they are now, never `start_task` (no task starts a task this round). Its tool context is
  the parent chat's (the same privacy; `attended`: the owner asked for it, so an exec command
  asks the owner like any other, and files sent reach the chat it came from).
- **Within limits**: every model call is made inside `usage_scope(person, "tasks")`, so the
  metered provider checks the person's caps before it (a person over budget gets a report
  saying so, never silence) and counts the tokens as theirs; the background model answers
  when `[llm] background_model` is set. The deadline is an `asyncio.timeout`, the token cap
  is checked after each model call (a final answer is kept even when it crosses the cap).
- **Durable**: each step is in the task's transcript before anything else happens, and the
  row says the task runs; after a kill -9 the next start takes every unfinished row up again
  from its transcript (a tool call left without a result gets an "interrupted" one), a task
  whose transcript already ends with its answer is reported without another model call, and
  one whose deadline passed meanwhile is reported as timed out. `stop()` leaves running tasks
  as they are for the next start, like a turn in flight.
- **Visible and controllable**: a poll every `[tasks] poll_seconds` while a task runs (and a
  wake-up when one is added; an idle gateway does not poll) starts queued tasks, stops those
  someone asked to cancel (the row's flag, written by /tasks, the CLI or the panel from any
  process), and shows `waiting_approval` while an exec command of the task waits for the
  owner.

The one report is report.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.prompt import build_system_prompt
from gateway.agent.providers.base import BudgetExceeded, ProviderError
from gateway.agent.scope import UsageScope, usage_scope
from gateway.agent.tools import ToolRegistry
from gateway.features.tasks.desk import TOOL_NAME, TaskDesk
from gateway.features.tasks.report import Reporter
from gateway.pipeline.routing import Route
from gateway.stores.tasks import Task
from memory.layout import PERSONA_FILES, dm_session_key, task_session_key

if TYPE_CHECKING:
    from gateway.features.exec.approvals_store import ApprovalStore
    from gateway.pipeline.ports import TaskParts

__all__ = ["TaskRunner"]

log = logging.getLogger(__name__)


class _CapReached(Exception):
    pass


@dataclass
class _Handle:
    task: asyncio.Task[None]
    why: str = ""  # "cancelled" once someone asked to stop it
    waiting: bool = False  # shown as waiting_approval
    session_key: str = ""


@dataclass
class _Progress:
    tokens: int
    steps: int = 0
    last_text: str = ""
    writes: list[asyncio.Task[None]] = field(default_factory=list)


def opening_message(task: Task) -> str:
    """The task's first message: the goal, and what the parent passed on."""
    text = f"Your task (number {task.number}): {task.goal}"
    if task.context:
        text += f"\n\nWhat the conversation that started it said (a summary):\n{task.context}"
    return text


class TaskRunner:
    """The service that runs tasks (started after the gateway, stopped before it)."""

    def __init__(
        self, parts: TaskParts, desk: TaskDesk, approvals: ApprovalStore | None = None
    ) -> None:
        self.parts = parts
        self.desk = desk
        self.settings = parts.settings.tasks
        self.store = desk.store
        self.approvals = approvals
        self.agent = AgentLoop(parts.metered, self.settings.max_tool_rounds)
        self.reporter = Reporter(parts, self.store)
        self._handles: dict[int, _Handle] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._resumed = True
        running = parts.metrics.registry.gauge(
            "clawgate_tasks_running", "Background tasks running in this gateway."
        )
        running.collect_with(lambda: {(): float(len(self._handles))})

    # -- what the desk asks (desk.Starter) --------------------------------------------------

    def parent_tools(self, person: str) -> Collection[str]:
        return [name for name in self._parent_registry(person).names() if name != TOOL_NAME]

    def model_name(self, person: str) -> str:
        model = self.parts.models.for_scope(UsageScope(person, "tasks"))
        return f"{model.name}/{model.model}"

    def wake(self) -> None:
        self._wake.set()

    # -- the service ----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop(), name="tasks")
        self.desk.attach(self)

    async def stop(self) -> None:
        """Stop polling and leave running tasks as they are: the next start resumes them."""
        self.desk.attach(None)
        tasks = [h.task for h in self._handles.values()]
        if self._loop_task is not None:
            tasks.append(self._loop_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._handles.clear()
        await self.reporter.settle()

    async def _loop(self) -> None:
        if self.parts.presses is not None:
            # The exec tool is offered once the sandbox's probe has passed (it runs beside the
            # first poll): a task resumed before then would find its `exec` gone mid-task.
            await self.parts.presses.settled()
        try:
            await self.reporter.catch_up()
        except Exception:  # a report owed is tried again at the next start
            log.exception("could not make the task reports owed from before the restart")
        while True:
            self._wake.clear()  # before the look: a task added during it wakes the next one
            try:
                await self._tick()
            except Exception:  # one bad poll (a locked database) must not end the tasks
                log.exception("task poll failed")
            # Idle (no task here), nothing needs a look until the tool adds one: only a task
            # of this gateway can be cancelled or wait for an approval.
            wait = self.settings.poll_seconds if self._handles else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _tick(self) -> None:
        resumed, self._resumed = self._resumed, False  # the first poll finds the last run's
        for task in await self.store.active():
            # Only tasks of the chats this gateway serves: `clawgate chat` beside `clawgate
            # run` runs the terminal's, never a Telegram chat's (it could not report it).
            if task.id not in self._handles and task.channel in self.parts.channels:
                self._launch(task, resumed=resumed)
        if not self._handles:
            return
        for task_id in await self.store.cancels_requested(list(self._handles)):
            handle = self._handles.get(task_id)
            if handle is not None and not handle.why:
                handle.why = "cancelled"
                handle.task.cancel()
        await self._show_waiting()

    async def _show_waiting(self) -> None:
        if self.approvals is None:
            return
        keys = {h.session_key: i for i, h in self._handles.items()}
        pending = await self.approvals.pending_sessions(list(keys))
        for key, task_id in keys.items():
            handle = self._handles.get(task_id)
            if handle is None or handle.why or (key in pending) == handle.waiting:
                continue
            handle.waiting = key in pending
            await self.store.set_waiting(task_id, handle.waiting)

    def _launch(self, task: Task, *, resumed: bool) -> None:
        job = asyncio.create_task(
            self._guarded(task, resumed), name=f"task:{task.person}:{task.number}"
        )
        self._handles[task.id] = _Handle(job, session_key=task_session_key(task.person, task.id))

    async def _guarded(self, task: Task, resumed: bool) -> None:
        try:
            # Read again: the poll that launched it may have read the row just before
            # another run of it ended (its report already made).
            fresh = await self.store.get(task.id)
            if fresh is None or not fresh.active:
                return
            await self._run(fresh, resumed)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("task %s of %s failed unexpectedly", task.number, task.person)
            with contextlib.suppress(Exception):
                await self.reporter.report(task, "failed", error="an internal error (see the log)")
        finally:
            self._handles.pop(task.id, None)

    # -- one task -------------------------------------------------------------------------

    async def _run(self, task: Task, resumed: bool) -> None:
        """`resumed`: found unfinished at start (the gateway stopped or was killed meanwhile)."""
        now = self.parts.clock.now().timestamp()
        if task.cancel_requested:
            await self.reporter.report(task, "cancelled", error=_cancelled(task))
            return
        if task.deadline <= now:
            why = "its deadline passed" + (" while the gateway was stopped" if resumed else "")
            await self.reporter.report(task, "timed_out", error=why)
            return
        if task.tokens >= task.token_cap:
            await self.reporter.report(task, "capped", error=_capped(task))
            return
        await self.store.mark_started(task.id, now)
        workspace = Path(task.workspace)
        session = await self.parts.sessions.get(workspace, task_session_key(task.person, task.id))
        if not session.history:
            session.record(
                Message("user", opening_message(task), untrusted=task.outside), task=task.id
            )
        last = session.history[-1]
        if last.role == "assistant" and not last.tool_calls:  # answered before a kill
            await self.reporter.report(task, "done", result=last.text.strip())
            return
        progress = _Progress(tokens=task.tokens, last_text=_last_text(session.history))
        route = self._route(task)
        tools = self._tools(task)
        ctx = self.parts.setup.tool_context(route)
        model = self.parts.models.for_scope(UsageScope(task.person, "tasks"))
        prices = self.parts.usage.prices

        def record(message: Message, usage: Usage | None) -> None:
            session.record(message, usage=usage)
            if message.role == "assistant" and message.text.strip():
                progress.last_text = message.text.strip()
            if usage is None:
                return
            used = usage.input_tokens + usage.output_tokens
            used += usage.cache_read_tokens + usage.cache_write_tokens
            progress.tokens += used
            progress.steps += 1
            cost = prices.cost(model.model, usage)
            progress.writes.append(
                asyncio.ensure_future(self.store.note_step(task.id, tokens=used, cost=cost))
            )
            if message.tool_calls and progress.tokens >= task.token_cap:
                raise _CapReached

        handle = self._handles.get(task.id)
        state, result, error = "done", "", ""
        try:
            async with asyncio.timeout(task.deadline - now):
                with usage_scope(task.person, "tasks"):
                    outcome = await self.agent.run(
                        self._system(task, route), session.history, ctx, tools, record
                    )
            result = outcome.reply
            if session.history and session.history[-1].role == "tool":
                # Every round called tools: the loop's "say continue" note is for a chat.
                state, error = "failed", _out_of_rounds(self.settings.max_tool_rounds)
        except asyncio.CancelledError:
            if handle is None or handle.why != "cancelled":
                raise  # the gateway stops: the task stays running for the next start
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            state, error = "cancelled", _cancelled(await self.store.get(task.id) or task)
        except TimeoutError:
            state, error = "timed_out", "it reached its deadline"
        except _CapReached:
            state, error = "capped", _capped(task)
        except BudgetExceeded as exc:
            state, error = "over_budget", str(exc)
        except ProviderError as exc:
            state, error = "failed", f"the model could not be reached ({exc.kind})"
        if handle is not None:
            handle.why = handle.why or "reporting"  # a cancel from now on changes nothing
        await asyncio.gather(*progress.writes, return_exceptions=True)
        if self.approvals is not None:
            # A command the task asked about and nobody answered is not run for a task that
            # is over (its result would reach no one who waits for it).
            await self.approvals.withdraw(
                task_session_key(task.person, task.id), self.parts.clock.now().timestamp()
            )
        if state != "done":
            result = progress.last_text
        await self.parts.versioning.commit(workspace, "heartbeat", session=session.key)
        await self.reporter.report(task, state, result=result, error=error)

    def _route(self, task: Task) -> Route:
        """The task's route: the parent chat's privacy and chat, the task's own session."""
        return Route(
            task.person,
            Path(task.workspace),
            task_session_key(task.person, task.id),
            task.private,
            task.channel,
            task.chat_id,
            sender_id=task.sender_id,
            message_id=f"task-{task.id}",
        )

    def _parent_registry(self, person: str) -> ToolRegistry:
        """The tools of `person`'s private chat, as a turn there gets them now."""
        from gateway.workspace.seed import workspace_path

        workspace = workspace_path(self.parts.settings.workspaces_dir, person)
        route = Route(person, workspace, dm_session_key(person), True, "", "")
        return self.parts.setup.tools_for(route)

    def _tools(self, task: Task) -> ToolRegistry:
        """The tools it was given, as far as its parent still has them; never this tool."""
        parent = self._parent_registry(task.person)
        allowed = set(task.tools) - {TOOL_NAME}
        chosen = [tool for tool in parent.tools() if tool.spec.name in allowed]
        return ToolRegistry(chosen, redact=self.parts.redactor)

    def _system(self, task: Task, route: Route) -> SystemPrompt:
        settings = self.parts.settings
        now = self.parts.clock.now().astimezone(settings.zone_of(task.person))
        files = self.parts.setup.light_files(route.workspace, today=now.date(), names=PERSONA_FILES)
        run_info = (
            f"A background task (number {task.number}) for {task.person}, started from "
            f"their {task.channel} chat. No one is reading along: work on the goal with your "
            "tools, then answer with the result, written for the person; that answer is sent "
            "to their chat. Model: " + (task.model or "default") + "."
        )
        return build_system_prompt(files, private=task.private, now=now, run_info=run_info)


def _last_text(history: list[Message]) -> str:
    for message in reversed(history):
        if message.role == "assistant" and message.text.strip():
            return message.text.strip()
    return ""


def _cancelled(task: Task) -> str:
    by = task.cancelled_by
    where = "the command line" if by == "cli" else "the panel" if by == "panel" else ""
    return f"it was cancelled from {where}" if where else "it was cancelled"


def _out_of_rounds(rounds: int) -> str:
    return f"it made {rounds} model calls without finishing ([tasks] max_tool_rounds)"


def _capped(task: Task) -> str:
    return f"it used its token cap ({task.token_cap:,} tokens)"
