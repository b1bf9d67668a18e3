"""What a turn is given: its tools, context files, system prompt, tool context and budget.

One object for every kind of turn (a DM or group turn, a slash command looking at a session,
a heartbeat, a scheduled task): it implements `PromptParts` (gateway/pipeline/commands.py) for
the turn runner and the commands, so the Gateway itself only moves messages. Privacy is the
route's: tools that reach private memory (recall, the schedule tools) exist only in the
private registry, and a session that is not the owner's DM never gets it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from channels.base import Channel
from gateway.agent.context_files import ContextFile, ContextFileLoader
from gateway.agent.conversation import SystemPrompt
from gateway.agent.metrics import GatewayMetrics
from gateway.agent.prompt import build_system_prompt, speaker_line
from gateway.agent.providers import ModelRouter
from gateway.agent.tools import Tool, ToolContext, ToolRegistry, file_tools
from gateway.agent.tools.corrections import correction_tools
from gateway.agent.tools.quota import DiskUsage, Quotas, TurnBudget
from gateway.agent.tools.send_file import SendFileTool
from gateway.capabilities.hub import Capabilities
from gateway.clock import Clock
from gateway.config.settings import Settings
from gateway.ops.redaction import Redactor
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.files_out import ChatOutbox
from gateway.pipeline.routing import Route

if TYPE_CHECKING:
    from gateway.capabilities.contexts import ContextKind
    from memory.service import MemoryService


def base_tools() -> list[Tool]:
    """The tools of every chat: the file tools and send_file."""
    return [*file_tools(), SendFileTool()]


class TurnSetup:
    """Two tool registries (shared, private) and everything else a turn's request is made of."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        *,
        channels: Mapping[str, Channel],
        delivery: Delivery,
        metrics: GatewayMetrics,
        models: ModelRouter,
        capabilities: Capabilities,
        redactor: Redactor,
        private_tools: Sequence[Tool] = (),
        shared_tools: Sequence[Tool] = (),
        memory: MemoryService | None = None,
        offered: Mapping[str, Callable[[str], bool]] | None = None,
    ) -> None:
        """`offered`: tool name -> `offered(person_id)`, the people whose private contexts
        get that tool (exec: the owner and `[exec] people`); the others' registries leave it
        out. A tool not named there is everyone's."""
        self.settings, self.clock, self._zone = settings, clock, settings.zone()
        self._offered = dict(offered or {})
        self.channels, self.delivery, self.metrics = channels, delivery, metrics
        self.models, self.capabilities, self.redactor = models, capabilities, redactor
        self.loader = ContextFileLoader(
            settings.prompt.file_max_chars, settings.prompt.total_max_chars
        )
        tools = settings.tools
        self.quotas = Quotas(
            tools.workspace_max_bytes,
            tools.group_area_max_bytes,
            tools.turn_write_max_bytes,
            tools.step_max_tool_calls,
            tools.turn_max_tool_calls,
        )
        self.disk_usage = DiskUsage()  # one per gateway: every turn's view of disk use
        # Corrections (memory_find, memory_correct) need no index: every private context has
        # them; the memory tools (recall, say) when there is a memory service.
        private = [*base_tools(), *correction_tools(self.today), *private_tools]
        if memory is not None:
            from gateway.agent.tools.memory_tools import memory_tools

            private.extend(memory_tools(memory, on_search=metrics.observe_search))
        self.shared_tools = ToolRegistry([*base_tools(), *shared_tools], redact=redactor)
        self.private_tools = ToolRegistry(private, redact=redactor)
        metrics.register_tools([*self.shared_tools.names(), *self.private_tools.names()])

    def tools_for(self, route: Route) -> ToolRegistry:
        base = self.private_tools if route.private else self.shared_tools
        base = self._for_person(base, route.person_id)
        # capabilities: read_skill and MCP tools where the context allows them
        return self._guarded(
            self.capabilities.registry(
                base, self._capability_kind(route), route.workspace, route.access.area
            )
        )

    def heartbeat_tools(self, person_id: str, workspace: Path) -> ToolRegistry:
        """A heartbeat turn's tools: the person's private ones, plus MCP servers allowing it."""
        kind = self.capabilities.kind(private=True, person_id=person_id, heartbeat=True)
        base = self._for_person(self.private_tools, person_id)
        return self._guarded(self.capabilities.registry(base, kind, workspace))

    def _for_person(self, registry: ToolRegistry, person_id: str) -> ToolRegistry:
        """`registry` less the tools not offered to `person_id` (`offered`)."""
        hidden = {
            name
            for name, offered in self._offered.items()
            if name in registry and not offered(person_id)
        }
        if not hidden:
            return registry
        return ToolRegistry(
            [t for t in registry.tools() if t.spec.name not in hidden], redact=self.redactor
        )

    def _guarded(self, registry: ToolRegistry) -> ToolRegistry:
        """Every registry a turn uses masks secrets in results, and its tools are the known
        label values of /metrics (anything else a model names counts as `other`; an MCP
        tool counts under its configured server's name)."""
        self.metrics.register_tools(self.capabilities.metric_labels(registry))
        return registry.redact_with(self.redactor)

    # -- the tool context and budget ---------------------------------------------------------

    def tool_context(self, route: Route) -> ToolContext:
        """A turn's tool context: its budget (the quotas' share of this turn) is fresh, and its
        outbox reaches the chat the turn answers (send_file). A private route is the owner's
        own DM, so the owner is present (`attended`: memory/layout.py, group-readable files)."""
        channel = self.channels.get(route.channel)
        outbox = None
        if channel is not None and route.chat_id:
            outbox = ChatOutbox(
                self.delivery, route, max_bytes=channel.max_upload_bytes, durable=channel.durable
            )
        return ToolContext(
            route.workspace,
            route.session_key,
            route.private,
            self.settings.tools.max_file_bytes,
            area=route.access.area,
            outbox=outbox,
            budget=self.turn_budget(),
            attended=route.private,
        )

    def turn_budget(self) -> TurnBudget:
        """The quotas for one turn (a DM, group, heartbeat or scheduled task turn)."""
        return TurnBudget(self.quotas, self.disk_usage, self.metrics)

    # -- the prompt --------------------------------------------------------------------------

    def capability_lines(self, route: Route) -> list[str]:
        """/context lines about skills and tool servers."""
        return self.capabilities.context_lines(
            route.workspace, self._capability_kind(route), route.access.area
        )

    def _capability_kind(self, route: Route) -> ContextKind:
        return self.capabilities.kind(private=route.private, person_id=route.person_id)

    def today(self, person_id: str | None = None) -> date:
        """Today in the person's zone (their note of the day), or the gateway's (a
        correction's "superseded" date)."""
        zone = self._zone if person_id is None else self.settings.zone_of(person_id)
        return self.clock.now().astimezone(zone).date()

    def context_files(self, route: Route) -> list[ContextFile]:
        return self.loader.load(
            route.workspace,
            private=route.private,
            today=self.today(route.person_id),
            area=route.access.area,
        )

    def light_files(
        self, workspace: Path, *, today: date, names: Sequence[str]
    ) -> list[ContextFile]:
        """The named files of a private light turn (heartbeat, scheduled task)."""
        return self.loader.load(workspace, private=True, today=today, names=names)

    def system_prompt(self, route: Route, files: list[ContextFile]) -> SystemPrompt:
        kind = "a direct message with the workspace owner" if route.private else "a group chat"
        model = self.models.for_person(route.person_id)
        run_info = (
            f"Channel: {route.channel}, {kind}. Session: {route.session_key}. "
            f"Model: {model.name}/{model.model}."
        )
        if not route.private:
            run_info += "\n" + speaker_line(
                route.sender_name, route.sender_id, route.sender_is_owner
            )
        # The person's own clock: "remind me at 9" and "what day is it" are theirs.
        now = self.clock.now().astimezone(self.settings.zone_of(route.person_id))
        # capabilities: the skills section (names and one-line descriptions)
        skills = self.capabilities.skill_section(
            route.workspace, self._capability_kind(route), route.access.area
        )
        return build_system_prompt(
            files,
            private=route.private,
            now=now,
            run_info=run_info,
            area=route.access.area,
            sections=[skills.text],
        )
