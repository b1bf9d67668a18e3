"""The tool-schema budget: which servers' schemas ride along with every request.

Every request carries every tool's schema, so sixty tools can cost more than the conversation.
The prompt carries at most `mcp.tool_schema_max_chars` characters of MCP schemas: servers are
taken most recently used first (never-used ones in configuration order) and each goes in whole
if it still fits (greedy, so one oversized server does not crowd out smaller ones behind it).
The rest are summarised one line per server in the description of `mcp_load_tools`, which the
model calls to get a server's tools; they are then sent from the next step of the same turn on
(the agent loop re-reads the specs every round) and, being now the most recently used, stay in
the next turns. We chose whole servers rather than single tools because a server's tools are
used together (list, then read, then update), and recency rather than a fixed priority because
it follows what the person is doing now without configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import Tool, ToolContext, ToolError
from gateway.agent.tools.registry import ToolRegistry

LOAD_TOOL = "mcp_load_tools"
MAX_NAMES_IN_SUMMARY = 6


@dataclass(frozen=True, slots=True)
class SchemaPlan:
    loaded: tuple[str, ...]  # servers whose schemas are sent
    deferred: tuple[str, ...]  # servers summarised, loaded on demand
    chars: int  # schema characters of the loaded servers


def plan_schemas(servers: Sequence[tuple[str, int]], budget: int) -> SchemaPlan:
    """`servers` as (name, schema chars) in priority order (most recently used first) -> what
    fits in `budget`. Schema chars are measured like the request overhead (tool_schema_chars)."""
    loaded: list[str] = []
    deferred: list[str] = []
    used = 0
    for name, cost in servers:
        if used + cost <= budget:
            loaded.append(name)
            used += cost
        else:
            deferred.append(name)
    return SchemaPlan(tuple(loaded), tuple(deferred), used)


class DeferringRegistry(ToolRegistry):
    """A registry whose deferred tools are callable but not advertised until loaded."""

    def __init__(self, tools: Iterable[Tool], deferred: Mapping[str, Sequence[str]]) -> None:
        super().__init__(tools)
        self._deferred = {server: list(names) for server, names in deferred.items()}

    def specs(self) -> list[ToolSpec]:
        hidden = {name for names in self._deferred.values() for name in names}
        if not self._deferred:
            hidden.add(LOAD_TOOL)  # everything is loaded: the load tool has nothing to offer
        return [spec for spec in super().specs() if spec.name not in hidden]

    def deferred_servers(self) -> list[str]:
        return list(self._deferred)

    def load(self, server: str) -> list[str]:
        return self._deferred.pop(server, [])


class LoadToolsTool:
    """`mcp_load_tools(server)`: advertise a summarised server's tools from the next step on."""

    def __init__(
        self, summaries: Mapping[str, Sequence[ToolSpec]], touch: Callable[[str], None]
    ) -> None:
        self._touch = touch
        self._registry: DeferringRegistry | None = None
        lines = [summary_line(server, specs) for server, specs in summaries.items()]
        self.spec = ToolSpec(
            name=LOAD_TOOL,
            description="Some tool servers' tools are not loaded, to keep requests small. Load "
            "one server's tools when the task needs them; they are callable from your next "
            "step. Not loaded:\n" + "\n".join(lines),
            parameters={
                "type": "object",
                "properties": {"server": {"type": "string", "enum": list(summaries)}},
                "required": ["server"],
                "additionalProperties": False,
            },
        )

    def bind(self, registry: DeferringRegistry) -> None:
        self._registry = registry

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        server = args["server"]
        if self._registry is None:
            raise ToolError(f"{LOAD_TOOL} is not ready")
        names = self._registry.load(server)
        if not names:
            left = ", ".join(self._registry.deferred_servers()) or "none"
            raise ToolError(
                f"{LOAD_TOOL}: {server!r} has nothing to load (still unloaded: "
                f"{left}); its tools may already be available"
            )
        self._touch(server)
        return f"Loaded {len(names)} tools of {server}: {', '.join(names)}. Call them now."


def summary_line(server: str, specs: Sequence[ToolSpec]) -> str:
    short = [spec.name.split("__", 1)[-1] for spec in specs]
    shown = ", ".join(short[:MAX_NAMES_IN_SUMMARY])
    extra = len(short) - MAX_NAMES_IN_SUMMARY
    more = f", +{extra} more" if extra > 0 else ""
    return f"- {server}: {len(specs)} tools ({shown}{more})"
