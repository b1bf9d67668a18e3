"""The tool set of a pre-compaction memory flush: read anything, append to one file only.

A flush runs unattended, right before history is summarized. Letting it rewrite MEMORY.md or
overwrite a daily note is how memory gets lost (a known complaint about the reference
system), so here the only write that exists is an append to today's note.
"""

from __future__ import annotations

from typing import Any

import gateway.workspace.paths as paths
from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.agent.tools.files import AppendFileTool, ListFilesTool, ReadFileTool
from gateway.agent.tools.registry import ToolRegistry


class AppendOnlyToNote:
    """`append_file`, refused for every path but `note` (compared after resolution)."""

    def __init__(self, note: str) -> None:
        self.note = note
        self._inner = AppendFileTool()
        self.spec = ToolSpec(
            name=self._inner.spec.name,
            description=f"Append text to {note} (the only file you may change now).",
            parameters=self._inner.spec.parameters,
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        target = paths.resolve_in_workspace(
            ctx.workspace, args["path"], private=ctx.private, write=True, area=ctx.area
        )
        allowed = paths.resolve_in_workspace(
            ctx.workspace, self.note, private=ctx.private, write=True, area=ctx.area
        )
        if target != allowed:
            raise ToolError(
                f"append_file: during a memory flush only {self.note} may be changed; "
                "every other file is read-only"
            )
        return await self._inner.run(args, ctx)


def flush_tools(note: str) -> ToolRegistry:
    return ToolRegistry([ReadFileTool(), ListFilesTool(), AppendOnlyToNote(note)])
