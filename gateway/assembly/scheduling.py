"""The gateway side of reminders: the scheduler's host, the desk the tools and commands use,
and starting one `scheduler.Scheduler` for every workspace.

- Zone: a person's time zone is `[scheduler.workspaces.<id>] timezone`, else
  `[heartbeat.workspaces.<id>] timezone`, else the top-level `timezone`, else the machine's.
- Deliver: to the person's last DM route on a running channel (none yet: the run is retried
  later), through the outbox (`gateway.delivery`) with the run's key, so a repeated delivery
  of the same run is a no-op. It is sent at once, not queued behind a running DM turn, so it
  is on time; it is then appended to the DM transcript through the DM lane (after any running
  turn, never in the middle of one), so the assistant knows what it said; a duplicate is not
  appended twice.
- Agent task: an isolated light turn in session `<id>:schedule` (persona files and today's
  note, the owner's private tools, never the DM history), like a heartbeat; its transcript is
  `sessions/<id>_schedule-*.jsonl`. Files it changed are committed ("heartbeat" reason).
- Desk: create, list and cancel for the tools, `/reminders` and the CLI; after a change the
  running scheduler reloads that workspace at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gateway.agent.conversation import Message, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.prompt import build_system_prompt
from gateway.agent.scope import usage_scope
from gateway.agent.sessions import transcript_path
from gateway.agent.tools import ToolContext
from gateway.agent.transcript import Transcript, message_to_entry
from gateway.assembly.heartbeat_host import discover_workspaces
from gateway.clock import Clock
from gateway.config.settings import Settings
from gateway.pipeline.gateway import Gateway
from memory.layout import PERSONA_FILES, daily_note, dm_session_key
from scheduler import (
    Scheduler,
    SchedulerPolicy,
    WorkspaceRef,
    confirmation,
    list_jobs,
    render_list,
)
from scheduler import cancel as cancel_job
from scheduler import create as create_job
from scheduler.jobs import Kind

log = logging.getLogger(__name__)

__all__ = [
    "GatewayScheduleHost",
    "NoDmRoute",
    "RemindersService",
    "ScheduleDesk",
    "attach_schedules",
    "build_scheduler",
    "person_zone",
    "reminders",
    "schedule_session_key",
    "start_scheduler",
]


class NoDmRoute(Exception):
    """The person has not written in a DM on a running channel yet: nowhere to send."""


class DeliveryNotAccepted(Exception):
    """The platform refused the message for good (blocked, chat gone)."""


def schedule_session_key(person_id: str) -> str:
    return f"{person_id}:schedule"


def machine_zone() -> ZoneInfo:
    """The machine's IANA zone (TZ, then /etc/localtime), UTC when it cannot be named:
    a fixed offset would not follow daylight-saving time."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return ZoneInfo("UTC")


def person_zone(settings: Settings, person_id: str) -> ZoneInfo:
    own = settings.scheduler.workspaces.get(person_id)
    beat = settings.heartbeat.workspaces.get(person_id)
    name = ((own.timezone if own else None) or (beat.timezone if beat else None)
            or settings.timezone)
    return ZoneInfo(name) if name else machine_zone()


class ScheduleDesk:
    """Add, list and cancel a person's jobs (files only; tells the scheduler when running)."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self.scheduler: Scheduler | None = None  # set while the gateway runs one

    def zone(self, workspace: Path) -> ZoneInfo:
        return person_zone(self.settings, workspace.name)

    async def create(self, workspace: Path, when: str, text: str, kind: Kind) -> str:
        """The confirmation (words and ISO). Raises ScheduleError / ScheduleFileError."""
        zone, now = self.zone(workspace), self.clock.now()
        job, first = await asyncio.to_thread(create_job, workspace, zone, when, text, kind,
                                             now, max_jobs=self.settings.scheduler.max_jobs)
        await self._changed(workspace)
        return confirmation(job, first, zone, now)

    async def listing(self, workspace: Path) -> str:
        zone = self.zone(workspace)
        views, problems = await asyncio.to_thread(list_jobs, workspace, zone)
        return render_list(views, problems, zone, self.clock.now())

    async def cancel(self, workspace: Path, job_id: int) -> str:
        job = await asyncio.to_thread(cancel_job, workspace, self.zone(workspace), job_id)
        if job is None:
            return f"There is no reminder #{job_id} (see the list with its numbers)."
        await self._changed(workspace)
        return f"Cancelled #{job.id}: {job.text}"

    async def _changed(self, workspace: Path) -> None:
        if self.scheduler is not None:
            await self.scheduler.reload(workspace.name)


class GatewayScheduleHost:
    """`scheduler.SchedulerHost` from the Gateway's parts (see the module doc)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        # Metered: an agent task is counted as the person's, kind "reminders".
        self.agent = AgentLoop(gateway.metered, gateway.settings.scheduler.max_tool_rounds)

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        gateway = self.gateway
        route = await gateway.last_dm_route(person_id)
        if route is None or route.channel not in gateway.channels:
            raise NoDmRoute(f"{person_id} has no DM route on a running channel yet")
        if not await self._send(route.channel, route.chat_id, text, key):
            return  # delivered before (the same run after a restart): nothing more to do
        session_key = dm_session_key(person_id)

        async def record() -> None:
            session = await gateway.sessions.get(workspace, session_key)
            session.record(Message("assistant", text), reminder=key, channel=route.channel,
                           chat_id=route.chat_id)

        gateway.lanes.submit(session_key, record)

    async def _send(self, channel: str, chat_id: str, text: str, key: str) -> bool:
        """Through the outbox with the run's key; False when the outbox had the key already.

        Accepted (sent, or queued: the outbox retries it, after a restart too) is delivered as
        far as the scheduler is concerned; refused for good raises, so the run is retried and
        finally counted failed."""
        first = await self.gateway.delivery.deliver(channel, chat_id, text, key=key)
        outcome = await first
        if outcome == "duplicate":
            return False
        if outcome in ("refused", "no_channel"):
            raise DeliveryNotAccepted(f"delivery to {channel} {outcome}")
        return True

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        gateway = self.gateway
        key = schedule_session_key(person_id)
        model = gateway.models.for_person(person_id)
        zone = person_zone(gateway.settings, person_id)
        now = gateway.clock.now().astimezone(zone)
        names = [*PERSONA_FILES, daily_note(now.date())]
        files = gateway.loader.load(workspace, private=True, today=now.date(), names=names)
        run_info = (f"A scheduled task for {person_id} (session {key}); no one is chatting "
                    f"right now. Your reply is sent to them as a message; reply HEARTBEAT_OK "
                    f"if there is nothing worth sending. Model: {model.name}/{model.model}.")
        system = build_system_prompt(files, private=True, now=now, run_info=run_info)
        ctx = ToolContext(workspace, key, True, gateway.settings.tools.max_file_bytes,
                          budget=gateway.turn_budget())
        transcript = Transcript(transcript_path(workspace, key))
        history: list[Message] = []

        def record(message: Message, usage: Usage | None) -> None:
            history.append(message)
            entry: dict[str, Any] = {"ts": gateway.clock.now().isoformat(),
                                     **message_to_entry(message)}
            if usage is not None:
                entry["usage"] = usage.as_dict()
            transcript.append(entry)

        record(Message("user", prompt), None)
        tools = gateway.heartbeat_tools(person_id, workspace)  # private, + MCP allowing it
        with usage_scope(person_id, "reminders"):
            result = await self.agent.run(system, history, ctx, tools, record)
        await gateway.versioning.commit(workspace, "heartbeat", session=key)
        return result.reply


def workspace_refs(settings: Settings) -> Iterator[WorkspaceRef]:
    for person_id, path in discover_workspaces(settings.workspaces_dir):
        yield WorkspaceRef(person_id, path, person_zone(settings, person_id))


def build_scheduler(gateway: Gateway, *, clock: Clock | None = None,
                    sleep: Any = asyncio.sleep) -> Scheduler:
    section = gateway.settings.scheduler
    policy = SchedulerPolicy(
        grace=timedelta(hours=section.grace_hours),
        late_after=timedelta(seconds=section.late_after_seconds),
        agent_timeout=section.agent_timeout_seconds,
        rescan_seconds=section.rescan_seconds,
    )
    return Scheduler(GatewayScheduleHost(gateway),
                     lambda: list(workspace_refs(gateway.settings)),
                     clock or gateway.clock, policy=policy, sleep=sleep)


def _export_metrics(gateway: Gateway, desk: ScheduleDesk) -> None:
    """/metrics: jobs and runs by outcome, read from whichever scheduler the desk has."""

    def counts() -> dict[str, int]:
        return desk.scheduler.metrics.as_dict() if desk.scheduler is not None else {}

    registry = gateway.metrics.registry
    jobs = registry.gauge("clawgate_schedule_jobs", "Scheduled jobs with a run ahead.")
    jobs.collect_with(lambda: {(): float(counts().get("jobs", 0))})
    runs = registry.counter("clawgate_schedule_runs_total",
                            "Scheduled runs, by outcome (fired includes late).", ["outcome"])
    runs.collect_with(lambda: {
        (name,): float(value) for name, value in counts().items() if name != "jobs"})


class RemindersService:
    """The assembly's service (gateway/assembly/builder.py `services`): the schedule tools and
    `/reminders` (given to the gateway when built, before it starts: the first turn has them),
    and with `run` the one scheduler for every workspace (started after the channels)."""

    def __init__(self, gateway: Gateway, *, run: bool) -> None:
        self.gateway = gateway
        self.run = run
        self.scheduler: Scheduler | None = None
        self._desk = attach_schedules(gateway)

    async def start(self) -> None:
        if self.run:
            self.scheduler = await start_scheduler(self.gateway, self._desk)

    async def stop(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None


def reminders(*, run: bool) -> Callable[[Gateway], RemindersService]:
    return lambda gateway: RemindersService(gateway, run=run)


def attach_schedules(gateway: Gateway) -> ScheduleDesk | None:
    """Give the owner's private contexts the schedule tools and `/reminders` (before start).
    None when `[scheduler] enabled = false`."""
    if not gateway.settings.scheduler.enabled:
        return None
    from gateway.agent.tools.schedule_tools import schedule_tools

    desk = ScheduleDesk(gateway.settings, gateway.clock)
    gateway.schedules = desk
    gateway.add_private_tools(schedule_tools(desk))
    _export_metrics(gateway, desk)
    return desk


async def start_scheduler(gateway: Gateway, desk: ScheduleDesk | None) -> Scheduler | None:
    """Start the one scheduler for every workspace (None when reminders are off)."""
    if desk is None:
        return None
    scheduler = build_scheduler(gateway)
    await scheduler.start()
    desk.scheduler = scheduler
    log.info("scheduler running: %d job(s)", scheduler.metrics.jobs)
    return scheduler

