"""The gateway side of reminders: the scheduler's host, the desk the tools and commands use,
and starting one `scheduler.Scheduler` for every workspace.

- Zone: a person's time zone is `[scheduler.workspaces.<id>] timezone`, else
  `[heartbeat.workspaces.<id>] timezone`, else the top-level `timezone`, else the machine's.
- Where: every way of running has a scheduler. `clawgate run` with Telegram/Discord serves
  every workspace; the terminal chat (`clawgate chat`, or `clawgate run` with no platform)
  serves its own person only, whose reminders and alerts appear in the chat (the others have
  no channel there). A reminder made where it cannot be delivered says where it will go
  (`delivery_note`).
- Deliver: to the person's last DM route on a running channel (none yet: the run is retried
  later), through the outbox (the `delivery` part) with the run's key, so a repeated delivery
  of the same run is a no-op. It is sent at once, not queued behind a running DM turn, so it
  is on time; it is then appended to the DM transcript through the DM lane (after any running
  turn, never in the middle of one), so the assistant knows what it said; a duplicate is not
  appended twice.
- Agent task: an isolated light turn in session `<id>:schedule` (persona files and today's
  note, the owner's private tools, never the DM history), like a heartbeat; its transcript is
  `sessions/<id>_schedule-*.jsonl`. Files it changed are committed ("heartbeat" reason).
- Desk: create, list and cancel for the tools, `/reminders` and the CLI; after a change the
  running scheduler reloads that workspace at once.
- Wiring: the scheduler and the desk are made before the gateway's parts (the schedule tools
  are among the owner's private tools from the start); the scheduler's host is made from the
  parts and given to the scheduler when it starts (`SchedulerService`), which breaks the one
  cycle (host -> private tools -> desk -> scheduler -> host).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gateway.agent.conversation import Message, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.metrics import Registry
from gateway.agent.prompt import build_system_prompt
from gateway.agent.provenance import summarised_source
from gateway.agent.scope import UsageScope, usage_scope
from gateway.agent.sessions import transcript_path
from gateway.agent.tools import ToolContext
from gateway.agent.transcript import Transcript, message_to_entry
from gateway.clock import Clock
from gateway.config.settings import Settings
from gateway.features.heartbeat_host import discover_workspaces
from gateway.pipeline.ports import BackgroundParts
from gateway.pipeline.routing import TERMINAL_CHANNEL
from gateway.stores.links import DmRoute
from heartbeat.ack import check_reply
from memory.layout import PERSONA_FILES, daily_note, dm_session_key, schedule_session_key
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
    "GatewayScheduleDesk",
    "GatewaySchedulerHost",
    "NoDmRoute",
    "SchedulerService",
    "build_schedule_desk",
    "build_scheduler",
    "delivery_note",
]


_OUTSIDE_KEPT = 64  # agent-task replies whose outside source waits for their delivery


class NoDmRoute(Exception):
    """The person has not written in a DM on a running channel yet: nowhere to send."""


class DeliveryNotAccepted(Exception):
    """The platform refused the message for good (blocked, chat gone)."""


def _platform(channel: str) -> str:
    return channel.capitalize()  # telegram -> Telegram


def delivery_note(
    person_id: str,
    owner: str,
    stored: DmRoute | None,
    running: Collection[str] | None,
    grace_hours: float,
) -> str:
    """Where a reminder of `person_id` will arrive, in one or two sentences for the person.

    `stored`: their last DM route on a platform (the state database); `running`: the channels
    of this process (None: a command-line tool, no gateway here)."""
    yours = owner == person_id
    whose = "your" if yours else f"{person_id}'s"
    late = f"up to {grace_hours:g} hours late"
    platform = stored if stored is not None and stored.channel != TERMINAL_CHANNEL else None
    terminal_here = running is not None and TERMINAL_CHANNEL in running
    if platform is not None and running is not None and platform.channel in running:
        return f"It will be sent to {whose} {_platform(platform.channel)} DM."
    if yours and terminal_here:
        elsewhere = (
            f"`clawgate run` sends it to your {_platform(platform.channel)} DM"
            if platform is not None
            else f"it comes when `clawgate chat` next starts ({late})"
        )
        return f"It will appear in this chat if the chat is open then; otherwise {elsewhere}."
    if platform is not None:
        return (
            f"`clawgate run` sends it to {whose} {_platform(platform.channel)} DM (if it is "
            f"not running then, when it next starts, {late})."
        )
    if yours and running is not None:  # a gateway with platforms, none of them yours yet
        return (
            "Nowhere to send it yet: no Telegram or Discord account of yours has written "
            "to the bot (`clawgate chat` shows it if the chat is open then). It is tried "
            "again for about an hour and a half after its time, then given up."
        )
    if yours:
        return (
            "It will appear in `clawgate chat` (or `clawgate run` without Telegram/Discord) "
            f"if one is running then, or when one next starts ({late}); no Telegram or "
            "Discord account of yours has written to the bot yet, so it cannot reach you "
            "there."
        )
    return (
        f"Nowhere to send it yet: {person_id} has not written to the bot in a direct "
        "message. It is tried again for about an hour and a half after its time, then "
        "given up."
    )


class GatewayScheduleDesk:
    """Add, list and cancel a person's jobs (files only; tells the scheduler when running).

    `where(person_id)`: a sentence saying where a new reminder will arrive (the gateway's own
    desk knows its channels; the command line reads the state database). `scheduler`: the
    gateway's, reloaded after a change while it runs (none on the command line)."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        where: Callable[[str], Awaitable[str]] | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.where = where
        self.scheduler = scheduler

    def zone(self, workspace: Path) -> ZoneInfo:
        return self.settings.zone_of(workspace.name)

    async def create(self, workspace: Path, when: str, text: str, kind: Kind) -> str:
        """The confirmation (words and ISO). Raises ScheduleError / ScheduleFileError."""
        zone, now = self.zone(workspace), self.clock.now()
        job, first = await asyncio.to_thread(
            create_job,
            workspace,
            zone,
            when,
            text,
            kind,
            now,
            max_jobs=self.settings.scheduler.max_jobs,
        )
        await self._changed(workspace)
        reply = confirmation(job, first, zone, now)
        if self.where is not None:
            reply += " " + await self.where(workspace.name)
        return reply

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
        if self.scheduler is not None and self.scheduler.running:
            await self.scheduler.reload(workspace.name)


class GatewaySchedulerHost:
    """`scheduler.SchedulerHost` over the gateway's parts (`BackgroundParts`; module doc)."""

    def __init__(self, parts: BackgroundParts) -> None:
        self.parts = parts
        self.settings, self.clock = parts.settings, parts.clock
        # Metered: an agent task is counted as the person's, kind "reminders".
        self.agent = AgentLoop(parts.metered, self.settings.scheduler.max_tool_rounds)
        # The outside text an agent task's turn read, by person and reply: the reply enters
        # the DM session marked with it (provenance.py), as a heartbeat's alert does.
        self._outside: dict[tuple[str, str], str] = {}

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        parts = self.parts
        route = await parts.routes.last_dm_route(person_id)
        if route is None or not parts.routes.runs_channel(route.channel):
            raise NoDmRoute(f"{person_id} has no DM route on a running channel yet")
        if not await self._send(route.channel, route.chat_id, text, key):
            return  # delivered before (the same run after a restart): nothing more to do
        session_key = dm_session_key(person_id)
        outside = self._take_outside(person_id, text)

        async def record() -> None:
            session = await parts.sessions.get(workspace, session_key)
            session.record(
                Message("assistant", text, untrusted=outside),
                reminder=key,
                channel=route.channel,
                chat_id=route.chat_id,
            )

        parts.lanes.submit(session_key, record)

    def _take_outside(self, person_id: str, text: str) -> str:
        """The outside source of the agent answer `text` is (as sent, a late note before it),
        "" for a reminder's own words. An answer sent after a restart has lost its mark."""
        for (person, sent), source in list(self._outside.items()):
            if person == person_id and sent and (text == sent or text.endswith(" " + sent)):
                del self._outside[(person, sent)]
                return source
        return ""

    async def _send(self, channel: str, chat_id: str, text: str, key: str) -> bool:
        """Through the outbox with the run's key; False when the outbox had the key already.

        Accepted (sent, or queued: the outbox retries it, after a restart too) is delivered as
        far as the scheduler is concerned; refused for good raises, so the run is retried and
        finally counted failed."""
        first = await self.parts.delivery.deliver(channel, chat_id, text, key=key)
        outcome = await first
        if outcome == "duplicate":
            return False
        if outcome in ("refused", "no_channel"):
            raise DeliveryNotAccepted(f"delivery to {channel} {outcome}")
        return True

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        parts = self.parts
        key = schedule_session_key(person_id)
        model = parts.models.for_scope(UsageScope(person_id, "conversation"))
        zone = self.settings.zone_of(person_id)
        now = self.clock.now().astimezone(zone)
        names = [*PERSONA_FILES, daily_note(now.date())]
        files = parts.setup.light_files(workspace, today=now.date(), names=names)
        run_info = (
            f"A scheduled task for {person_id} (session {key}); no one is chatting "
            f"right now. Your reply is sent to them as a message; reply HEARTBEAT_OK "
            f"if there is nothing worth sending. Model: {model.name}/{model.model}."
        )
        system = build_system_prompt(files, private=True, now=now, run_info=run_info)
        ctx = ToolContext(
            workspace,
            key,
            True,
            self.settings.tools.max_file_bytes,
            budget=parts.setup.turn_budget(),
        )
        transcript = Transcript(transcript_path(workspace, key))
        history: list[Message] = []

        def record(message: Message, usage: Usage | None) -> None:
            history.append(message)
            entry: dict[str, Any] = {
                "ts": self.clock.now().isoformat(),
                **message_to_entry(message),
            }
            if usage is not None:
                entry["usage"] = usage.as_dict()
            transcript.append(entry)

        record(Message("user", prompt), None)
        tools = parts.setup.heartbeat_tools(person_id, workspace)  # private, + MCP allowing it
        with usage_scope(person_id, "reminders"):
            result = await self.agent.run(system, history, ctx, tools, record)
        await parts.versioning.commit(workspace, "heartbeat", session=key)
        if outside := summarised_source(history):
            # Keyed by what the scheduler will send: the reply less a HEARTBEAT_OK token
            # (the same cut as `scheduler.service`), maybe after a "(late: ...)" note.
            self._outside[(person_id, check_reply(result.reply).text)] = outside
            while len(self._outside) > _OUTSIDE_KEPT:  # replies never sent (HEARTBEAT_OK)
                del self._outside[next(iter(self._outside))]
        return result.reply


def workspace_refs(settings: Settings, only: str | None = None) -> Iterator[WorkspaceRef]:
    for person_id, path in discover_workspaces(settings.workspaces_dir):
        if only is None or person_id == only:
            yield WorkspaceRef(person_id, path, settings.zone_of(person_id))


def serves_only_the_owner(channel_names: Collection[str]) -> bool:
    """A gateway without a platform channel (the terminal chat) can reach its owner only: it
    runs their jobs and leaves everyone else's to the `clawgate run` that can send them."""
    return not any(name != TERMINAL_CHANNEL for name in channel_names)


def build_scheduler(
    settings: Settings, clock: Clock, channel_names: Collection[str], *, sleep: Any = asyncio.sleep
) -> Scheduler:
    """The one scheduler of a gateway running `channel_names`, not started."""
    section = settings.scheduler
    policy = SchedulerPolicy(
        grace=timedelta(hours=section.grace_hours),
        late_after=timedelta(seconds=section.late_after_seconds),
        agent_timeout=section.agent_timeout_seconds,
        rescan_seconds=section.rescan_seconds,
    )
    only = settings.owner if serves_only_the_owner(channel_names) else None
    return Scheduler(
        lambda: list(workspace_refs(settings, only)), clock, policy=policy, sleep=sleep
    )


StoredRoute = Callable[[str], Awaitable[DmRoute | None]]


def build_schedule_desk(
    settings: Settings,
    clock: Clock,
    stored_route: StoredRoute,
    channel_names: Collection[str],
    *,
    sleep: Any = asyncio.sleep,
) -> GatewayScheduleDesk | None:
    """The gateway's desk and its scheduler (not started), made before the gateway's parts:
    the schedule tools and `/reminders` use the desk. None when `[scheduler] enabled =
    false`. `stored_route(person_id)`: their last DM route in the state database."""
    if not settings.scheduler.enabled:
        return None
    names = frozenset(channel_names)

    async def where(person_id: str) -> str:
        return await gateway_delivery_note(settings, stored_route, names, person_id)

    return GatewayScheduleDesk(
        settings, clock, where=where, scheduler=build_scheduler(settings, clock, names, sleep=sleep)
    )


def _export_metrics(registry: Registry, scheduler: Scheduler) -> None:
    """/metrics: jobs and runs by outcome, while the scheduler runs."""

    def counts() -> dict[str, int]:
        return scheduler.metrics.as_dict() if scheduler.running else {}

    jobs = registry.gauge("clawgate_schedule_jobs", "Scheduled jobs with a run ahead.")
    jobs.collect_with(lambda: {(): float(counts().get("jobs", 0))})
    runs = registry.counter(
        "clawgate_schedule_runs_total",
        "Scheduled runs, by outcome (fired includes late).",
        ["outcome"],
    )
    runs.collect_with(
        lambda: {(name,): float(value) for name, value in counts().items() if name != "jobs"}
    )


class SchedulerService:
    """The assembly's service for the desk's scheduler (gateway/assembly/builder.py): its host
    is made from the gateway's parts, and it is started after the channels (every workspace
    with a platform channel; in the terminal chat, its person's)."""

    def __init__(self, parts: BackgroundParts, desk: GatewayScheduleDesk) -> None:
        self.scheduler = desk.scheduler
        self.host = GatewaySchedulerHost(parts)
        if self.scheduler is not None:
            _export_metrics(parts.metrics.registry, self.scheduler)

    async def start(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.start(self.host)
            log.info("scheduler running: %d job(s)", self.scheduler.metrics.jobs)

    async def stop(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            await self.scheduler.stop()


async def gateway_delivery_note(
    settings: Settings, stored_route: StoredRoute, channel_names: Collection[str], person_id: str
) -> str:
    try:
        stored = await stored_route(person_id)
    except Exception as exc:  # the note is a courtesy: never fail a reminder over it
        log.warning("cannot look up the DM route of %s: %s", person_id, exc)
        stored = None
    return delivery_note(
        person_id, settings.owner, stored, channel_names, settings.scheduler.grace_hours
    )
