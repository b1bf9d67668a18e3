"""Narrow views of the Gateway for the parts built around it (gateway/assembly/, the panel).

Each protocol names what one consumer may do with the running gateway, as methods: the
heartbeat host runs a light turn and delivers into the DM lane; the scheduler does the same
and keeps a desk; tidying calls the model and writes in the DM lane; the web tools add tools
and a secret; the panel reads state and versioning and runs session commands. The Gateway
implements every one of them (mypy checks it wherever the assembly hands the gateway over),
so a consumer depends on a few named operations, not on the Gateway's parts and their
attributes, and a test can give it anything that has them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gateway.agent.context_files import ContextFile
    from gateway.agent.metrics import GatewayMetrics, Registry
    from gateway.agent.providers.base import ModelInfo, Provider
    from gateway.agent.scope import UsageScope
    from gateway.agent.sessions import Session, SessionStore
    from gateway.agent.tools import Tool, ToolRegistry
    from gateway.agent.tools.quota import TurnBudget
    from gateway.agent.tools.schedule_tools import ScheduleBook
    from gateway.clock import Clock
    from gateway.config.settings import Settings
    from gateway.ops.state import DmRoute, StateDB
    from gateway.ops.usage import UsageLedger
    from gateway.ops.versioning import Versioning
    from gateway.pipeline.budgets import CapStatus
    from gateway.pipeline.commands import CommandContext
    from gateway.pipeline.delivery import Outcome
    from gateway.pipeline.lanes import Job
    from gateway.pipeline.routing import Route
    from memory.service import MemoryService


class Configured(Protocol):
    """The settings and the clock: what every part around the gateway reads."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...


class Lanes(Configured, Protocol):
    """Work in a session's lane: after its running turn, never beside one."""

    def run_in_lane(self, key: str, job: Job) -> asyncio.Future[None]: ...

    def lane_busy(self, key: str) -> bool: ...


class Conversations(Lanes, Protocol):
    """A person's sessions and chats from outside a turn: open a session, find their DM,
    send through the outbox (retried until sent; `key` makes it exactly-once)."""

    async def session(self, workspace: Path, key: str) -> Session: ...

    async def last_dm_route(self, person_id: str) -> DmRoute | None: ...

    def runs_channel(self, name: str) -> bool: ...

    async def deliver(self, channel: str, chat_id: str, text: str, *,
                      key: str | None = None) -> asyncio.Future[Outcome]: ...


class Committing(Protocol):
    """A git commit of what changed in a workspace (gateway/ops/versioning.py)."""

    async def commit(self, workspace: Path, reason: str, *, session: str = "",
                     note: str = "") -> str | None: ...


class BackgroundTurns(Configured, Committing, Protocol):
    """A turn no one is chatting in (a heartbeat, a scheduled task): its model, its files,
    its tools and budget. `metered` counts every call as the person's."""

    @property
    def metered(self) -> Provider: ...

    def model_for(self, scope: UsageScope) -> ModelInfo: ...

    def light_files(self, workspace: Path, *, today: date,
                    names: Sequence[str]) -> list[ContextFile]: ...

    def heartbeat_tools(self, person_id: str, workspace: Path) -> ToolRegistry: ...

    def turn_budget(self) -> TurnBudget: ...


class HeartbeatGateway(Conversations, BackgroundTurns, Protocol):
    """What gateway/features/heartbeat_host.py needs."""

    def count_heartbeat(self, status: str) -> None: ...


class ScheduleGateway(Conversations, BackgroundTurns, Protocol):
    """What gateway/features/scheduling.py needs: a heartbeat's, plus the desk's place."""

    @property
    def registry(self) -> Registry: ...

    async def stored_dm_route(self, person_id: str) -> DmRoute | None: ...

    def channel_names(self) -> frozenset[str]: ...

    def add_private_tools(self, tools: Sequence[Tool]) -> None: ...

    def use_schedules(self, desk: ScheduleBook) -> None: ...


class TidyGateway(Lanes, Committing, Protocol):
    """What gateway/features/tidying.py needs: one model call, a commit, the DM lane."""

    @property
    def metered(self) -> Provider: ...

    @property
    def registry(self) -> Registry: ...


class ToolHost(Configured, Protocol):
    """What gateway/assembly/web.py needs: add tools and a secret to mask; sessions read."""

    @property
    def sessions(self) -> SessionStore: ...

    def add_secret(self, secret: str | None) -> None: ...

    def add_private_tools(self, tools: Sequence[Tool]) -> None: ...

    def add_shared_tools(self, tools: Sequence[Tool]) -> None: ...


class PanelGateway(HeartbeatGateway, Protocol):
    """What the panel (gateway/panel/host.py) needs: the state database and versioning the
    CLI commands use too, the counters, a session command in its lane, memory search and the
    reminders desk when on, and a heartbeat right away."""

    @property
    def state(self) -> StateDB: ...

    @property
    def versioning(self) -> Versioning: ...

    @property
    def metrics(self) -> GatewayMetrics: ...

    @property
    def usage(self) -> UsageLedger: ...

    @property
    def memory(self) -> MemoryService | None: ...

    @property
    def schedules(self) -> ScheduleBook | None: ...

    def channel_names(self) -> frozenset[str]: ...

    def command_context(self, route: Route, args: str = "") -> CommandContext: ...

    async def budget_status(self, person: str) -> list[CapStatus]: ...

    async def readiness(self, started: bool = True) -> dict[str, Any]: ...
