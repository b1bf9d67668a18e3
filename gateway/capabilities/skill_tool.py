"""read_skill: open a skill's SKILL.md (or a file beside it), shared skills included.

The workspace's own skills can also be read with read_file; shared skills live outside the
workspace, where file tools cannot go, so this tool reads them, confined to the skill's folder.
It only knows the skills the current conversation may see (the same scan as the prompt).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gateway.workspace.paths as paths
from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.capabilities.skill_catalog import SkillScan
from gateway.capabilities.skill_file import SKILL_FILE

MAX_SKILL_CHARS = 60_000

SkillLookup = Callable[[ToolContext], SkillScan]


class ReadSkillTool:
    spec = ToolSpec(
        name="read_skill",
        description="Read a skill's instructions (its SKILL.md), or another file in the skill's "
        "folder. Use it before doing a task that a listed skill covers.",
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name, as listed."},
                "file": {
                    "type": "string",
                    "default": SKILL_FILE,
                    "description": "A file in the skill's folder.",
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    )

    def __init__(self, lookup: SkillLookup) -> None:
        self._lookup = lookup

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name, file = args["name"], args["file"] or SKILL_FILE
        scan = await asyncio.to_thread(self._lookup, ctx)
        skill = next((s for s in scan.skills if s.name == name), None)
        if skill is None:
            known = ", ".join(s.name for s in scan.skills) or "none"
            raise ToolError(f"read_skill: no skill {name!r} here; available: {known}")
        if skill.source == "workspace":
            target = await asyncio.to_thread(
                paths.resolve_in_workspace,
                ctx.workspace,
                f"{scan.root}/{name}/{file}",
                private=ctx.private,
                write=False,
                area=ctx.area,
            )
        else:
            target = _inside(skill.path.parent, file)
        return await asyncio.to_thread(_read, target, file, ctx.max_file_bytes)


def _inside(folder: Path, file: str) -> Path:
    """`file` resolved inside the shared skill's folder, or a refusal."""
    parts = [p for p in file.split("/") if p not in ("", ".")]
    if file.startswith("/") or "\\" in file or any(p.startswith(".") for p in parts):
        raise ToolError(f"read_skill: {file!r} must be a plain relative path in the skill folder")
    root = Path(os.path.realpath(folder))
    target = Path(os.path.realpath(root.joinpath(*parts)))
    if not target.is_relative_to(root):
        raise ToolError(f"read_skill: {file!r} points outside the skill's folder")
    return target


def _read(path: Path, shown: str, max_bytes: int) -> str:
    try:
        if path.stat().st_size > max_bytes:
            raise ToolError(f"read_skill: {shown} is larger than {max_bytes} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ToolError(f"read_skill: {shown} does not exist") from exc
    except IsADirectoryError as exc:
        entries = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
        raise ToolError(f"read_skill: {shown} is a folder holding: {', '.join(entries)}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"read_skill: cannot read {shown}: {exc}") from exc
    if len(text) > MAX_SKILL_CHARS:
        return f"{text[:MAX_SKILL_CHARS]}\n[truncated: {len(text):,} characters in total]"
    return text
