"""The tool-schema budget: recently used servers keep their schemas, the rest are summarised in
one line each and loaded on demand. No server processes: listings are set directly."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from gateway.agent.conversation import ToolSpec
from gateway.agent.prompt import tool_schema_chars
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.capabilities.mcp_budget import LOAD_TOOL, plan_schemas
from gateway.capabilities.mcp_manager import McpManager
from gateway.config.mcp import McpSettings

CTX = ToolContext(Path("."), "owner:dm", True)


def spec(name: str, size: int) -> ToolSpec:
    return ToolSpec(name, "d" * size, {"type": "object"})


def test_plan_takes_servers_in_order_greedily_within_the_budget():
    servers = [("a", 120), ("big", 1_000), ("c", 150)]
    plan = plan_schemas(servers, budget=300)
    assert plan.loaded == ("a", "c") and plan.deferred == ("big",) and plan.chars == 270
    assert plan_schemas(servers, budget=0).loaded == ()


def listing(*names: str, size: int = 200) -> list[types.Tool]:
    return [
        types.Tool(
            name=n,
            description="x" * size,
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        )
        for n in names
    ]


def manager(budget: int, clock: list[float]) -> McpManager:
    servers = {name: {"command": "unused"} for name in ("mail", "calendar", "web")}
    mgr = McpManager(
        McpSettings(servers=servers, tool_schema_max_chars=budget), monotonic=lambda: clock[0]
    )
    mgr.connections["mail"].tools = listing("search", "read", "send")
    mgr.connections["calendar"].tools = listing("list_events", "create_event")
    mgr.connections["web"].tools = listing("fetch")
    return mgr


async def test_over_budget_servers_are_summarised_then_loaded_on_demand():
    clock = [100.0]
    mgr = manager(budget=1_200, clock=clock)  # each tool ~280 chars: four of the six fit
    registry = mgr.registry([], "owner_dm")
    assert registry is not None
    advertised = [s.name for s in registry.specs()]
    # Never used: configuration order. mail (3 tools) fits, calendar (2) does not, web (1) does.
    assert advertised == ["mail__search", "mail__read", "mail__send", "web__fetch", LOAD_TOOL]
    load = next(s for s in registry.specs() if s.name == LOAD_TOOL)
    assert "- calendar: 2 tools (list_events, create_event)" in load.description
    assert load.parameters["properties"]["server"]["enum"] == ["calendar"]
    assert tool_schema_chars(registry.specs()[:-1]) <= 1_200

    loaded = await registry.run(LOAD_TOOL, {"server": "calendar"}, CTX)
    assert not loaded.is_error and "calendar__list_events" in loaded.text
    assert "calendar__create_event" in registry.names()
    now = [s.name for s in registry.specs()]
    assert {"calendar__list_events", "calendar__create_event"} <= set(now)
    assert LOAD_TOOL not in now  # nothing left to load
    again = await registry.run(LOAD_TOOL, {"server": "calendar"}, CTX)
    assert again.is_error and "nothing to load" in again.text

    # Next turn: calendar is the most recently used, so it is advertised and mail is not.
    clock[0] = 200.0
    nxt = [s.name for s in mgr.registry([], "owner_dm").specs()]  # type: ignore[union-attr]
    assert nxt[:2] == ["calendar__list_events", "calendar__create_event"]
    assert "mail__search" not in nxt and LOAD_TOOL in nxt


async def test_a_call_counts_as_use_and_everything_fits_a_big_budget():
    clock = [1.0]
    mgr = manager(budget=1_000, clock=clock)
    mgr.touch("web")
    clock[0] = 2.0
    mgr.touch("calendar")
    order = [s.name for s in mgr.registry([], "owner_dm").specs()]  # type: ignore[union-attr]
    assert order[:3] == ["calendar__list_events", "calendar__create_event", "web__fetch"]
    roomy = manager(budget=100_000, clock=clock).registry([], "owner_dm")
    assert roomy is not None and LOAD_TOOL not in roomy.names() and len(roomy.specs()) == 6


async def test_load_tool_refuses_unknown_servers():
    registry = manager(budget=0, clock=[0.0]).registry([], "owner_dm")
    assert registry is not None
    assert registry.specs()[0].name == LOAD_TOOL  # nothing else fits in a zero budget
    with pytest.raises(ToolError):
        await registry.tools()[-1].run({"server": "nope"}, CTX)
    outcome = await registry.run(LOAD_TOOL, {}, CTX)
    assert outcome.is_error and "'server' (one of 'mail', 'calendar', 'web')" in outcome.text


def test_unusable_listings_are_skipped_not_sent():
    mgr = manager(budget=100_000, clock=[0.0])
    mgr.connections["web"].tools = [
        types.Tool(name="ok", input_schema={"type": "object"}),
        types.Tool(name="weird name!", input_schema={"type": "object"}),
        types.Tool(name="weird_name_", input_schema={"type": "object"}),  # same once cleaned
        types.Tool(name="array", input_schema={"type": "array"}),
    ]
    names = mgr.registry([], "owner_dm").names()  # type: ignore[union-attr]
    assert [n for n in names if n.startswith("web__")] == ["web__ok", "web__weird_name_"]
