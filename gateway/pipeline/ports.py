"""What each part built around the gateway is given: a narrow view of the gateway's parts.

The heartbeat host, the scheduler's host, tidying, the panel and the health server are given
the parts themselves (gateway/pipeline/parts.py `GatewayParts`), typed by one of these
protocols, never the Gateway: the Gateway only moves messages. Each protocol names the parts
one consumer may use (read-only); mypy checks that `GatewayParts` has them wherever the
assembly hands the parts over, and tests/gateway/assembly/test_ports.py checks that these
consumers (and cli/) never reach the Gateway, also through an alias. A test can give a
consumer any object with those attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from channels.base import Channel
    from gateway.agent.metrics import GatewayMetrics
    from gateway.agent.providers import ModelRouter
    from gateway.agent.providers.base import Provider
    from gateway.agent.sessions import SessionStore
    from gateway.agent.tools.schedule_tools import ScheduleDesk
    from gateway.capabilities.hub import Capabilities
    from gateway.clock import Clock
    from gateway.config.settings import Settings
    from gateway.ops.redaction import Redactor
    from gateway.ops.versioning import Versioning
    from gateway.pipeline.budgets import Budgets
    from gateway.pipeline.commands import CommandContexts
    from gateway.pipeline.delivery import Delivery
    from gateway.pipeline.dm_routes import DmRoutes
    from gateway.pipeline.lanes import Lanes
    from gateway.pipeline.presses import Presses
    from gateway.pipeline.turn_setup import TurnSetup
    from gateway.stores.state import StateDB
    from gateway.stores.usage import UsageLedger
    from memory.service import MemoryService


class Configured(Protocol):
    """The settings and the clock: what every part around the gateway reads."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...


class TidyParts(Configured, Protocol):
    """What tidying (gateway/features/tidying.py) uses: one model call, a commit, the DM
    lane, its counter."""

    @property
    def lanes(self) -> Lanes: ...

    @property
    def metered(self) -> Provider: ...

    @property
    def versioning(self) -> Versioning: ...

    @property
    def metrics(self) -> GatewayMetrics: ...


class BackgroundParts(TidyParts, Protocol):
    """A turn no one is chatting in (a heartbeat, a scheduled task) and its delivery: the
    person's sessions and DM route, the outbox, the model, the light turn's files, tools and
    budget (`setup`), versioning, the counters. What gateway/features/heartbeat_host.py and
    gateway/features/scheduling.py use. `metered` counts every call as the person's."""

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def routes(self) -> DmRoutes: ...

    @property
    def delivery(self) -> Delivery: ...

    @property
    def models(self) -> ModelRouter: ...

    @property
    def setup(self) -> TurnSetup: ...


class TaskParts(BackgroundParts, Protocol):
    """What background tasks (gateway/features/tasks/) use: a background turn's parts, the
    channels a report goes to, the price table (a task's cost), the redactor of its
    tools' results and the exec feature's presses (a task resumed at start waits until the
    sandbox's probe has said whether its commands can run)."""

    @property
    def channels(self) -> Mapping[str, Channel]: ...

    @property
    def usage(self) -> UsageLedger: ...

    @property
    def redactor(self) -> Redactor: ...

    @property
    def presses(self) -> Presses | None: ...


class TaskDeskPort(Protocol):
    """The tasks' desk as the parts hold it (gateway/features/tasks/desk.py `TaskDesk`): the
    assembly gives it its runner; nothing in the message path calls it."""

    @property
    def running(self) -> bool: ...


class ReadinessParts(Protocol):
    """What /readyz reports on (gateway/pipeline/health.py): the state database, the channels,
    the lanes' depth and the MCP servers."""

    @property
    def state(self) -> StateDB: ...

    @property
    def channels(self) -> Mapping[str, Channel]: ...

    @property
    def lanes(self) -> Lanes: ...

    @property
    def capabilities(self) -> Capabilities: ...


class HealthParts(ReadinessParts, Protocol):
    """What the health server uses: readiness, the /metrics registry, the workspaces root."""

    @property
    def settings(self) -> Settings: ...

    @property
    def metrics(self) -> GatewayMetrics: ...


class PanelParts(BackgroundParts, ReadinessParts, Protocol):
    """What the panel (gateway/panel/host.py) uses: a heartbeat's parts (its "run now"), the
    state database and versioning the CLI commands use too, usage and budgets, a session
    command's context, memory search and the reminders desk when on, and readiness."""

    @property
    def usage(self) -> UsageLedger: ...

    @property
    def budgets(self) -> Budgets: ...

    @property
    def commands(self) -> CommandContexts: ...

    @property
    def memory(self) -> MemoryService | None: ...

    @property
    def schedule_desk(self) -> ScheduleDesk | None: ...
