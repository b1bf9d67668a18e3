"""The one place that builds a running gateway from settings, and its lifecycle.

`clawgate run`, `clawgate chat` and `clawgate heartbeat run` all go through `GatewayApp`;
they differ only in their `Plan` (which channels, whether heartbeats and the health server
run). The app owns every resource with an `AsyncExitStack`: each part's setup is followed at
once by registering its teardown, so parts come up in order, go down in reverse, and a
failure half-way unwinds exactly what had started (no half-open database keeping the process
alive, no health port left bound).

Built in dependency order, each part given what it needs in its constructor (nothing is
attached afterwards; `assemble_parts`): clock, provider, state database, channels and their
access policy, redactor, sessions, the web tools, the memory service, the schedule desk and
its scheduler (not started) -> the gateway's parts (gateway/pipeline/parts.py, with those
tools, memory and desk) -> the services around the gateway, given the parts (heartbeats, the
scheduler's host, tidying) -> the Gateway, told when a workspace is new (a new person's
heartbeat timer starts at once). The scheduler gets its host when it starts: its host's turns
use the schedule tools, whose desk tells the scheduler about changes (the one cycle).

Order up: the workspaces root's gateway lock (`clawgate run` only: a second gateway on the
same data would answer every message twice; gateway/assembly/instance_lock.py) -> the health port
is reserved (a busy port fails before anything connects) -> gateway (state database, memory,
provider, channels, resumed messages): the channels poll from here -> the provider SDK starts
loading in a worker thread -> heartbeat service, scheduler and further services started
(timers, light: a reminder due at start is sent on time) -> a wait for the SDK and for the
messages that were waiting at start to be answered (up to `FIRST_ANSWERS_WAIT_SECONDS` in
all), so that the HTTP servers' imports do not slow the first answers -> health server served
-> web panel. Down: the reverse; the gateway's own stop gives running turns
`stop_grace_seconds`, then leaves them pending for next start.

Start-up time is measured by bench/startup.py: nothing the first poll does not need is
imported before it (tests/gateway/assembly/test_startup_imports.py keeps it so).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gateway.config.settings import Settings

if TYPE_CHECKING:
    from channels.base import Channel
    from gateway.agent.providers.base import Provider
    from gateway.clock import Clock
    from gateway.pipeline.gateway import Gateway
    from gateway.pipeline.health import HealthServer
    from gateway.pipeline.parts import GatewayParts

log = logging.getLogger(__name__)

ChannelSet = Literal["platforms", "terminal", "none"]
# How long the parts after the channels wait for the provider SDK to load and the first turns
# to finish before starting anyway: their imports would compete with the SDK's for the CPU and
# block the event loop while a turn wants it.
FIRST_ANSWERS_WAIT_SECONDS = 10.0
IDLE_CHECK_SECONDS = 0.02


class StartupError(Exception):
    """Start-up failed for a reason the person can fix; `str()` names it and the setting."""

    exit_code = 2


class AlreadyRunningError(StartupError):
    """Another gateway serves this workspaces root: nothing to fix here, so not a usage error
    (exit 1), and starting a second one would answer every message twice."""

    exit_code = 1


class Service(Protocol):
    """A long-running part started after the gateway (heartbeats, scheduler, panel, MCP)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# A service around the gateway, made from its parts (before the Gateway itself).
ServiceFactory = Callable[["GatewayParts"], Service]


@dataclass(frozen=True, slots=True)
class Plan:
    """What to run. `channels`: the configured platforms, the terminal chat, or none (a
    gateway that only answers internal calls, e.g. `heartbeat run`)."""

    channels: ChannelSet = "platforms"
    heartbeats: bool = True
    health: bool = True
    memory: bool = True
    scheduler: bool = True  # the schedule desk (its tools, /reminders) and the scheduler
    tasks: bool = True  # background tasks (start_task, the runner), if [tasks] enabled
    panel: bool = True  # the web control panel, if [panel] enabled
    # Hold the workspaces root's gateway lock: one gateway polls the bots and runs the turns.
    exclusive: bool = True


RUN = Plan()
# The terminal chat is the owner's DM: their heartbeat alerts appear in it, and a person at a
# terminal gets the web panel too (`clawgate chat` picks CHAT_AT_A_TERMINAL; piped input is a
# script, not a person, and gets none). Neither takes the lock: both work beside a running
# `clawgate run`, as before (whose panel, on the same port, then serves both).
CHAT = Plan(channels="terminal", heartbeats=True, health=False, panel=False, exclusive=False)
CHAT_AT_A_TERMINAL = Plan(
    channels="terminal", heartbeats=True, health=False, panel=True, exclusive=False
)
ONE_BEAT = Plan(
    channels="none",
    heartbeats=False,
    health=False,
    scheduler=False,
    tasks=False,
    panel=False,
    exclusive=False,
)


def assemble_parts(
    settings: Settings,
    plan: Plan,
    *,
    provider: Provider | None = None,
    extra_channels: Sequence[Channel] = (),
    clock: Clock | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> GatewayParts:
    """The gateway's parts for `plan`, in dependency order, not started (no I/O beyond
    looking for bubblewrap where `[exec]` is on: its probe runs once the gateway polls): what
    the parts' tools need is made first and given to them."""
    from gateway.agent.sessions import SessionStore
    from gateway.assembly import platforms
    from gateway.assembly.web import web_tools
    from gateway.clock import SystemClock
    from gateway.ops.redaction import Redactor
    from gateway.pipeline.parts import build_parts
    from gateway.stores.state import StateDB

    clock = clock or SystemClock()
    if provider is None:
        from gateway.agent.providers import build_provider

        provider = build_provider(settings, defer=True)  # the SDK loads after start-up
    state = StateDB.for_root(  # opened by Gateway.start
        settings.workspaces_dir, inbox_retention=settings.inbox_retention
    )
    channels: list[Channel] = []
    if plan.channels == "platforms":
        channels.extend(platforms.build_channels(settings, state, options))
    channels.extend(extra_channels)
    if plan.channels == "terminal":
        from channels.terminal import TerminalChannel
        from gateway.assembly.terminal_chat import history_path

        channels.append(
            TerminalChannel(history_path=history_path(settings), streaming=settings.chat.streaming)
        )
    sessions = SessionStore(clock)
    web = web_tools(settings.web, sessions)  # web_fetch, web_search as [web] says
    memory = None
    if plan.memory:
        from gateway.config.memory import build_memory_service

        memory = build_memory_service(settings.memory)
    desk = None
    private_tools: list[Any] = list(web)
    if plan.scheduler:
        from gateway.features.scheduling import build_schedule_desk

        desk = build_schedule_desk(
            settings, clock, state.links.last_dm_route, [channel.name for channel in channels]
        )
        if desk is not None:
            from gateway.agent.tools.schedule_tools import schedule_tools

            private_tools.extend(schedule_tools(desk))
    task_desk = None
    if plan.tasks and settings.tasks.enabled:
        from gateway.features.tasks.desk import TaskDesk
        from gateway.features.tasks.tool import StartTaskTool

        task_desk = TaskDesk(settings.tasks, state.tasks, clock)
        private_tools.append(StartTaskTool(task_desk, settings.tasks))
    from gateway.assembly.exec import exec_wiring

    press_wiring = exec_wiring(settings, state, clock)  # its probe runs beside the first poll
    return build_parts(
        settings,
        provider,
        channels=channels,
        clock=clock,
        access=platforms.access_policy(settings, state, clock),
        private_tools=private_tools,
        shared_tools=web if settings.web.groups else (),
        state=state,
        redactor=Redactor.from_settings(settings),
        sessions=sessions,
        memory=memory,
        schedule_desk=desk,
        press_wiring=press_wiring,
        task_desk=task_desk,
    )


def build_gateway(
    settings: Settings,
    plan: Plan,
    *,
    provider: Provider | None = None,
    extra_channels: Sequence[Channel] = (),
    clock: Clock | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Gateway:
    """The Gateway object for `plan`, not started (see `assemble_parts`), without the
    services around it (GatewayApp adds those)."""
    from gateway.pipeline.gateway import Gateway

    return Gateway(
        assemble_parts(
            settings,
            plan,
            provider=provider,
            extra_channels=extra_channels,
            clock=clock,
            options=options,
        )
    )


Say = Callable[[str], Awaitable[None]]


async def _to_stderr(text: str) -> None:
    import sys

    print(text, file=sys.stderr)


async def start_panel(
    parts: GatewayParts, settings: Settings, *, say: Say = _to_stderr, beside: bool = False
) -> Any:
    """Serve the web control panel (gateway/panel/) on the gateway's event loop; None if it
    is off or its port is taken (the gateway itself keeps running: the panel is for the
    owner, and says why it did not start).

    `say`: where the one line about it goes (the terminal chat prints it above its prompt).
    `beside`: this process runs beside a gateway that may already serve the panel (the
    terminal chat next to `clawgate run`): a taken port where a clawgate panel answers is that
    gateway's panel, on the same workspaces, and is named as such rather than as a failure."""
    if not settings.panel.enabled:
        return None
    from gateway.ops.logs import configured_secrets
    from gateway.panel.host import PanelHost
    from gateway.panel.server import PanelServer

    panel = PanelServer(PanelHost(parts), settings.panel, configured_secrets(settings))
    try:
        await panel.start()
    except OSError as exc:
        from gateway.panel.probe import panel_answers

        if (
            beside
            and exc.errno == errno.EADDRINUSE
            and await asyncio.to_thread(panel_answers, settings.panel)
        ):
            await say(
                f"web panel: {settings.panel.base_url()} (served by the gateway already "
                "running here; a login link: `clawgate panel url`)"
            )
        else:
            await say(f"clawgate: panel not started ({exc}); set [panel] port, or enabled = false")
        return None
    notice = panel.first_start_notice()
    await say(notice or f"panel on {panel.url} (a login link: `clawgate panel url`)")
    return panel


class GatewayApp:
    """A gateway and the services around it, started and stopped as one.

    `async with GatewayApp(settings, plan) as app:` starts everything (or raises with
    nothing left running) and stops everything on exit.
    """

    def __init__(
        self,
        settings: Settings,
        plan: Plan = RUN,
        *,
        parts: GatewayParts | None = None,
        services: Sequence[ServiceFactory] = (),
        heartbeat_factory: ServiceFactory | None = None,
    ) -> None:
        from gateway.pipeline.gateway import Gateway

        self.settings = settings
        self.plan = plan
        self.parts = parts or assemble_parts(settings, plan)
        from gateway.ops.logs import share_redactor

        share_redactor(self.parts.redactor)  # one set of secrets for logs and tool results
        # The services around the gateway, made from its parts: started after the gateway.
        self.heartbeats: Service | None = None
        if plan.heartbeats:
            self.heartbeats = self._heartbeats(heartbeat_factory)
        self._services = (
            self._scheduler_service()
            + self._task_service()
            + [factory(self.parts) for factory in services]
        )
        self.gateway = Gateway(self.parts, on_new_workspace=self._new_workspace)
        self.health: HealthServer | None = None
        self.panel: Any = None
        self.services: list[Service] = []
        self._stack: contextlib.AsyncExitStack | None = None
        self._grace = settings.stop_grace_seconds

    async def start(self) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            if self.plan.exclusive:
                self._lock(stack)
            if self.plan.health and self.settings.health.enabled:
                self.health = self._bind_health(stack)
            stack.push_async_callback(self._stop_gateway)
            await self._start_gateway()
            warming = self._warm_provider(stack)
            # The timers next, light (their modules are loaded): a reminder due now is on time.
            if self.heartbeats is not None:
                await self._start_service(stack, self.heartbeats)
            for service in self._services:
                self.services.append(await self._start_service(stack, service))
            await self._let_first_answers_out(warming)
            if self.health is not None:
                await self._start_health(self.health)  # readiness reflects the channels
            if self.plan.panel:
                self.panel = await start_panel(
                    self.parts, self.settings, say=self._say, beside=not self.plan.exclusive
                )
                if self.panel is not None:
                    stack.push_async_callback(self.panel.stop)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack

    def stop_intake(self, grace: float | None = None) -> None:
        """No new turns from now on; running ones get `grace` seconds (default: the setting
        `stop_grace_seconds`) when the parts stop, also when a start in progress is cancelled
        and unwinds."""
        self.gateway.stop_intake()
        self._grace = self.settings.stop_grace_seconds if grace is None else grace

    async def stop(self, grace: float | None = None) -> None:
        """Stop intake, give running turns `grace` seconds (default: the setting
        `stop_grace_seconds`), then stop every part in reverse order."""
        self.stop_intake(grace)
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> GatewayApp:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _say(self, text: str) -> None:
        """A line for the person who started this: above the terminal chat's prompt when
        there is one (a plain print would land inside the line being typed), else stderr."""
        from channels.terminal import TerminalChannel

        terminal = self.parts.channels.get("terminal")
        if isinstance(terminal, TerminalChannel):
            await terminal.notice(text)
        else:
            await _to_stderr(text)

    # --- the parts ------------------------------------------------------------------------

    def _lock(self, stack: contextlib.AsyncExitStack) -> None:
        from gateway.assembly.instance_lock import AlreadyRunning, GatewayLock

        lock = GatewayLock(self.settings.workspaces_dir)
        try:
            lock.acquire()
        except AlreadyRunning as exc:
            raise AlreadyRunningError(
                f"{exc}; stop it first (two gateways on the same workspaces would answer "
                "every message twice)"
            ) from exc
        stack.callback(lock.release)

    def _bind_health(self, stack: contextlib.AsyncExitStack) -> HealthServer:
        """Reserve the health port (standard library only); served by `_start_health`."""
        from gateway.pipeline.health import HealthServer

        health = HealthServer(self.parts, self.settings.health.host, self.settings.health.port)
        try:
            health.bind()
        except OSError as exc:
            where = f"{self.settings.health.host}:{self.settings.health.port}"
            cause = (
                "is already in use (another clawgate or program listens there)"
                if exc.errno == errno.EADDRINUSE
                else f"cannot be opened ({exc.strerror})"
            )
            raise StartupError(
                f"cannot serve /healthz on {where}: the port {cause}; set "
                f"CLAWGATE_HEALTH__PORT ([health] port) to a free port, or "
                f"CLAWGATE_HEALTH__ENABLED=false"
            ) from exc
        stack.push_async_callback(health.stop)
        return health

    @staticmethod
    async def _start_health(health: HealthServer) -> None:
        await health.start(channels_started=True)

    async def _start_gateway(self) -> None:
        from channels.base import ChannelError
        from gateway.config.sources import with_sources

        try:
            await self.gateway.start()
        except ChannelError as exc:  # "check CLAWGATE_TELEGRAM__TOKEN": or where it was set
            raise StartupError(with_sources(str(exc))) from exc

    async def _stop_gateway(self) -> None:
        await self.gateway.stop(drain_timeout=self._grace)

    async def _let_first_answers_out(self, warming: asyncio.Task[None]) -> None:
        """Wait (up to FIRST_ANSWERS_WAIT_SECONDS) for the provider SDK and for the turns in
        flight: a message waiting at start is answered before the HTTP servers start."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FIRST_ANSWERS_WAIT_SECONDS
        await asyncio.wait({warming}, timeout=FIRST_ANSWERS_WAIT_SECONDS)
        while self.parts.lanes.depth() and loop.time() < deadline:
            await asyncio.sleep(IDLE_CHECK_SECONDS)

    def _warm_provider(self, stack: contextlib.AsyncExitStack) -> asyncio.Task[None]:
        """Import the provider SDK in the background now that the channels listen."""
        from gateway.agent.providers.deferred import warm_up

        async def warm() -> None:
            try:
                await warm_up(self.parts.provider)
            except Exception:  # the first model call builds it again and reports the error
                log.exception("could not prepare the %s provider", self.settings.llm.provider)

        task = asyncio.create_task(warm(), name="provider-warm-up")

        async def cancel() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        stack.push_async_callback(cancel)
        return task

    def _new_workspace(self, person_id: str) -> None:
        """A new person's heartbeat timer starts when their workspace is created (while the
        heartbeats run; before they start, their start finds the workspace)."""
        from heartbeat import HeartbeatService

        heartbeats = self.heartbeats
        if isinstance(heartbeats, HeartbeatService) and heartbeats.running:
            heartbeats.refresh()

    def _heartbeats(self, factory: ServiceFactory | None) -> Service:
        if factory is not None:
            return factory(self.parts)
        from gateway.features.heartbeat_host import build_heartbeat_service

        return build_heartbeat_service(self.parts)

    def _scheduler_service(self) -> list[Service]:
        """The scheduler of the schedule desk, when the parts have one."""
        from gateway.features.scheduling import GatewayScheduleDesk, SchedulerService

        desk = self.parts.schedule_desk
        return [SchedulerService(self.parts, desk)] if isinstance(desk, GatewayScheduleDesk) else []

    def _task_service(self) -> list[Service]:
        """The runner of the background tasks' desk, when the parts have one."""
        from gateway.features.tasks.desk import TaskDesk

        desk = self.parts.task_desk
        if not isinstance(desk, TaskDesk):
            return []
        from gateway.features.exec.approvals_store import ApprovalStore
        from gateway.features.tasks.runner import TaskRunner

        return [TaskRunner(self.parts, desk, ApprovalStore(self.parts.state.database))]

    @staticmethod
    async def _start_service(stack: contextlib.AsyncExitStack, service: Service) -> Service:
        await service.start()
        stack.push_async_callback(service.stop)
        return service
