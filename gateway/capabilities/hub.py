"""`Capabilities`: the one object the Gateway holds for skills and MCP tool servers.

It answers three questions per conversation, all from the context kind (contexts.py):
which tools (the base registry plus read_skill and MCP tools), which prompt section (skills),
and what /context should say. It also owns the servers' lifecycle and their metrics.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.agent.tools.base import Tool
from gateway.agent.tools.registry import ToolRegistry
from gateway.capabilities.contexts import ContextKind, context_kind
from gateway.capabilities.mcp_manager import McpManager
from gateway.capabilities.skill_catalog import EMPTY_SCAN, SkillCatalog, SkillScan
from gateway.capabilities.skill_prompt import SkillSection, render_skill_section
from gateway.capabilities.skill_tool import ReadSkillTool
from gateway.config.settings import Settings

if TYPE_CHECKING:
    from gateway.capabilities.mcp_connection import Sleep

log = logging.getLogger(__name__)

# Skills are listed in the prompt of these kinds only: heartbeat turns use a light prompt.
# A group gets only its own area's skills (skill_catalog.py).
SKILL_KINDS: frozenset[ContextKind] = frozenset({"owner_dm", "people", "group"})


class Capabilities:
    def __init__(self, settings: Settings, *, sleep: Sleep | None = None) -> None:
        self.settings = settings
        self.skills = SkillCatalog(settings.skills)
        self.mcp = McpManager(settings.mcp, sleep=sleep)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        await self.mcp.start()

    async def stop(self) -> None:
        await self.mcp.stop()

    def kind(self, *, private: bool, person_id: str, heartbeat: bool = False) -> ContextKind:
        return context_kind(
            private=private, person_id=person_id, owner=self.settings.owner, heartbeat=heartbeat
        )

    # -- per conversation --------------------------------------------------------------------

    def skill_scan(self, workspace: Path, kind: ContextKind, area: str = "") -> SkillScan:
        if kind not in SKILL_KINDS:
            return EMPTY_SCAN
        return self.skills.for_context(workspace, kind, area)

    def skill_section(self, workspace: Path, kind: ContextKind, area: str = "") -> SkillSection:
        config = self.settings.skills
        scan = self.skill_scan(workspace, kind, area)
        return render_skill_section(
            scan.skills,
            max_chars=config.prompt_max_chars,
            line_max_chars=config.line_max_chars,
            root=scan.root,
        )

    def registry(
        self, base: ToolRegistry, kind: ContextKind, workspace: Path, area: str = ""
    ) -> ToolRegistry:
        """`base` plus this context's capability tools; `base` itself when there are none."""
        extra: list[Tool] = []
        scan = self.skill_scan(workspace, kind, area)
        if any(skill.source == "shared" for skill in scan.skills):
            extra.append(ReadSkillTool(lambda ctx: self.skill_scan(ctx.workspace, kind, area)))
        tools: Sequence[Tool] = [*base.tools(), *extra]
        with_mcp = self.mcp.registry(tools, kind)
        if with_mcp is not None:
            return with_mcp
        return ToolRegistry(tools) if extra else base

    @staticmethod
    def metric_labels(registry: ToolRegistry) -> dict[str, str]:
        """Tool name -> its `tool` label in /metrics: built-in tools by name, MCP tools by
        their configured server (a server's own names are never label values)."""
        # mcp_tools loads the MCP SDK (seconds of CPU): neither the first poll nor the first
        # answer may wait for it. An MCP tool exists only once that module was imported (by
        # the connections to configured servers), so without it every tool is built in.
        mcp_tools = sys.modules.get("gateway.capabilities.mcp_tools")
        if mcp_tools is None:
            return {tool.spec.name: tool.spec.name for tool in registry.tools()}
        return {
            tool.spec.name: mcp_tools.metric_label(tool.server)
            if isinstance(tool, mcp_tools.McpTool)
            else tool.spec.name
            for tool in registry.tools()
        }

    def context_lines(self, workspace: Path, kind: ContextKind, area: str = "") -> list[str]:
        """What /context shows about skills and tool servers in this conversation."""
        lines: list[str] = []
        scan = self.skill_scan(workspace, kind, area)
        section = self.skill_section(workspace, kind, area)
        if kind not in SKILL_KINDS or (kind == "group" and not scan.skills and not scan.problems):
            where = f" (a group's own go in {scan.root}/)" if kind == "group" and area else ""
            lines.append(f"Skills: none in this chat{where}")
        else:
            detail = f"{section.listed} listed"
            if section.names_only or section.omitted:
                detail += f", {section.names_only} by name only, {section.omitted} not shown"
            lines.append(
                f"Skills: {len(scan.skills)} ({detail}; {section.chars:,} of "
                f"{self.settings.skills.prompt_max_chars:,} chars)"
            )
            lines += [
                f"  {s.name}{' (shared)' if s.source == 'shared' else ''}" for s in scan.skills
            ]
            lines += [f"  broken, skipped: {_short(p.path)}: {p.message}" for p in scan.problems]
        allowed = set(self.mcp.servers_for(kind))
        if not self.mcp.connections:
            return lines
        if not allowed:
            lines.append("Tool servers: none allowed in this chat")
            return lines
        toolset = self.mcp.toolset(kind)
        lines.append(
            f"Tool servers: {len(allowed)} ({toolset.plan.chars:,} of "
            f"{self.settings.mcp.tool_schema_max_chars:,} chars of schemas)"
        )
        for status in self.mcp.statuses():
            if status.name not in allowed:
                continue
            where = "summarised, loaded on demand" if status.name in toolset.plan.deferred else ""
            lines.append(
                f"  {status.name}: {status.status}, {status.detail}"
                + (f" ({where})" if where else "")
            )
        return lines

    def readiness(self) -> dict[str, Any]:
        """Per server, for /readyz (an optional tool server never makes the gateway unready)."""
        return {
            s.name: {"ready": s.status == "ready", "detail": s.detail} for s in self.mcp.statuses()
        }

    def register_metrics(self, registry: Any) -> None:
        """MCP gauges and counters on the gateway's metrics registry, read at scrape time."""
        up = registry.gauge(
            "clawgate_mcp_server_up", "1 if the MCP server is connected.", ["server"]
        )
        up.collect_with(
            lambda: {(s.name,): float(s.status == "ready") for s in self.mcp.statuses()}
        )
        events = registry.counter(
            "clawgate_mcp_events_total",
            "MCP calls, errors, timeouts, crashes, starts, failed starts, restarts per server.",
            ["server", "event"],
        )
        events.collect_with(self._event_counts)

    def _event_counts(self) -> dict[tuple[str, ...], float]:
        counts: dict[tuple[str, ...], float] = {}
        for status in self.mcp.statuses():
            for event, value in vars(status.counters).items():
                counts[(status.name, event)] = float(value)
        return counts


def _short(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[-3:]) if len(parts) >= 3 else str(path)
