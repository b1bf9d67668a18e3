"""One beat for one workspace: decide cheaply whether to ask the model, then ask once, quietly.

Every reason to stay silent is checked before any model call, cheapest first: no checklist,
nothing in it, no task due, outside active hours, the daily token budget spent, no DM route,
the person's DM session busy (deferred, retried shortly). After the call, an acknowledgement
(`HEARTBEAT_OK`) or an alert already delivered within the repeat window is dropped. Only a new,
real alert reaches the person, in their last DM, and lands in their DM transcript.

What the beat needs from the gateway is the small `HeartbeatHost` protocol below, so this
package stays free of channels, providers and sessions.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, Protocol

from heartbeat.ack import DEFAULT_ACK_MAX_CHARS, check_reply
from heartbeat.checklist import Checklist, Task, format_interval, load_checklist
from heartbeat.hours import ActiveHours
from heartbeat.store import HeartbeatState, load_state, save_state
from memory.layout import HEARTBEAT_FILE

log = logging.getLogger(__name__)

CHECKLIST_FILE = HEARTBEAT_FILE  # memory.layout
STANDING_PROMPT = """\
[Heartbeat check: a scheduled check, not a message from the person.]
Read HEARTBEAT.md above and follow it strictly. Do not infer or repeat old tasks from earlier \
chats. If something needs the person's attention now, reply with only the short message to \
send them. If nothing needs attention, reply HEARTBEAT_OK."""
CAP_NOTICE = (
    "(Heartbeat checks are paused until tomorrow: today's budget of {cap:,} tokens for them "
    "is used up.)"
)

Status = Literal["skipped", "deferred", "capped", "ok", "repeat", "alert", "error"]


class Clock(Protocol):
    def now(self) -> datetime: ...


@dataclass(frozen=True, slots=True)
class DmTarget:
    """The person's last direct-message chat: the only place a heartbeat may speak."""

    channel: str
    chat_id: str


@dataclass(frozen=True, slots=True)
class LightTurn:
    reply: str
    input_tokens: int = 0  # including cached prompt tokens
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class HeartbeatHost(Protocol):
    """What a beat needs from the gateway (gateway/features/heartbeat_host.py implements it)."""

    def dm_busy(self, person_id: str) -> bool:
        """Is a turn running or queued in the person's DM session?"""
        ...

    async def dm_target(self, person_id: str) -> DmTarget | None:
        """The person's last DM route on a running channel, or None."""
        ...

    async def light_turn(
        self, workspace: Path, person_id: str, checklist: str, prompt: str
    ) -> LightTurn:
        """One isolated turn with the light context; `checklist` stands in for HEARTBEAT.md."""
        ...

    async def deliver(
        self, workspace: Path, person_id: str, target: DmTarget, text: str, *, alert: bool
    ) -> None:
        """Send `text` to `target` and append it to the person's DM transcript. Raises if
        sending failed. `alert` False: a notice, recorded as an event, not as history."""
        ...


@dataclass(frozen=True, slots=True)
class HeartbeatPolicy:
    every: timedelta | None = timedelta(minutes=30)  # None: heartbeats off
    active_hours: ActiveHours = field(default_factory=ActiveHours)
    daily_token_cap: int = 150_000  # 0: no cap
    busy_retry: timedelta = timedelta(minutes=1)
    ack_max_chars: int = DEFAULT_ACK_MAX_CHARS
    repeat_window: timedelta = timedelta(hours=24)
    timeout_seconds: float = 120.0
    jitter_fraction: float = 0.1

    def describe(self) -> str:
        """One line for people (CLI status, web panel): how often, when, how much."""
        if self.every is None:
            return "off"
        cap = f"{self.daily_token_cap:,} tokens a day" if self.daily_token_cap else "no token cap"
        return f"every {format_interval(self.every)}, active {self.active_hours.describe()}, {cap}"


@dataclass(frozen=True, slots=True)
class BeatOutcome:
    status: Status
    reason: str
    tokens: int = 0
    text: str = ""  # the alert (delivered, or the one that was suppressed)
    retry_in: timedelta | None = None  # deferred: try again this soon

    @property
    def model_called(self) -> bool:
        return self.status in ("ok", "repeat", "alert") or self.tokens > 0

    def describe(self) -> str:
        tokens = f", {self.tokens:,} tokens" if self.tokens else ""
        return f"{self.status}: {self.reason}{tokens}"


class Heartbeat:
    """The beat of one workspace. `deliver=False` (the CLI) reports the alert instead."""

    def __init__(
        self,
        workspace: Path,
        person_id: str,
        host: HeartbeatHost,
        policy: HeartbeatPolicy,
        clock: Clock,
        *,
        deliver: bool = True,
        on_outcome: Callable[[BeatOutcome], Awaitable[None]] | None = None,
    ) -> None:
        self.workspace = workspace
        self.person_id = person_id
        self.host = host
        self.policy = policy
        self.clock = clock
        self.deliver = deliver
        # Told about every outcome (the gateway counts them and versions what a beat wrote).
        self.on_outcome = on_outcome
        self._checklist: tuple[tuple[int, ...], Checklist] | None = None  # per file version

    async def beat(self) -> BeatOutcome:
        now = self.clock.now()
        state = await asyncio.to_thread(load_state, self.workspace)
        try:
            outcome = await self._beat(state, now)
        except Exception as exc:  # a bug must not kill the timer; the next beat tries again
            log.exception("heartbeat for %s failed", self.person_id)
            outcome = BeatOutcome("error", f"internal error: {type(exc).__name__}")
        state.last_beat_at = now
        state.last_status, state.last_reason = outcome.status, outcome.reason
        await asyncio.to_thread(save_state, self.workspace, state)
        level = logging.INFO if outcome.status in ("alert", "error", "capped") else logging.DEBUG
        log.log(level, "heartbeat %s: %s", self.person_id, outcome.describe())
        if self.on_outcome is not None:
            try:
                await self.on_outcome(outcome)
            except Exception:
                log.exception("heartbeat outcome hook failed for %s", self.person_id)
        return outcome

    async def plan(self, next_at: datetime) -> None:
        """Record when the next beat is due (for `clawgate heartbeat status`)."""
        state = await asyncio.to_thread(load_state, self.workspace)
        state.next_beat_at = next_at
        await asyncio.to_thread(save_state, self.workspace, state)

    async def _beat(self, state: HeartbeatState, now: datetime) -> BeatOutcome:
        checklist = await asyncio.to_thread(self._read_checklist)
        if checklist is None:
            return BeatOutcome("skipped", f"{CHECKLIST_FILE} is missing")
        if checklist.empty:
            return BeatOutcome("skipped", f"{CHECKLIST_FILE} is effectively empty")
        due = checklist.due(state.task_runs, now)
        if checklist.body_empty and not due:
            return BeatOutcome("skipped", "no task is due")
        hours = self.policy.active_hours
        if not hours.contains(now):
            return BeatOutcome("skipped", f"outside active hours ({hours.describe()})")
        capped = await self._over_budget(state, now)
        if capped is not None:
            return capped
        target = await self.host.dm_target(self.person_id)
        if target is None:
            return BeatOutcome(
                "skipped",
                "no DM route yet: the person has not written to the "
                "assistant in a direct message on a running channel",
            )
        if self.host.dm_busy(self.person_id):
            return BeatOutcome(
                "deferred", "the DM session is busy", retry_in=self.policy.busy_retry
            )
        return await self._ask(state, now, checklist, due, target)

    def _read_checklist(self) -> Checklist | None:
        """The checklist, parsed once per version of the file; its problems are logged then,
        not at every beat."""
        try:
            st = os.stat(self.workspace / CHECKLIST_FILE)
            signature: tuple[int, ...] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            signature = None
        if (
            signature is not None
            and self._checklist is not None
            and self._checklist[0] == signature
        ):
            return self._checklist[1]
        checklist = load_checklist(self.workspace)
        if checklist is not None:
            for problem in checklist.problems:
                log.warning("%s of %s: %s", CHECKLIST_FILE, self.person_id, problem)
            if signature is not None:
                self._checklist = (signature, checklist)
        return checklist

    async def _over_budget(self, state: HeartbeatState, now: datetime) -> BeatOutcome | None:
        cap = self.policy.daily_token_cap
        day = self.policy.active_hours.local_date(now)
        if not cap or state.tokens_on(day) < cap:
            return None
        reason = f"daily token cap reached ({state.tokens_on(day):,} of {cap:,} today)"
        if state.cap_notice_day != day.isoformat():
            state.cap_notice_day = day.isoformat()
            log.warning("heartbeat %s: %s; no more beats today", self.person_id, reason)
            target = await self.host.dm_target(self.person_id)
            if target is not None and self.deliver:
                try:
                    await self.host.deliver(
                        self.workspace,
                        self.person_id,
                        target,
                        CAP_NOTICE.format(cap=cap),
                        alert=False,
                    )
                except Exception as exc:
                    log.warning("heartbeat %s: cap notice not delivered: %s", self.person_id, exc)
        return BeatOutcome("capped", reason)

    async def _ask(
        self,
        state: HeartbeatState,
        now: datetime,
        checklist: Checklist,
        due: list[Task],
        target: DmTarget,
    ) -> BeatOutcome:
        try:
            turn = await asyncio.wait_for(
                self.host.light_turn(
                    self.workspace, self.person_id, checklist.render(due), STANDING_PROMPT
                ),
                self.policy.timeout_seconds,
            )
        except TimeoutError:
            return BeatOutcome(
                "error", f"the model did not answer in {self.policy.timeout_seconds:.0f} s"
            )
        except Exception as exc:
            kind = getattr(exc, "kind", "") or type(exc).__name__
            return BeatOutcome("error", f"model call failed ({kind})")
        state.add_tokens(self.policy.active_hours.local_date(now), turn.tokens)
        for task in due:
            state.task_runs[task.name] = now
        check = check_reply(turn.reply, self.policy.ack_max_chars)
        if check.acknowledged:
            return BeatOutcome("ok", "nothing needs attention (HEARTBEAT_OK)", turn.tokens)
        window = self.policy.repeat_window
        earlier = state.delivered_recently(check.text, now, window)
        if earlier is not None:
            local = earlier.astimezone(self.policy.active_hours.zone)
            return BeatOutcome(
                "repeat",
                f"same alert already delivered at {local:%Y-%m-%d %H:%M %Z}",
                turn.tokens,
                check.text,
            )
        if not self.deliver:
            return BeatOutcome(
                "alert",
                f"not sent from the command line (would go to "
                f"{target.channel} chat {target.chat_id})",
                turn.tokens,
                check.text,
            )
        try:
            await self.host.deliver(self.workspace, self.person_id, target, check.text, alert=True)
        except Exception as exc:
            return BeatOutcome(
                "error",
                f"delivery to {target.channel} failed ({type(exc).__name__})",
                turn.tokens,
                check.text,
            )
        state.remember_alert(check.text, now, window)
        return BeatOutcome(
            "alert", f"delivered to {target.channel} chat {target.chat_id}", turn.tokens, check.text
        )
