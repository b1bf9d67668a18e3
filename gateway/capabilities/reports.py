"""Plain-data reports on skills and tool servers, for the command line (and anything else).

The CLI module only parses options and prints; what to report lives here, so the same facts
can feed another front end (the control panel) without going through a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.agent.prompt import tool_schema_chars
from gateway.agent.sessions import estimate_tokens
from gateway.capabilities.mcp_manager import McpManager
from gateway.capabilities.skill_catalog import SkillCatalog, SkillScan
from gateway.capabilities.skill_prompt import SkillSection, render_skill_section
from gateway.config.settings import Settings


@dataclass(frozen=True, slots=True)
class SkillReport:
    workspace: Path | None
    shared_dir: Path | None
    scan: SkillScan
    section: SkillSection

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"name": s.name, "source": s.source, "description": s.description, "path": str(s.path)}
            for s in self.scan.skills
        ]

    def problems(self) -> list[dict[str, str]]:
        return [
            {"path": str(p.path), "source": p.source, "problem": p.message}
            for p in self.scan.problems
        ]

    def notes(self) -> list[str]:
        return [
            f"shared skill {s.name} is replaced by the workspace's own" for s in self.scan.shadowed
        ]

    def cost(self) -> dict[str, int]:
        section = self.section
        return {
            "chars": section.chars,
            "tokens": estimate_tokens(section.text),
            "listed": section.listed,
            "names_only": section.names_only,
            "omitted": section.omitted,
        }


def skill_report(settings: Settings, workspace: Path | None) -> SkillReport:
    """What a private chat in `workspace` would get: skills, broken ones, the prompt cost."""
    scan = SkillCatalog(settings.skills, warn=False).scan(workspace)
    section = render_skill_section(
        scan.skills,
        max_chars=settings.skills.prompt_max_chars,
        line_max_chars=settings.skills.line_max_chars,
    )
    return SkillReport(workspace, settings.skills.shared_dir, scan, section)


async def mcp_report(settings: Settings) -> list[dict[str, Any]]:
    """Start every configured server once, list what it offers, stop it again."""
    manager = McpManager(settings.mcp)
    try:
        await manager.start()
        rows = []
        for status in manager.statuses():
            connection = manager.connections[status.name]
            tools = manager.tools_of(status.name)
            # A one-off check has no "next attempt": the reason alone (or nothing when ready).
            detail = "" if status.status == "ready" else (connection.last_error or status.detail)
            rows.append(
                {
                    "server": status.name,
                    "status": status.status,
                    "detail": detail,
                    "contexts": list(connection.settings.contexts),
                    "tools": [t.spec.name for t in tools],
                    "schema_chars": tool_schema_chars([t.spec for t in tools]),
                }
            )
        return rows
    finally:
        await manager.stop()
