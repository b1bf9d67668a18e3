"""The short line a live preview shows while the model's tools run ("searching memory...").

By tool name, so a person sees what the assistant is doing rather than a frozen half
sentence; the next words the model writes replace it. A tool without a line of its own (an
MCP server's, say) gets a generic one: its name is the server's and is not shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.agent.conversation import ToolCall

_LINES = {
    "memory_search": "searching memory...",
    "memory_get": "reading memory...",
    "read_file": "reading a file...",
    "list_files": "looking through files...",
    "write_file": "writing a file...",
    "edit_file": "editing a file...",
    "append_file": "writing a note...",
    "delete_file": "tidying files...",
    "schedule_create": "setting a reminder...",
    "schedule_list": "checking reminders...",
    "schedule_cancel": "cancelling a reminder...",
    "web_search": "searching the web...",
    "web_fetch": "reading a web page...",
    "read_skill": "reading a skill...",
    "mcp_load_tools": "loading tools...",
}
GENERIC = "working..."


def progress_line(calls: Sequence[ToolCall]) -> str:
    """The line for a round of tool calls: the first call's (they run in order)."""
    return _LINES.get(calls[0].name, GENERIC) if calls else GENERIC
