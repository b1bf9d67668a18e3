"""Starting a task: the limits, the deadline and the token cap, the row, and a wake-up.

The desk is made before the gateway's parts (the `start_task` tool it serves is one of the
owner's private tools from the start); the runner is given to it when the runner starts
(`attach`), as the scheduler gets its host: the one way to break the cycle tool -> runner ->
parts -> tools without adding anything to a built part. Until a runner is attached (a gateway
that runs no tasks: `clawgate heartbeat run`), the tool refuses.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.clock import Clock
from gateway.config.tasks import TasksSettings
from gateway.stores.tasks import NewTask, Task, TaskLimitReached, TaskStore

__all__ = ["TOOL_NAME", "Origin", "TaskDesk", "TaskRefused"]

TOOL_NAME = "start_task"
MAX_GOAL_CHARS = 4000
MAX_CONTEXT_CHARS = 8000


class TaskRefused(Exception):
    """Not started; `str()` is what the model is told."""


class Starter(Protocol):
    """What the desk needs of the running runner."""

    def parent_tools(self, person: str) -> Collection[str]:
        """The tools a task of `person` may be given: their private chat's, less this one."""
        ...

    def model_name(self, person: str) -> str: ...

    def wake(self) -> None:
        """A task was added: look now rather than at the next poll."""
        ...


@dataclass(frozen=True, slots=True)
class Origin:
    """The chat a task is started from and reports to."""

    person: str
    workspace: str
    channel: str
    chat_id: str
    session_key: str
    sender_id: str = ""
    outside: str = ""  # the outside text in the chat's context window when it asked


class TaskDesk:
    def __init__(self, settings: TasksSettings, store: TaskStore, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self._runner: Starter | None = None

    def attach(self, runner: Starter | None) -> None:
        self._runner = runner

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(
        self,
        origin: Origin,
        goal: str,
        *,
        tools: Sequence[str] | None = None,
        deadline_seconds: float | None = None,
        token_cap: int | None = None,
        context: str = "",
    ) -> Task:
        """Add a queued task and wake the runner. Raises `TaskRefused`."""
        runner = self._runner
        if runner is None:
            raise TaskRefused("background tasks do not run in this gateway (clawgate run does)")
        goal = goal.strip()
        if not goal:
            raise TaskRefused("the goal is empty: say what the task should do")
        if len(goal) > MAX_GOAL_CHARS:
            raise TaskRefused(f"the goal is {len(goal)} characters; keep it under {MAX_GOAL_CHARS}")
        if len(context) > MAX_CONTEXT_CHARS:
            raise TaskRefused(
                f"the context is {len(context)} characters; summarize it under {MAX_CONTEXT_CHARS}"
            )
        available = runner.parent_tools(origin.person)
        if tools is None:
            chosen = tuple(sorted(available))
        else:
            unknown = sorted({name for name in tools if name not in available})
            if unknown:
                raise TaskRefused(
                    f"a task may use only tools this chat has (not {TOOL_NAME}): "
                    f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not among them"
                )
            chosen = tuple(dict.fromkeys(tools))
        section = self.settings
        seconds = min(
            deadline_seconds or section.default_deadline_seconds, section.max_deadline_seconds
        )
        cap = min(token_cap or section.default_token_cap, section.max_token_cap)
        now = self.clock.now().timestamp()
        new = NewTask(
            person=origin.person,
            workspace=origin.workspace,
            channel=origin.channel,
            chat_id=origin.chat_id,
            session_key=origin.session_key,
            private=True,
            goal=goal,
            tools=chosen,
            token_cap=max(1, int(cap)),
            deadline=now + max(1.0, float(seconds)),
            created_at=now,
            context=context.strip(),
            model=runner.model_name(origin.person),
            sender_id=origin.sender_id,
            outside=origin.outside,
        )
        try:
            task = await self.store.add(
                new,
                max_per_person=section.max_running_per_person,
                max_total=section.max_running,
            )
        except TaskLimitReached as exc:
            raise TaskRefused(f"not started: {exc}; wait for one to finish") from None
        runner.wake()
        return task
