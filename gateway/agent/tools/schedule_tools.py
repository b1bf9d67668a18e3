"""Schedule tools: `schedule_create`, `schedule_list`, `schedule_cancel`.

Private contexts only (the owner's DM, heartbeats, scheduled tasks): the gateway registers them
with the private tools, so a group session does not have them at all, and as a second lock they
refuse to run in a context that is not private. A group can therefore never create a job that
runs later with the owner's context. The work is done by a `ScheduleDesk` (the gateway's
`GatewayScheduleDesk`), which writes the workspace's job list and tells the running scheduler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.args import require_private
from gateway.agent.tools.base import Tool, ToolContext, ToolError
from scheduler import FORMS, ScheduleError, ScheduleFileError

__all__ = ["ScheduleDesk", "schedule_tools"]


class ScheduleDesk(Protocol):
    async def create(self, workspace: Path, when: str, text: str, kind: Any) -> str: ...
    async def listing(self, workspace: Path) -> str: ...
    async def cancel(self, workspace: Path, job_id: int) -> str: ...


class ScheduleCreateTool:
    spec = ToolSpec(
        name="schedule_create",
        description=(
            "A reminder or task at a time (the person's zone), once or repeating. 'when': "
            + FORMS
            + ". kind 'message': 'text' is sent to the person as written (the "
            "reminder they read, e.g. 'Send the invoice'); 'agent': 'text' is your "
            "instruction then, your reply is sent (none if HEARTBEAT_OK). Tell the person the "
            "time the result gives."
        ),
        parameters={
            "type": "object",
            "properties": {
                "when": {"type": "string", "description": "When, e.g. 'tomorrow at 9'."},
                "text": {"type": "string", "description": "The message, or the task."},
                "kind": {"type": "string", "enum": ["message", "agent"], "default": "message"},
            },
            "required": ["when", "text"],
            "additionalProperties": False,
        },
    )

    def __init__(self, desk: ScheduleDesk) -> None:
        self.desk = desk

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "reminders are")
        try:
            return await self.desk.create(ctx.workspace, args["when"], args["text"], args["kind"])
        except (ScheduleError, ScheduleFileError) as exc:
            raise ToolError(f"{name}: {exc}") from None


class ScheduleListTool:
    spec = ToolSpec(
        name="schedule_list",
        description="List the person's reminders and scheduled tasks with their numbers and "
        "next run times.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    )

    def __init__(self, desk: ScheduleDesk) -> None:
        self.desk = desk

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        require_private(ctx, self.spec.name, "reminders are")
        try:
            return await self.desk.listing(ctx.workspace)
        except ScheduleFileError as exc:
            raise ToolError(f"{self.spec.name}: {exc}") from None


class ScheduleCancelTool:
    spec = ToolSpec(
        name="schedule_cancel",
        description="Cancel a reminder or scheduled task by its number (from schedule_list).",
        parameters={
            "type": "object",
            "properties": {"id": {"type": "integer", "minimum": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
    )

    def __init__(self, desk: ScheduleDesk) -> None:
        self.desk = desk

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "reminders are")
        try:
            return await self.desk.cancel(ctx.workspace, args["id"])
        except ScheduleFileError as exc:
            raise ToolError(f"{name}: {exc}") from None


def schedule_tools(desk: ScheduleDesk) -> list[Tool]:
    return [ScheduleCreateTool(desk), ScheduleListTool(desk), ScheduleCancelTool(desk)]
