"""Correction tools: `memory_find` and `memory_correct`, for the owner's private contexts.

When the person says "that's wrong, I moved to Berlin" or "forget the old address", the stale
fact may sit in MEMORY.md, USER.md and a few daily notes at once; fixing one copy leaves the
others to come back. `memory_find` lists every line that holds it, across those files;
`memory_correct` replaces, strikes (kept visible as superseded, left out of recall) or
deletes one line, quoting it so a stale line number cannot change the wrong line. The text
work is `memory.corrections`; paths go through the workspace confinement, writes through the
file tools' atomic, quota-checked write (gateway/agent/tools/files.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date
from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.args import require_private
from gateway.agent.tools.base import Tool, ToolContext, ToolError
from gateway.agent.tools.files import _locked, _read_text, _rel, _resolve, _write_text
from memory.corrections import (
    ACTIONS,
    MAX_FOUND,
    CorrectionError,
    correct_text,
    find_in_files,
    written_lines,
)
from memory.sources import is_memory_path

__all__ = ["MemoryCorrectTool", "MemoryFindTool", "correction_tools"]


class MemoryFindTool:
    spec = ToolSpec(
        name="memory_find",
        description=(
            "Every line of MEMORY.md, USER.md and memory/*.md holding all the words of `text` "
            "(any order or case; struck lines marked): find each copy of a fact to correct "
            "or forget before memory_correct."
        ),
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "Words the lines must contain."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_FOUND,
                    "default": 20,
                    "description": "How many lines at most.",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "memory is")
        text, limit = args["text"], args["limit"]
        try:
            found = await asyncio.to_thread(find_in_files, ctx.workspace, text, limit=limit)
        except CorrectionError as exc:
            raise ToolError(f"{name}: {exc}") from exc
        if not found:
            return f"No line of MEMORY.md, USER.md or memory/*.md mentions {text!r}."
        lines = [f"{len(found)} line(s) mentioning {text!r}:"]
        lines += [
            f"{item.path}:{item.line}: {item.text.strip()[:300]}"
            + (" [struck]" if item.struck else "")
            for item in found
        ]
        return "\n".join(lines)


class MemoryCorrectTool:
    spec = ToolSpec(
        name="memory_correct",
        description=(
            "Correct one line of MEMORY.md, USER.md or memory/*.md, quoted in old_text. "
            "'replace': it becomes new_text. 'strike': it stays, crossed out as superseded "
            "(today's date, `reason`; recall skips it), new_text under it: when the history "
            "matters (moved house). 'delete': it goes (asked to forget). Fix every copy."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "e.g. MEMORY.md"},
                "old_text": {"type": "string", "minLength": 1, "description": "The line's text."},
                "action": {"type": "string", "enum": list(ACTIONS)},
                "new_text": {
                    "type": "string",
                    "default": "",
                    "description": "Replaces old_text within its line.",
                },
                "reason": {"type": "string", "default": "", "description": "Why (strike)."},
                "line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Its number, if old_text is on several.",
                },
            },
            "required": ["path", "old_text", "action"],
            "additionalProperties": False,
        },
    )

    def __init__(self, today: Callable[[], date] | None = None) -> None:
        self.today = today or date.today

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = self.spec.name
        require_private(ctx, name, "memory is")
        user_path, old, action = args["path"], args["old_text"], args["action"]
        new, reason, line = args["new_text"], args["reason"][:200], args.get("line")
        path = await _resolve(ctx, user_path, write=True)
        rel = _rel(ctx, path)
        if not is_memory_path(rel) or rel.endswith(".jsonl"):
            raise ToolError(
                f"{name}: {rel} is not a memory file; memory_correct changes "
                "MEMORY.md, USER.md and memory/*.md (transcripts are history)"
            )
        when = self.today().isoformat()

        def edit() -> tuple[int, list[str]]:
            text = _read_text(path, ctx, name)
            try:
                result, changed = correct_text(
                    text, old, action, new_text=new, line=line, when=when, reason=reason
                )
            except CorrectionError as exc:
                raise ToolError(f"{name}: {exc}; nothing was written") from exc
            _write_text(path, result, ctx, name, authored=len(new.encode("utf-8")) + 80)
            return changed, written_lines(result, changed, action, new)

        changed, now = await _locked(path, edit)
        done = {"replace": "replaced", "strike": "struck", "delete": "deleted"}[action]
        extra = " and wrote the new fact under it" if action == "strike" and new.strip() else ""
        shown = "".join(f"\n{line[:300]}" for line in now)
        return f"{done} line {changed} of {rel}{extra}" + (f"; it now reads:{shown}" if now else "")


def correction_tools(today: Callable[[], date] | None = None) -> list[Tool]:
    return [MemoryFindTool(), MemoryCorrectTool(today)]
