"""Every configured MCP server: started with the gateway, offered per context, stopped with it.

Which servers a conversation may use is decided here from each server's `contexts` setting
(default: the owner's DMs and heartbeats; a group only when "group" is listed). A server that is
down keeps offering the tools it listed last (calls then fail with a clear tool error and the
schemas the model saw stay stable); a server that never started offers none.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools.base import Tool
from gateway.capabilities.contexts import ContextKind
from gateway.capabilities.mcp_budget import (
    DeferringRegistry,
    LoadToolsTool,
    SchemaPlan,
    plan_schemas,
)
from gateway.config.mcp import McpSettings
from gateway.ops.redaction import Redactor

if TYPE_CHECKING:  # the MCP SDK is imported only when a server is configured
    from gateway.capabilities.mcp_connection import McpConnection, ServerStatus, Sleep
    from gateway.capabilities.mcp_tools import McpTool

NO_PLAN = SchemaPlan((), (), 0)


@dataclass(frozen=True, slots=True)
class McpToolset:
    """The MCP part of one conversation's tools, and how the schema budget was spent."""

    tools: tuple[McpTool, ...] = ()
    plan: SchemaPlan = NO_PLAN
    deferred: dict[str, list[str]] | None = None  # server -> its tools' names, not advertised


def make_redactor(secrets: Sequence[str]) -> Callable[[str], str]:
    """Masks each secret wherever it appears: the one redaction (gateway/ops/redaction.py)."""
    return Redactor(secrets)


class McpManager:
    def __init__(
        self,
        settings: McpSettings,
        *,
        sleep: Sleep | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._monotonic = monotonic
        # A server's results and errors are masked with every server's secrets: one server may
        # well echo a token that was configured for another.
        redact = make_redactor(settings.secrets())
        self.connections: dict[str, McpConnection] = {}
        if any(server.enabled for server in settings.servers.values()):
            from gateway.capabilities.mcp_connection import McpConnection

            self.connections = {
                name: McpConnection(name, server, redact=redact, sleep=sleep, monotonic=monotonic)
                for name, server in settings.servers.items()
                if server.enabled
            }
        self._order = {name: index for index, name in enumerate(self.connections)}
        self._last_used: dict[str, float] = {}
        self._wrapped: dict[str, tuple[object, list[McpTool]]] = {}

    async def start(self) -> None:
        """Start every server; wait (each up to its start-up timeout) for the first attempts."""
        for connection in self.connections.values():
            connection.start()
        await asyncio.gather(
            *(
                c.wait_started(c.settings.startup_timeout_seconds + 1)
                for c in self.connections.values()
            )
        )

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def touch(self, server: str) -> None:
        """Record a use (a call or a load): recently used servers keep their schemas."""
        self._last_used[server] = self._monotonic()

    def servers_for(self, kind: ContextKind) -> list[str]:
        return [name for name, c in self.connections.items() if kind in c.settings.contexts]

    def toolset(self, kind: ContextKind) -> McpToolset:
        names = sorted(
            self.servers_for(kind),
            key=lambda n: (-self._last_used.get(n, float("-inf")), self._order[n]),
        )
        per_server = [(name, self.tools_of(name)) for name in names]
        per_server = [(name, tools) for name, tools in per_server if tools]
        plan = plan_schemas(
            [(n, sum(t.schema_chars for t in tools)) for n, tools in per_server],
            self.settings.tool_schema_max_chars,
        )
        tools = tuple(tool for _, server_tools in per_server for tool in server_tools)
        deferred = {
            n: [t.spec.name for t in tools_] for n, tools_ in per_server if n in plan.deferred
        }
        return McpToolset(tools, plan, deferred)

    def registry(self, base: Sequence[Tool], kind: ContextKind) -> DeferringRegistry | None:
        """`base` plus this context's MCP tools, or None when it gets none."""
        toolset = self.toolset(kind)
        if not toolset.tools:
            return None
        extra: list[Tool] = list(toolset.tools)
        load_tool = None
        if toolset.deferred:
            summaries: dict[str, list[ToolSpec]] = {
                server: [t.spec for t in toolset.tools if t.server == server]
                for server in toolset.deferred
            }
            load_tool = LoadToolsTool(summaries, self.touch)
            extra.append(load_tool)
        registry = DeferringRegistry([*base, *extra], toolset.deferred or {})
        if load_tool is not None:
            load_tool.bind(registry)
        return registry

    def statuses(self) -> list[ServerStatus]:
        return [c.snapshot() for c in self.connections.values()]

    def tools_of(self, name: str) -> list[McpTool]:
        """The server's tools as offered to a model (wrapped once per listing)."""
        connection = self.connections[name]
        listing = connection.tools
        cached = self._wrapped.get(name)
        if cached is None or cached[0] is not listing:
            from gateway.capabilities.mcp_tools import wrap_tools

            wrapped = wrap_tools(
                connection, listing, max_chars=self.settings.result_max_chars, on_use=self.touch
            )
            self._wrapped[name] = (listing, wrapped)
            return wrapped
        return cached[1]
