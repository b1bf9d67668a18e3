"""The gateway side of heartbeats: `heartbeat.HeartbeatHost` over the gateway's parts, as
`BackgroundParts` (gateway/pipeline/ports.py) shows them.

- Busy: the person's DM lane (`<person>:dm`) has a turn running or queued.
- Route: the last DM route from the gateway state database, only on a channel that is running;
  if the database cannot answer, there is no route and the beat is skipped with that reason.
- Light turn: an isolated session `<person>:heartbeat` whose history is only the standing
  prompt (never the DM history); the system prompt holds AGENTS, SOUL, IDENTITY, the due part
  of HEARTBEAT.md and today's note; the owner's private tool registry (memory tools included).
  It calls the agent loop directly, so no memory flush or compaction ever runs for it. Each
  heartbeat turn is appended to its own transcript (`sessions/<person>_heartbeat-*.jsonl`)
  for the record.
- Deliver: queued in the DM lane, so it never lands in the middle of a DM turn; the alert is
  recorded in the DM transcript as an assistant message (the next DM turn sees what was said),
  then handed to the gateway's delivery path (outbox, retried until sent) for the last DM
  route. Only a refusal for good counts as not delivered.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.agent.context_files import ContextFile, FileReport, Status, truncate_head_tail
from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop
from gateway.agent.prompt import build_system_prompt
from gateway.agent.provenance import summarised_source
from gateway.agent.scope import UsageScope, usage_scope
from gateway.agent.sessions import transcript_path
from gateway.agent.tools import ToolContext
from gateway.agent.transcript import Transcript, message_to_entry
from gateway.config.heartbeat import HeartbeatOverride
from gateway.config.settings import Settings
from gateway.pipeline.ports import BackgroundParts
from gateway.workspace.seed import SEEDED_MARKER
from heartbeat import (
    ActiveHours,
    DmTarget,
    Heartbeat,
    HeartbeatPolicy,
    HeartbeatService,
    HeartbeatTimer,
    LightTurn,
    parse_clock,
)
from heartbeat.beat import CHECKLIST_FILE, BeatOutcome
from heartbeat.checklist import parse_interval
from heartbeat.timer import Sleep
from memory.layout import dm_session_key, heartbeat_files, heartbeat_session_key

log = logging.getLogger(__name__)

__all__ = [
    "GatewayHeartbeatHost",
    "beat_zone",
    "build_heartbeat_service",
    "discover_workspaces",
    "light_context_files",
    "policy_for",
]


def beat_zone(settings: Settings, person_id: str) -> tzinfo:
    """The zone of a person's heartbeats (active hours, the prompt's time, today's note):
    `[heartbeat.workspaces.<person>] timezone`, else `[heartbeat] timezone`, else the
    person's own zone (`Settings.zone_of`: their reminders' zone, else the gateway's)."""
    hb = settings.heartbeat
    own = hb.workspaces.get(person_id) or HeartbeatOverride()
    zone_name = own.timezone or hb.timezone
    return ZoneInfo(zone_name) if zone_name else settings.zone_of(person_id)


def policy_for(settings: Settings, person_id: str) -> HeartbeatPolicy:
    """The `[heartbeat]` section with the person's `[heartbeat.workspaces.<person>]` on top."""
    hb = settings.heartbeat
    own = hb.workspaces.get(person_id) or HeartbeatOverride()
    hours = ActiveHours(
        parse_clock(own.active_start or hb.active_start),
        parse_clock(own.active_end or hb.active_end),
        beat_zone(settings, person_id),
    )
    cap = hb.daily_token_cap if own.daily_token_cap is None else own.daily_token_cap
    return HeartbeatPolicy(
        every=parse_interval(own.every or hb.every),
        active_hours=hours,
        daily_token_cap=cap,
        busy_retry=timedelta(seconds=hb.busy_retry_seconds),
        ack_max_chars=hb.ack_max_chars,
        repeat_window=timedelta(hours=hb.repeat_window_hours),
        timeout_seconds=hb.timeout_seconds,
        jitter_fraction=hb.jitter_fraction,
    )


def discover_workspaces(root: Path) -> Iterator[tuple[str, Path]]:
    """Every seeded workspace under the root, as (person id, directory)."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        if (entry / SEEDED_MARKER).exists():
            yield entry.name, entry


class GatewayHeartbeatHost:
    """`heartbeat.HeartbeatHost` over the gateway's parts (`BackgroundParts`)."""

    def __init__(self, parts: BackgroundParts, *, require_running_channel: bool = True) -> None:
        self.parts = parts
        self.settings, self.clock = parts.settings, parts.clock
        # The CLI's one-off beat prints instead of sending, so any recorded route will do.
        self.require_running_channel = require_running_channel
        # The metered provider: heartbeats are counted as the person's, kind "heartbeat"
        # (and answered by the background model when one is set).
        self.agent = AgentLoop(parts.metered, self.settings.heartbeat.max_tool_rounds)
        # The outside text a person's last light turn read (an MCP answer, a file a group
        # wrote), by person: its alert enters their DM session marked with it, so what a
        # tool's answer planted cannot reach the files groups read (provenance.py). A beat's
        # turn and its delivery follow each other in one process.
        self._outside: dict[str, str] = {}

    def dm_busy(self, person_id: str) -> bool:
        return self.parts.lanes.is_busy(dm_session_key(person_id))

    async def dm_target(self, person_id: str) -> DmTarget | None:
        try:
            route = await self.parts.routes.last_dm_route(person_id)
        except Exception as exc:  # no state database (not open, broken): no route
            log.warning("heartbeat: cannot look up the DM route of %s: %s", person_id, exc)
            return None
        if route is None:
            return None
        if self.require_running_channel and not self.parts.routes.runs_channel(route.channel):
            return None
        return DmTarget(route.channel, route.chat_id)

    def system_prompt(self, workspace: Path, person_id: str, checklist: str) -> SystemPrompt:
        files = light_context_files(self.parts, workspace, person_id, checklist)
        model = self.parts.models.for_scope(UsageScope(person_id, "heartbeat"))
        run_info = (
            f"Heartbeat check for {person_id} (session {heartbeat_session_key(person_id)}); "
            f"no one is chatting right now. Model: {model.name}/{model.model}."
        )
        now = self.clock.now().astimezone(beat_zone(self.settings, person_id))
        return build_system_prompt(files, private=True, now=now, run_info=run_info)

    async def light_turn(
        self, workspace: Path, person_id: str, checklist: str, prompt: str
    ) -> LightTurn:
        key = heartbeat_session_key(person_id)
        system = self.system_prompt(workspace, person_id, checklist)
        ctx = ToolContext(
            workspace,
            key,
            True,
            self.settings.tools.max_file_bytes,
            budget=self.parts.setup.turn_budget(),
        )
        transcript = Transcript(transcript_path(workspace, key))
        history: list[Message] = []

        def record(message: Message, usage: Usage | None) -> None:
            history.append(message)
            entry = {"ts": self.clock.now().isoformat(), **message_to_entry(message)}
            if usage is not None:
                entry["usage"] = usage.as_dict()
            transcript.append(entry)

        record(Message("user", prompt), None)
        tools = self.parts.setup.heartbeat_tools(person_id, workspace)  # MCP allowing it
        with usage_scope(person_id, "heartbeat"):
            result = await self.agent.run(system, history, ctx, tools, record)
        self._outside[person_id] = summarised_source(history)
        usage = result.usage
        prompt_tokens = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return LightTurn(result.reply, prompt_tokens, usage.output_tokens)

    async def deliver(
        self, workspace: Path, person_id: str, target: DmTarget, text: str, *, alert: bool
    ) -> None:
        parts = self.parts
        key = dm_session_key(person_id)
        failures: list[Exception] = []
        outside = self._outside.pop(person_id, "")

        async def job() -> None:
            session = await parts.sessions.get(workspace, key)
            if alert:
                session.record(
                    Message("assistant", text, untrusted=outside),
                    heartbeat=True,
                    channel=target.channel,
                    chat_id=target.chat_id,
                )
            else:
                session.record_event("heartbeat_notice", text=text)
            sent = await parts.delivery.deliver(target.channel, target.chat_id, text)
            outcome = await sent
            session.record_event(
                "delivery",
                ok=outcome == "sent",
                channel=target.channel,
                heartbeat=True,
                **({} if outcome == "sent" else {"error": outcome}),
            )
            if outcome == "queued":  # in the outbox: retried until sent, so it counts
                log.warning("heartbeat delivery to %s failed once; it is retried", target.channel)
            elif outcome in ("refused", "no_channel"):
                failures.append(RuntimeError(f"delivery to {target.channel} {outcome}"))

        await parts.lanes.submit(key, job)
        if failures:
            raise failures[0]


def light_context_files(
    parts: BackgroundParts, workspace: Path, person_id: str, checklist: str
) -> list[ContextFile]:
    """AGENTS, SOUL, IDENTITY, the checklist as HEARTBEAT.md, today's note: nothing else.

    The file list is `memory.layout.heartbeat_files`; the checklist slot is filled with the
    text the beat already read (and judged due), not read a second time.
    """
    settings = parts.settings
    today = parts.clock.now().astimezone(beat_zone(settings, person_id)).date()
    names = [name for name in heartbeat_files(today) if name != CHECKLIST_FILE]
    slot = heartbeat_files(today).index(CHECKLIST_FILE)
    files = parts.setup.light_files(workspace, today=today, names=names)
    limit = settings.prompt.file_max_chars
    text = checklist
    if len(text) > limit:
        text = truncate_head_tail(checklist, len(checklist), limit, CHECKLIST_FILE)
    status: Status = "truncated" if text is not checklist else "loaded"
    report = FileReport(CHECKLIST_FILE, status, len(checklist), len(text))
    files.insert(slot, ContextFile(CHECKLIST_FILE, text, report))
    return files


def outcome_recorder(
    parts: BackgroundParts, person_id: str, workspace: Path
) -> Callable[[BeatOutcome], Awaitable[None]]:
    """What the gateway does with every outcome: count it, version what the beat wrote."""

    async def record(outcome: BeatOutcome) -> None:
        parts.metrics.heartbeat(outcome.status)
        if outcome.model_called:  # the light turn may have written files: version them
            await parts.versioning.commit(
                workspace, "heartbeat", session=heartbeat_session_key(person_id)
            )

    return record


async def beat_now(parts: BackgroundParts, person_id: str, workspace: Path) -> BeatOutcome:
    """One beat right away inside the running gateway (the panel's "run now"): same policy,
    host and bookkeeping as the timer's beats, so an alert is delivered and counted."""
    beat = Heartbeat(
        workspace,
        person_id,
        GatewayHeartbeatHost(parts),
        policy_for(parts.settings, person_id),
        parts.clock,
        on_outcome=outcome_recorder(parts, person_id, workspace),
    )
    return await beat.beat()


def build_heartbeat_service(
    parts: BackgroundParts,
    *,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    rescan_sleep: Sleep | None = None,
) -> HeartbeatService:
    host = GatewayHeartbeatHost(parts)

    def make_timer(person_id: str, workspace: Path) -> HeartbeatTimer | None:
        policy = policy_for(parts.settings, person_id)
        if policy.every is None:
            return None
        beat = Heartbeat(
            workspace,
            person_id,
            host,
            policy,
            parts.clock,
            on_outcome=outcome_recorder(parts, person_id, workspace),
        )
        return HeartbeatTimer(beat, parts.clock, sleep=sleep, rng=rng)

    return HeartbeatService(
        lambda: discover_workspaces(parts.settings.workspaces_dir),
        make_timer,
        sleep=rescan_sleep or sleep,
    )
