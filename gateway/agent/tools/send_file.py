"""The send_file tool: give the person a workspace file or image in the chat.

The file is checked like any read of this context (a group sends only from its own area and
the persona files; hidden and internal files never), must fit the channel's upload limit, and
then goes out through the same outbox as every reply: recorded before it is sent, retried if
the platform is down, sent once even if the turn is repeated after a restart (its idempotency
key names the message answered, the file and its content).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gateway.workspace.paths as paths
from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.workspace.names import shown_name

MAX_CAPTION_CHARS = 1000  # Telegram takes 1024; Discord's message limit is 2000


def _size(size: int) -> str:
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    return f"{max(1, round(size / 1000))} KB"


class SendFileTool:
    spec = ToolSpec(
        name="send_file",
        description=(
            "Send a workspace file (document, note, image) to the person in this chat, with "
            "an optional caption: when they want the file, not for text you can write."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "e.g. 'notes/trip.md'"},
                "caption": {
                    "type": "string",
                    "default": "",
                    "description": f"At most {MAX_CAPTION_CHARS} characters.",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        user_path, caption = args["path"], args["caption"].strip()
        shown = shown_name(user_path, 200)  # how the path is quoted in every answer
        if len(caption) > MAX_CAPTION_CHARS:
            raise ToolError(
                f"{name}: the caption is {len(caption)} characters; keep it under "
                f"{MAX_CAPTION_CHARS} and say the rest in your answer"
            )
        outbox = ctx.outbox
        if outbox is None:
            raise ToolError(f"{name}: there is no chat with a person here to send a file to")
        if outbox.max_bytes <= 0:
            raise ToolError(
                f"{name}: this chat ({outbox.channel}) cannot receive files; tell "
                f"the person the file's path ({shown}) instead"
            )
        path = await asyncio.to_thread(
            paths.resolve_in_workspace,
            ctx.workspace,
            user_path,
            private=ctx.private,
            write=False,
            area=ctx.area,
        )
        size = await asyncio.to_thread(_file_size, path, shown)
        if size > outbox.max_bytes:
            raise ToolError(
                f"{name}: {shown} is {_size(size)}; {outbox.channel} takes files "
                f"up to {_size(outbox.max_bytes)}"
            )
        outcome = await outbox.send_file(path, caption)
        return f"{shown} ({_size(size)}): {outcome}"


def _file_size(path: Path, shown: str) -> int:
    if not path.exists():
        raise ToolError(f"send_file: no such file: {shown} (use list_files to see what exists)")
    if not path.is_file():
        raise ToolError(f"send_file: {shown} is a folder; send the files in it one by one")
    size = path.stat().st_size
    if size == 0:
        raise ToolError(f"send_file: {shown} is empty; there is nothing to send")
    return size
