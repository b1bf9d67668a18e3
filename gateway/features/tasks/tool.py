"""`start_task`: hand a longer job to a background task that reports back in this chat.

Named for what the model does with it (start something that runs on), like `exec` for a
command. The parent turn gets an answer at once (the task's number, its deadline and cap) and
tells the person; the task runs on its own and its result arrives in this chat later.

Refused where the parent could not use private memory (a group, another person's shared
context) and where there is no chat to report to (a heartbeat, a reminder's turn, a task
itself: no task starts a task this round, and the tool is not in a task's own tools either).
"""

from __future__ import annotations

from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.config.tasks import TasksSettings
from gateway.features.tasks.desk import TOOL_NAME, Origin, TaskDesk, TaskRefused
from gateway.pipeline.task_words import when_text

__all__ = ["StartTaskTool"]


class StartTaskTool:
    def __init__(self, desk: TaskDesk, settings: TasksSettings) -> None:
        self.desk = desk
        self.spec = ToolSpec(
            name=TOOL_NAME,
            description=(
                "Start a background task for a job that takes minutes (going through many "
                "notes, reading and comparing pages, a long command): it runs on its own with "
                "a fresh context (the identity files, the goal and your summary, not this "
                "conversation) and reports its result in this chat when done. You get its "
                "number at once: tell the person it started and that the result will come; "
                "/tasks lists tasks and /tasks cancel N stops one."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "goal": {
                        "type": "string",
                        "description": "What to do and what to report, in full sentences.",
                    },
                    "context": {
                        "type": "string",
                        "description": "A summary of what the task needs from this "
                        "conversation (it does not see it otherwise).",
                    },
                    "tools": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Tool names the task may use (a subset of yours); "
                        "omitted: all of yours but this one.",
                    },
                    "deadline_minutes": {
                        "type": "number",
                        "minimum": 1,
                        "maximum": settings.max_deadline_seconds / 60,
                        "default": settings.default_deadline_seconds / 60,
                    },
                    "token_cap": {
                        "type": "integer",
                        "minimum": 1000,
                        "maximum": settings.max_token_cap,
                        "default": settings.default_token_cap,
                    },
                },
                "required": ["goal"],
                "additionalProperties": False,
            },
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if not ctx.private or ctx.area:
            raise ToolError(f"{TOOL_NAME}: tasks start only in a direct message, never in a group")
        outbox = ctx.outbox
        if not ctx.attended or outbox is None or not outbox.chat_id:
            raise ToolError(
                f"{TOOL_NAME}: no chat to report to here (a heartbeat, a reminder or a task "
                "cannot start a task)"
            )
        tools = args.get("tools")
        if tools is not None and (
            not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
        ):
            raise ToolError(f"{TOOL_NAME}: tools must be a list of tool names")
        if tools is not None and TOOL_NAME in tools:
            raise ToolError(f"{TOOL_NAME}: a task cannot start tasks of its own")
        minutes = args.get("deadline_minutes")
        cap = args.get("token_cap")
        origin = Origin(
            person=ctx.workspace.name,
            workspace=str(ctx.workspace),
            channel=outbox.channel,
            chat_id=outbox.chat_id,
            session_key=ctx.session_key,
            # A goal written after reading a web page may carry its instructions: the task's
            # context is as tainted as the chat's was (the group-readable rule).
            outside=ctx.outside,
        )
        try:
            task = await self.desk.start(
                origin,
                str(args.get("goal", "")),
                tools=tools,
                deadline_seconds=float(minutes) * 60 if isinstance(minutes, int | float) else None,
                token_cap=int(cap) if isinstance(cap, int | float) else None,
                context=str(args.get("context") or ""),
            )
        except TaskRefused as exc:
            raise ToolError(f"{TOOL_NAME}: {exc}") from None
        return (
            f"Started task {task.number}. It runs in the background (deadline "
            f"{when_text(task.deadline - task.created_at)}, at most {task.token_cap:,} tokens) "
            "and its result will be posted in this chat. Tell the person it has started; "
            f"/tasks shows it, /tasks cancel {task.number} stops it."
        )
