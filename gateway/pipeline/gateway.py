"""The Gateway object: takes in one message, and starts and stops the parts it moves it with.

Channel → inbox record → access → limits → routing → (slash command | session lane → turn
runner) → delivery. The channel's handler (`handle`) only records and hands over: nothing in
it waits for a platform, so one slow or rate-limited chat never stalls another person. Every
outbound message goes through `self.delivery` (gateway/pipeline/delivery.py); turns are run
by `self.turns` (gateway/pipeline/turns.py). The parts are built by gateway/pipeline/parts.py
and handed over ready; the assembly and the panel see the Gateway through the protocols of
gateway/pipeline/ports.py. No global state: tests build a Gateway (`Gateway.build`) with
fakes in place of the provider, channels and clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from channels.base import Channel, InboundMessage
from channels.terminal import LOCAL_CHAT as TERMINAL_CHAT
from gateway.agent.providers.base import ModelInfo, Provider
from gateway.agent.scope import usage_scope
from gateway.agent.tools import Tool
from gateway.clock import Clock
from gateway.config.settings import Settings
from gateway.ops.redaction import Redactor
from gateway.ops.state import DmRoute, StateDB
from gateway.pipeline.access import AccessPolicy
from gateway.pipeline.commands import Command, CommandContext, lookup, parse_command
from gateway.pipeline.lanes import Job
from gateway.pipeline.limits import Account
from gateway.pipeline.parts import GatewayParts, build_parts
from gateway.pipeline.presses import ANSWERS, Presses
from gateway.pipeline.recovery import answer_key
from gateway.pipeline.routing import TERMINAL_CHANNEL, Route
from gateway.pipeline.turns import INTERNAL_ERROR_REPLY, TranscriptWriteError
from gateway.pipeline.voice_choice import VoiceChoices
from gateway.pipeline.welcome import ApprovalFollowUp
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff

if TYPE_CHECKING:
    from gateway.agent.context_files import ContextFile
    from gateway.agent.metrics import Registry
    from gateway.agent.scope import UsageScope
    from gateway.agent.sessions import Session
    from gateway.agent.tools import ToolRegistry
    from gateway.agent.tools.quota import TurnBudget
    from gateway.agent.tools.schedule_tools import ScheduleBook
    from gateway.pipeline.budgets import CapStatus
    from gateway.pipeline.delivery import Outcome
    from gateway.pipeline.voice_reply import VoiceReplies
    from memory.service import MemoryService

log = logging.getLogger(__name__)

PERSIST_REPLY = (
    "I couldn't save your message on my side (a storage problem), so I haven't answered it "
    "yet. I'll keep trying and answer as soon as it works."
)
# Tries to append a message the transcript refused, before leaving it for the next start.
PERSIST_ATTEMPTS = 8
EMPTY_MESSAGE_REPLY = "I got an empty message. Send me some text (or /help)."
MEDIA_REPLY = (
    "Thanks! For now I can only read text, so I can't look at that {kind}. "
    "Could you describe it in words?"
)


class Gateway:
    """Takes in one message and moves it along; owns the parts' start and stop.

    Built from ready parts (gateway/pipeline/parts.py): `Gateway.build(settings, provider,
    ...)` wires them from settings. The parts around it (gateway/assembly/, the panel) see it
    through the narrow protocols of gateway/pipeline/ports.py, which it implements.
    """

    def __init__(self, parts: GatewayParts) -> None:
        p = self.parts = parts  # each part's job: gateway/pipeline/parts.py
        self.settings, self.provider, self.clock, self.redactor = (
            p.settings, p.provider, p.clock, p.redactor)
        self.access, self.channels, self.state, self.router = (
            p.access, p.channels, p.state, p.router)
        self.sessions, self.lanes, self.limits, self.turns = (
            p.sessions, p.lanes, p.limits, p.turns)
        self.metrics, self.versioning, self.capabilities, self.delivery = (
            p.metrics, p.versioning, p.capabilities, p.delivery)
        self.models, self.usage, self.budgets, self.metered = (
            p.models, p.usage, p.budgets, p.metered)
        self.setup, self.media = p.setup, p.media
        p.budgets.notify = self._budget_note  # notes for the owner go to their DM
        self._resumed = asyncio.Event()  # cleared while start() re-queues: new messages wait
        self._resumed.set()
        self.accepting = True  # False once stopping: new messages wait for the next start
        self._workspace_listeners: list[Callable[[str], object]] = []  # on_new_workspace
        self._seeded: set[str] = set()
        self.persist_backoff = Backoff(1.0, 60.0)  # between tries to save a refused message
        # Welcomes the newly approved, and answers what they wrote while waiting (as resumed).
        self.approvals = ApprovalFollowUp(self.state, self.channels, self._announce,
                                          lambda msg: self._process(msg, resumed=True))
        self.memory: MemoryService | None = None  # use_memory: recall and the memory tools
        self.schedules: ScheduleBook | None = None  # use_schedules: /reminders, the panel
        self.presses: Presses | None = None  # use_presses: exec approvals (buttons, /approve)

    @classmethod
    def build(
        cls,
        settings: Settings,
        provider: Provider,
        *,
        channels: Sequence[Channel] = (),
        clock: Clock | None = None,
        access: AccessPolicy | None = None,
        private_tools: Sequence[Tool] = (),
        state: StateDB | None = None,
        redactor: Redactor | None = None,
    ) -> Gateway:
        """A Gateway wired from `settings` (tests give fakes for the provider, channels and
        clock; gateway/assembly/ builds the real ones)."""
        return cls(build_parts(settings, provider, channels=channels, clock=clock,
                               access=access, private_tools=private_tools, state=state,
                               redactor=redactor))

    async def start(self) -> None:
        """Open the state database, start every channel, then resume what was left undone:
        messages recorded but not answered, and replies recorded but not delivered.

        On failure some parts may be up: the caller unwinds with `stop()` (the assembly in
        gateway/assembly/builder.py registers it before calling start).
        """
        self.accepting = True
        self._resumed.clear()
        try:
            await self.state.open()
            await self.capabilities.start()  # MCP servers (bounded by their start-up timeouts)
            pending = [m for m in await self.state.pending_inbound() if m.channel in self.channels]
            for channel in self.channels.values():
                await channel.start(self.handle)
            await self.delivery.resume()
            if self.parts.voice is not None:
                await self._sweep_voice_notes(self.parts.voice)
            if self.presses is not None:
                await self.presses.start()  # questions not shown yet, approvals not run yet
            if pending:
                log.info("resuming %d message(s) recorded but not answered before", len(pending))
            for msg in pending:
                self.turns.resuming.add((msg.channel, msg.chat_id, msg.message_id))
                await self._process_or_answer(msg, resumed=True)
            if any(name != TERMINAL_CHANNEL for name in self.channels):
                await self.approvals.start()
        finally:
            self._resumed.set()

    async def _sweep_voice_notes(self, voice: VoiceReplies) -> None:
        """Voice notes a crash left behind (their row finished, the file not yet removed)."""
        try:
            keep = {m.file for m in await self.state.pending_outbound() if m.file}
            removed = await asyncio.to_thread(voice.sweep, keep)
        except Exception:  # housekeeping: never a reason not to start
            log.exception("could not tidy the voice notes folder")
            return
        if removed:
            log.info("removed %d voice note(s) left behind by an earlier run", removed)

    def use_memory(self, memory: MemoryService) -> None:
        """Give the owner's DM sessions recall: the memory tools, backed by `memory`."""
        self.memory = memory
        if self.turns.recall is None and self.settings.memory.auto_recall:
            from gateway.pipeline.auto_recall import AutoRecall, RecallOptions

            self.turns.recall = AutoRecall(memory, RecallOptions.from_settings(
                self.settings.memory), self.metrics.registry)
        self.setup.use_memory(memory)

    def add_private_tools(self, tools: Sequence[Tool], *,
                          offered: Callable[[str], bool] | None = None) -> None:
        """More tools for the owner's private contexts only (the schedule tools);
        `offered(person_id)`: whose private contexts get them (default: everyone's)."""
        self.setup.add_private_tools(tools, offered=offered)

    def add_shared_tools(self, tools: Sequence[Tool]) -> None:
        """More tools for group chats too (the web tools when `[web] groups` is on); private
        contexts get them through add_private_tools."""
        self.setup.add_shared_tools(tools)

    def stop_intake(self) -> None:
        """From now on a new message is recorded (platforms) but not answered in this run:
        the next start answers it. Called first thing when the gateway is asked to stop."""
        self.accepting = False

    async def stop(self, drain_timeout: float = 30.0) -> None:
        """Stop intake, let running turns finish for `drain_timeout` seconds, then close.

        A turn still running after that is cancelled: the person's message is already
        recorded (and not marked done), so the next start answers it. Every part is closed
        even if another fails to, so no database thread keeps the process alive.
        """
        self.stop_intake()
        await self.approvals.stop()
        # Counted before anything is cancelled: `wait_for(drain())` would cancel the turns
        # themselves on its timeout, and then count none ("0 turn(s) still running").
        draining = asyncio.ensure_future(self.lanes.drain())
        _, late = await asyncio.wait({draining}, timeout=drain_timeout)
        if late:
            pending = self.lanes.depth()
            log.warning("stopping with %d turn(s) still running after %.1f s: left pending "
                        "for the next start", pending, drain_timeout)
            await self.lanes.cancel()
            draining.cancel()
            await asyncio.gather(draining, return_exceptions=True)
        if self.presses is not None:
            try:
                await self.presses.stop()
            except Exception:
                log.exception("error while stopping the approvals; carrying on")
        await self.delivery.close(min(drain_timeout, 5.0))
        closers = [*(channel.stop for channel in self.channels.values()),
                   self.capabilities.stop,  # MCP servers
                   self.models.close,
                   self.parts.accounting.settled,  # the last calls' usage, before the database
                   self.state.close]
        if self.media is not None:
            closers.append(self.media.close)
        if self.parts.voice is not None:
            closers.append(self.parts.voice.close)
        if self.memory is not None:
            closers.append(self.memory.close)
        for close in closers:
            try:
                await close()
            except Exception:
                log.exception("error while stopping (%s); carrying on",
                              getattr(close, "__qualname__", close))

    async def handle(self, msg: InboundMessage) -> None:
        """Entry point for every channel. Returns once the message is queued, not answered.

        A platform message is first recorded durably in the state database; only then may the
        channel acknowledge it to the platform (an exception here means: do not acknowledge).
        A message recorded before (same channel, chat and message id) is a redelivery and is
        ignored, so a restart never answers twice. Nothing here waits for a send.
        """
        if msg.press:
            await self._press(msg)
            return
        if self._durable(msg) and not await self.state.record_inbound(msg):
            log.info("ignored redelivered %s message %s", msg.channel, msg.message_id)
            return
        if not self.accepting:
            log.info("stopping: %s message %s is answered after the next start",
                     msg.channel, msg.message_id)
            return
        await self._resumed.wait()
        await self._process_or_answer(msg)

    async def _press(self, msg: InboundMessage) -> None:
        """A button press: decided at once, outside every lane (the turn that asked may be
        waiting for it), by whoever registered for presses; never a message, never the
        model's. A press while stopping is dropped: the question stays pending (a durable
        row), and its button can be pressed again after the restart."""
        if not self.accepting:
            return
        await self._resumed.wait()
        if self.presses is None:
            log.info("ignored a button press on %s: nothing takes presses", msg.channel)
            return
        try:
            await self.presses.pressed(msg)
        except Exception:
            log.exception("could not handle a button press on %s", msg.channel)

    def use_presses(self, presses: Presses) -> None:
        """Who answers button presses and /approve, /deny (gateway/assembly/exec.py)."""
        self.presses = presses

    async def person_for(self, channel: str, sender_id: str) -> str:
        """The person behind an account (identity links; the terminal is the owner)."""
        return await self.router.person_for(channel, sender_id)

    async def owner_dm(self) -> tuple[str, str] | None:
        """The owner's DM to ask in: (channel, chat id), or None before they ever wrote."""
        route = await self.last_dm_route(self.settings.owner)
        if route is None or route.channel not in self.channels:
            return None
        return route.channel, route.chat_id

    async def _process_or_answer(self, msg: InboundMessage, *, resumed: bool = False) -> None:
        """`_process`, and a short error reply when it fails before a turn is queued (access,
        routing, seeding the workspace): a message never waits silently for the next start.
        If even the reply cannot be queued (the state database fails), the message stays
        pending and the next start takes it up again."""
        try:
            await self._process(msg, resumed=resumed)
        except Exception:
            log.exception("could not process %s message %s", msg.channel, msg.message_id)
            try:
                await self._answer_now(msg, INTERNAL_ERROR_REPLY)
            except Exception:
                log.exception("could not answer %s message %s either; it stays pending",
                              msg.channel, msg.message_id)

    async def _process(self, msg: InboundMessage, *, resumed: bool = False) -> None:
        decision = await self.access.check(msg)
        if not decision.allowed:
            await self._answer_now(msg, decision.reply,
                                   "waiting" if decision.waiting else "denied")
            return
        if self._durable(msg):
            await self.approvals.before_allowed(msg)
        account: Account = (msg.channel, msg.sender_id)
        # A message accepted before a restart was within the limits then: it is neither
        # refused nor counted now (the limits are for what arrives).
        admitted, limited = (True, "") if resumed else self.limits.admit(account)
        if not admitted:
            await self._answer_now(msg, limited, "over_limit")
            return
        counted = not resumed
        try:
            route = await self.router.resolve(msg)
            await self._ensure_workspace(route)
            # The terminal is no route for later sends: `clawgate run` has no terminal (while
            # a chat runs, last_dm_route falls back to it for its owner).
            if msg.chat_type == "direct" and self._durable(msg) \
                    and msg.channel != TERMINAL_CHANNEL:
                await self.state.set_last_dm_route(
                    route.person_id, msg.channel, msg.chat_id, msg.sender_id, msg.received_at
                )
            command = parse_command(msg.text)
            if command is None and not msg.text.strip() and not (
                    msg.attachments and self.media is not None):
                kind = msg.attachment
                await self._answer_now(
                    msg, MEDIA_REPLY.format(kind=kind) if kind else EMPTY_MESSAGE_REPLY)
                if counted:
                    self.limits.release(account)
                return
            if command is None and await self._refused_for_budget(route, msg):
                if counted:
                    self.limits.release(account)
                return
            if command is None:
                key, job = route.session_key, self._turn_job(route, msg)
            elif command.name in ANSWERS and self.presses is not None:
                key, job = f"{route.session_key}#now", self._answer_job(msg, command)
            else:
                # A command that changes the session waits for the running turn; the others
                # answer at once, in a lane of their own (in order among themselves).
                queued = lookup(command.name).queued
                key = route.session_key if queued else f"{route.session_key}#now"
                job = self._command_job(route, command, msg)
        except BaseException:
            if counted:
                self.limits.release(account)
            raise
        self.lanes.submit(key, self._released(account, job) if counted else job)

    def _released(self, account: Account, job: Job) -> Job:
        async def run() -> None:
            try:
                await job()
            finally:
                self.limits.release(account)

        return run

    async def _answer_now(self, msg: InboundMessage, text: str, status: str = "done") -> None:
        """Answer without a turn (pairing code, refusal, media reply): queued, not awaited.

        A `waiting` message (its sender holds a pairing code) gets its real answer after an
        approval, so the code it gets now must not use up the message's answer key.
        """
        durable = self._durable(msg)
        key = answer_key(msg) + (":pairing" if status == "waiting" else "")
        await self.delivery.deliver(
            msg.channel, msg.chat_id, text, key=key if durable else None,
            done=msg if durable else None, done_status=status,
        )

    async def _refused_for_budget(self, route: Route, msg: InboundMessage) -> bool:
        """Answer `msg` with the polite refusal if its person or group is at a cap (when it
        arrives, and again when its turn would start: a burst queues behind the first turn).
        The cap itself holds at each model call (Accounting.admit); this spares a message
        that cannot be answered its place in the transcript."""
        refusal = await self.budgets.refusal(route.person_id, route.group)
        if refusal is None:
            return False
        self.metrics.budget_refusals.inc(kind="conversation")
        await self._answer_now(msg, refusal, "over_budget")
        return True

    async def _budget_note(self, text: str, key: str) -> None:
        """A budget note for the owner (gateway/pipeline/budgets.py), once per `key`."""
        if not await self.send_to_person(self.settings.owner, text, key=key):
            log.warning("budget note not sent: the owner has no DM route yet")

    async def _announce(self, channel: str, chat_id: str, text: str, key: str) -> None:
        """A message no one asked for right now (a welcome); `key` names it once."""
        await self.delivery.deliver(channel, chat_id, text, key=key)

    async def last_dm_route(self, person_id: str) -> DmRoute | None:
        """Where `person_id` last wrote to us in a DM (channel and chat), for proactive sends.

        While a terminal chat runs, it is the owner's DM unless they wrote from a platform
        channel that is running too (heartbeat alerts appear in `clawgate chat`).
        """
        route = await self.state.last_dm_route(person_id)
        if ((route is None or route.channel not in self.channels)
                and TERMINAL_CHANNEL in self.channels and person_id == self.settings.owner):
            return DmRoute(person_id, TERMINAL_CHANNEL, TERMINAL_CHAT, TERMINAL_CHAT,
                           self.clock.now())
        return route

    async def send_to_person(self, person_id: str, text: str, *, key: str | None = None) -> bool:
        """Deliver `text` to the person's last DM route; False if they never wrote in a DM.

        `key` makes it exactly-once (a scheduler's fire id): a second call with it sends nothing.
        """
        route = await self.last_dm_route(person_id)
        if route is None or route.channel not in self.channels:
            return False
        await self.delivery.deliver(route.channel, route.chat_id, text, key=key)
        return True

    def _durable(self, msg: InboundMessage) -> bool:
        """Platform messages go through the inbox; a channel that is not durable does not."""
        channel = self.channels.get(msg.channel)
        return channel is not None and channel.durable and bool(msg.message_id)

    def command_context(self, route: Route, args: str = "") -> CommandContext:
        """What a slash command may use (also the panel's session actions)."""
        return CommandContext(route, args, self.settings, self.sessions, self.parts.compactor,
                              self.models.for_person(route.person_id), self.setup, self.schedules,
                              usage=self.usage, budgets=self.budgets,
                              voice=VoiceChoices(self.settings.media.speech))

    def _command_job(self, route: Route, command: Command, msg: InboundMessage) -> Job:
        async def job() -> None:
            with usage_scope(route.person_id, "conversation", route.group):  # /compact
                answer = await lookup(command.name).handler(
                    self.command_context(route, command.args))
            await self._answer_now(msg, answer)

        return job

    def _answer_job(self, msg: InboundMessage, command: Command) -> Job:
        """/approve or /deny: answered at once, beside a turn that may wait for it."""
        presses = self.presses

        async def job() -> None:
            assert presses is not None
            answer = await presses.typed(msg.channel, msg.sender_id, command.name,
                                         command.args)
            await self._answer_now(msg, answer)

        return job

    def _turn_job(self, route: Route, msg: InboundMessage) -> Job:
        """The turn, retried while the transcript refuses the message (told once, politely);
        after PERSIST_ATTEMPTS tries it stays pending for the next start."""

        async def job() -> None:
            try:
                if await self._refused_for_budget(route, msg):
                    return
            except Exception:  # the turn's model calls are checked again (Accounting.admit)
                log.exception("budget check before the turn for %s message %s failed",
                              msg.channel, msg.message_id)
            backoff = Backoff(self.persist_backoff.first, self.persist_backoff.cap)
            for attempt in range(1, PERSIST_ATTEMPTS + 1):
                try:
                    async with self.channels[route.channel].typing(route.chat_id):
                        with usage_scope(route.person_id, "conversation", route.group):
                            await self.turns.run(route, msg, durable=self._durable(msg))
                    return
                except TranscriptWriteError as exc:
                    log.error("could not save %s message %s to the transcript (%s); "
                              "try %d of %d", msg.channel, msg.message_id, exc, attempt,
                              PERSIST_ATTEMPTS)
                    if attempt == 1:
                        key = f"persist:{answer_key(msg)}" if self._durable(msg) else None
                        await self.delivery.deliver(route.channel, route.chat_id,
                                                    PERSIST_REPLY, key=key)
                    if attempt < PERSIST_ATTEMPTS:
                        await asyncio.sleep(backoff.next())
                except Exception:
                    # The turn raises only before its reply is queued (TurnRunner.run): one
                    # short error reply, never a second answer.
                    log.exception("turn for %s message %s failed before its reply",
                                  msg.channel, msg.message_id)
                    await self._answer_now(msg, INTERNAL_ERROR_REPLY)
                    return
            log.error("%s message %s stays pending; it is tried again at the next start",
                      msg.channel, msg.message_id)

        return job

    async def _ensure_workspace(self, route: Route) -> None:
        if route.person_id not in self._seeded:
            await asyncio.to_thread(ensure_workspace, self.settings.workspaces_dir, route.person_id)
            await self.versioning.ensure_repo(route.workspace)
            self._seeded.add(route.person_id)
            for listener in self._workspace_listeners:
                try:
                    listener(route.person_id)
                except Exception:
                    log.exception("workspace listener failed for %s", route.person_id)


    def on_new_workspace(self, listener: Callable[[str], object]) -> None:
        """Call `listener(person_id)` when a workspace is first used in this run (the
        assembly starts that person's heartbeat timer at once, not at its rescan)."""
        self._workspace_listeners.append(listener)

    # -- the ports (gateway/pipeline/ports.py): what the parts around the gateway may do ----

    def run_in_lane(self, key: str, job: Job) -> asyncio.Future[None]:
        return self.lanes.submit(key, job)

    def lane_busy(self, key: str) -> bool:
        return self.lanes.is_busy(key)

    def queue_depth(self) -> int:
        """Turns running or queued, in every lane."""
        return self.lanes.depth()

    async def session(self, workspace: Path, key: str) -> Session:
        return await self.sessions.get(workspace, key)

    def channel(self, name: str) -> Channel | None:
        return self.channels.get(name)

    def runs_channel(self, name: str) -> bool:
        return name in self.channels

    def channel_names(self) -> frozenset[str]:
        return frozenset(self.channels)

    async def deliver(self, channel: str, chat_id: str, text: str, *,
                      key: str | None = None) -> asyncio.Future[Outcome]:
        """Through the outbox (gateway/pipeline/delivery.py); the future says how the first
        try went."""
        return await self.delivery.deliver(channel, chat_id, text, key=key)

    async def stored_dm_route(self, person_id: str) -> DmRoute | None:
        """The last DM route the state database recorded (a platform's, never the terminal)."""
        return await self.state.last_dm_route(person_id)

    async def commit(self, workspace: Path, reason: str, *, session: str = "",
                     note: str = "") -> str | None:
        return await self.versioning.commit(workspace, reason, session=session, note=note)

    def model_for(self, scope: UsageScope) -> ModelInfo:
        return self.models.for_scope(scope)

    def light_files(self, workspace: Path, *, today: date,
                    names: Sequence[str]) -> list[ContextFile]:
        return self.setup.light_files(workspace, today=today, names=names)

    def heartbeat_tools(self, person_id: str, workspace: Path) -> ToolRegistry:
        return self.setup.heartbeat_tools(person_id, workspace)

    def turn_budget(self) -> TurnBudget:
        return self.setup.turn_budget()

    def count_heartbeat(self, status: str) -> None:
        self.metrics.heartbeat(status)

    @property
    def registry(self) -> Registry:
        """The /metrics registry, for parts that export their own series."""
        return self.metrics.registry

    def use_schedules(self, desk: ScheduleBook) -> None:
        """/reminders and the panel's reminders page use `desk`."""
        self.schedules = desk

    def add_secret(self, secret: str | None) -> None:
        """One more secret masked in tool results and logs."""
        self.redactor.add(secret)

    async def budget_status(self, person: str) -> list[CapStatus]:
        return await self.budgets.status(person)

    async def readiness(self, started: bool = True) -> dict[str, Any]:
        from gateway.pipeline.health import readiness

        return await readiness(self, started)
