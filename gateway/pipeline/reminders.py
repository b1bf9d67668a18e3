"""`/reminders` and `/reminders cancel N`: the person's jobs, answered without the model.

Only in a private context (the workspace owner's DM): a group sees no one's reminders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler import ScheduleFileError

if TYPE_CHECKING:
    from gateway.agent.tools.schedule_tools import ScheduleDesk
    from gateway.pipeline.routing import Route

USAGE = "Usage: /reminders (the list) or /reminders cancel N (N: a number from the list)."


async def reminders_command(desk: ScheduleDesk | None, route: Route, args: str) -> str:
    if not route.private:
        return "Reminders are only available in a direct message with the assistant."
    if desk is None:
        return "Reminders are turned off on this gateway ([scheduler] enabled = false)."
    words = args.split()
    try:
        if not words:
            return await desk.listing(route.workspace)
        if len(words) == 2 and words[0].lower() == "cancel" and words[1].lstrip("#").isdigit():
            return await desk.cancel(route.workspace, int(words[1].lstrip("#")))
    except ScheduleFileError as exc:
        return f"Your schedule file cannot be read: {exc}"
    return USAGE
