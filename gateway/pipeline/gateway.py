"""The Gateway object: owns and wires the parts, and takes in one message.

Channel → inbox record → access → limits → routing → (slash command | session lane → turn
runner) → delivery. The channel's handler (`handle`) only records and hands over: nothing in
it waits for a platform, so one slow or rate-limited chat never stalls another person. Every
outbound message goes through `self.delivery` (gateway/pipeline/delivery.py); turns are run
by `self.turns` (gateway/pipeline/turns.py). No global state: tests build a Gateway with
fakes in place of the provider, channels and clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from channels.base import Channel, InboundMessage
from channels.terminal import LOCAL_CHAT as TERMINAL_CHAT
from gateway.agent.compaction import Compactor
from gateway.agent.context_files import ContextFile, ContextFileLoader
from gateway.agent.conversation import SystemPrompt
from gateway.agent.loop import AgentLoop
from gateway.agent.prompt import build_system_prompt, speaker_line
from gateway.agent.providers import ModelRouter, build_router, models_in_use
from gateway.agent.providers.base import Provider
from gateway.agent.scope import usage_scope
from gateway.agent.sessions import SessionStore
from gateway.agent.tools import Tool, ToolContext, ToolRegistry, file_tools
from gateway.agent.tools.corrections import correction_tools
from gateway.agent.tools.quota import DiskUsage, Quotas, TurnBudget
from gateway.agent.tools.send_file import SendFileTool
from gateway.capabilities.hub import Capabilities
from gateway.clock import Clock, SystemClock
from gateway.config.settings import Settings
from gateway.ops.metrics import GatewayMetrics, MeteredProvider
from gateway.ops.prices import PriceTable
from gateway.ops.redaction import Redactor
from gateway.ops.state import DmRoute, StateDB
from gateway.ops.usage import UsageLedger
from gateway.ops.versioning import Versioning
from gateway.pipeline.access import AccessPolicy, LocalOnlyAccess
from gateway.pipeline.budgets import Accounting, Budgets
from gateway.pipeline.commands import Command, CommandContext, lookup, parse_command
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.files_out import ChatOutbox
from gateway.pipeline.lanes import Job, Lanes
from gateway.pipeline.limits import Account, PersonLimits
from gateway.pipeline.recovery import Retries, answer_key
from gateway.pipeline.replies import endpoint_host
from gateway.pipeline.routing import TERMINAL_CHANNEL, Route, Router
from gateway.pipeline.turns import INTERNAL_ERROR_REPLY, TranscriptWriteError, TurnRunner
from gateway.pipeline.welcome import ApprovalFollowUp
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff

if TYPE_CHECKING:
    from gateway.agent.media.intake import MediaIntake, UserContent
    from gateway.agent.tools.schedule_tools import ScheduleBook
    from gateway.capabilities.contexts import ContextKind
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


def base_tools() -> list[Tool]:
    """The tools of every chat: the file tools and send_file."""
    return [*file_tools(), SendFileTool()]


class Gateway:
    def __init__(
        self,
        settings: Settings,
        provider: Provider,
        *,
        channels: Sequence[Channel] = (),
        clock: Clock | None = None,
        access: AccessPolicy | None = None,
        private_tools: Sequence[Tool] = (),
        state: StateDB | None = None,
        memory: MemoryService | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.settings = settings
        # Masks every configured secret in tool results (gateway/ops/redaction.py); share it
        # with the log formatter so secrets added later (`redactor.add`) are masked there too.
        self.redactor = redactor or Redactor.from_settings(settings)
        self.provider = provider
        self.clock = clock or SystemClock()
        self.access = access or LocalOnlyAccess()
        self.channels = {channel.name: channel for channel in channels}
        # Inbox, identity links, approvals, last DM routes (gateway/ops/state.py). Opened by start.
        self.state = state or settings.state_db()
        self.router = Router(settings.workspaces_dir, settings.owner, self.state)
        # Cleared while start() re-queues what a previous run recorded but did not answer, so
        # a new message cannot overtake an older one of the same person.
        self._resumed = asyncio.Event()
        self._resumed.set()
        self.accepting = True  # False once stopping: new messages wait for the next start
        # Called with the person id when a workspace is first used in this run (the assembly
        # lets the heartbeat service start that person's timer at once, not at its rescan).
        self.workspace_listeners: list[Callable[[str], object]] = []
        self.sessions = SessionStore(self.clock)
        self.lanes = Lanes()
        # Two registries, decided by the route: tools that reach private memory (recall, say)
        # do not exist at all in a session that is not the owner's DM.
        self.shared_tools = ToolRegistry(base_tools(), redact=self.redactor)
        # Corrections (memory_find, memory_correct) need no index: every private context has them.
        private_tools = [*correction_tools(self._today), *private_tools]
        self.private_tools = ToolRegistry([*base_tools(), *private_tools], redact=self.redactor)
        self._extra_private_tools = list(private_tools)
        self._extra_shared_tools: list[Tool] = []
        # Operations (gateway/ops/metrics.py, gateway/ops/versioning.py): counters for /metrics,
        # and a git commit per workspace change. The metered provider times and counts model calls.
        self.metrics = GatewayMetrics(
            [*self.shared_tools.names(), *self.private_tools.names()]
        )
        self.metrics.queue_depth.collect_with(lambda: {(): self.lanes.depth()})
        self.versioning = Versioning(
            enabled=settings.versioning.enabled,
            on_commit=lambda reason: self.metrics.commits.inc(reason=reason),
        )
        tools = settings.tools
        self.quotas = Quotas(tools.workspace_max_bytes, tools.group_area_max_bytes,
                             tools.turn_write_max_bytes, tools.step_max_tool_calls,
                             tools.turn_max_tool_calls)
        self.disk_usage = DiskUsage()  # one per gateway: every turn's view of disk use
        # Model routing (fallbacks, background model, per-person models) and accounting
        # (usage ledger, prices, budgets): gateway/agent/providers/routing.py,
        # gateway/ops/usage.py, gateway/pipeline/budgets.py. Every model call of every kind
        # of turn goes through `self.metered`.
        self.models = provider if isinstance(provider, ModelRouter) else build_router(
            settings, provider, on_fallback=lambda p, e: self.metrics.fallback(p.model, e.kind))
        self.metrics.register_models(ref.model for _, ref in models_in_use(settings))
        self.usage = UsageLedger(self.state, PriceTable(settings.prices), self.clock,
                                 settings.zone())
        self.budgets = Budgets(settings, self.usage, self._budget_note)
        self.accounting = Accounting(self.usage, self.budgets, self.metrics)
        metered = self.metered = MeteredProvider(self.models, self.metrics, self.accounting)
        # Voice notes, photos, documents (gateway/agent/media/): None when [media] is off.
        self.media = self._media_intake(settings, provider)
        window = None
        if self.media is not None and self.media.vision:
            from gateway.agent.media.window import ImageWindow

            window = ImageWindow(settings.media.images_in_context)
        self.agent = AgentLoop(metered, settings.llm.max_tool_rounds, images=window)
        self.compactor = Compactor(
            metered, self.agent, settings.llm, settings.compaction, self.clock, settings.zone(),
            metrics=self.metrics, versioning=self.versioning,
        )
        self.loader = ContextFileLoader(
            settings.prompt.file_max_chars, settings.prompt.total_max_chars
        )
        # --- capabilities (issue 17): skills and MCP tool servers, decided per context ---
        self.capabilities = Capabilities(settings)
        self.capabilities.register_metrics(self.metrics.registry)
        self._zone = settings.zone()
        self._seeded: set[str] = set()
        # The one way out (outbox, per-chat ordered senders, retries) and the turn runner.
        self.delivery = Delivery(self.channels, self.state, self.metrics)
        self.turns = TurnRunner(
            self.sessions, self.agent, self.compactor, self, self.delivery, self.metrics,
            self.versioning, Retries(self.state, self.delivery, self.metrics),
            deadline_seconds=settings.limits.turn_deadline_seconds,
            model=provider.model,
            host=endpoint_host(settings.llm.provider, settings.llm.base_url),
        )
        if self.media is not None:
            self.turns.media = self._take_media
        if settings.memory.capture_claims:
            from gateway.pipeline.capture import Capture

            self.turns.capture = Capture(self.agent, self.metrics.registry)
        limits = settings.limits
        self.limits = PersonLimits(self.clock, limits.queue_per_person,
                                   limits.messages_per_minute)
        # Between tries to append a message the transcript refused (tests make it short).
        self.persist_backoff = Backoff(1.0, 60.0)
        # Welcomes people approved by `clawgate pairing approve` and answers what they wrote
        # while waiting (gateway/pipeline/welcome.py); those were accepted already, so they
        # go through the message path as resumed (not refused or counted by the limits).
        self.approvals = ApprovalFollowUp(self.state, self.channels, self._announce,
                                          lambda msg: self._process(msg, resumed=True))
        self.memory: MemoryService | None = None
        # Reminders (gateway/assembly/scheduling.py sets it): /reminders and the schedule tools.
        self.schedules: ScheduleBook | None = None
        if memory is not None:
            self.use_memory(memory)

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
            if pending:
                log.info("resuming %d message(s) recorded but not answered before", len(pending))
            for msg in pending:
                self.turns.resuming.add((msg.channel, msg.chat_id, msg.message_id))
                await self._process_or_answer(msg, resumed=True)
            if any(name != TERMINAL_CHANNEL for name in self.channels):
                await self.approvals.start()
        finally:
            self._resumed.set()

    def use_memory(self, memory: MemoryService) -> None:
        """Give the owner's DM sessions recall: the memory tools, backed by `memory`."""
        from gateway.agent.tools.memory_tools import memory_tools

        self.memory = memory
        if self.turns.recall is None and self.settings.memory.auto_recall:
            from gateway.pipeline.auto_recall import AutoRecall, RecallOptions

            self.turns.recall = AutoRecall(memory, RecallOptions.from_settings(
                self.settings.memory), self.metrics.registry)
        self.private_tools = ToolRegistry(
            [*base_tools(), *self._extra_private_tools,
             *memory_tools(memory, on_search=self.metrics.observe_search)],
            redact=self.redactor,
        )
        self.metrics.register_tools(self.private_tools.names())

    def add_private_tools(self, tools: Sequence[Tool]) -> None:
        """More tools for the owner's private contexts only (the schedule tools)."""
        self._extra_private_tools.extend(tools)
        if self.memory is not None:
            self.use_memory(self.memory)
        else:
            self.private_tools = ToolRegistry([*base_tools(), *self._extra_private_tools],
                                              redact=self.redactor)

    def add_shared_tools(self, tools: Sequence[Tool]) -> None:
        """More tools for group chats too (the web tools when `[web] groups` is on); private
        contexts get them through add_private_tools."""
        self._extra_shared_tools.extend(tools)
        self.shared_tools = ToolRegistry([*base_tools(), *self._extra_shared_tools],
                                         redact=self.redactor)
        self.metrics.register_tools(self.shared_tools.names())

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
        await self.delivery.close(min(drain_timeout, 5.0))
        closers = [*(channel.stop for channel in self.channels.values()),
                   self.capabilities.stop,  # MCP servers
                   self.models.close,
                   self.accounting.settled,  # the last calls' usage, before the database
                   self.state.close]
        if self.media is not None:
            closers.append(self.media.transcriber.close)
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
        if self._durable(msg) and not await self.state.record_inbound(msg):
            log.info("ignored redelivered %s message %s", msg.channel, msg.message_id)
            return
        if not self.accepting:
            log.info("stopping: %s message %s is answered after the next start",
                     msg.channel, msg.message_id)
            return
        await self._resumed.wait()
        await self._process_or_answer(msg)

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
            if command is None and (refusal := await self.budgets.refusal(route.person_id)):
                self.metrics.budget_refusals.inc(kind="conversation")
                await self._answer_now(msg, refusal, "over_budget")
                if counted:
                    self.limits.release(account)
                return
            if command is None:
                key, job = route.session_key, self._turn_job(route, msg)
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
        return CommandContext(route, args, self.settings, self.sessions, self.compactor,
                              self.models.for_person(route.person_id), self, self.schedules,
                              usage=self.usage, budgets=self.budgets)

    def _command_job(self, route: Route, command: Command, msg: InboundMessage) -> Job:
        async def job() -> None:
            with usage_scope(route.person_id, "conversation"):  # /compact's model call
                answer = await lookup(command.name).handler(
                    self.command_context(route, command.args))
            await self._answer_now(msg, answer)

        return job

    def _turn_job(self, route: Route, msg: InboundMessage) -> Job:
        """The turn, retried while the transcript refuses the message (told once, politely);
        after PERSIST_ATTEMPTS tries it stays pending for the next start."""

        async def job() -> None:
            backoff = Backoff(self.persist_backoff.first, self.persist_backoff.cap)
            for attempt in range(1, PERSIST_ATTEMPTS + 1):
                try:
                    async with self.channels[route.channel].typing(route.chat_id):
                        with usage_scope(route.person_id, "conversation"):
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

    def tool_context(self, route: Route) -> ToolContext:
        """A turn's tool context: its budget (the quotas' share of this turn) is fresh, and its
        outbox reaches the chat the turn answers (send_file)."""
        channel = self.channels.get(route.channel)
        outbox = None
        if channel is not None and route.chat_id:
            outbox = ChatOutbox(self.delivery, route, max_bytes=channel.max_upload_bytes,
                                durable=channel.durable)
        return ToolContext(
            route.workspace, route.session_key, route.private, self.settings.tools.max_file_bytes,
            area=route.access.area, outbox=outbox, budget=self.turn_budget(),
        )

    def turn_budget(self) -> TurnBudget:
        """The quotas for one turn (a DM, group, heartbeat or scheduled task turn)."""
        return TurnBudget(self.quotas, self.disk_usage, self.metrics)

    # -- media (gateway/agent/media/) ----------------------------------------------------------

    def _media_intake(self, settings: Settings, provider: Provider) -> MediaIntake | None:
        if not settings.media.enabled:
            return None
        from gateway.agent.media.audio import build_transcriber
        from gateway.agent.media.intake import MediaIntake

        zone = settings.zone()
        return MediaIntake(
            settings.media, build_transcriber(settings.media.transcription),
            provider=settings.llm.provider, model=provider.model,
            now=lambda: self.clock.now().astimezone(zone),
            max_text_bytes=settings.tools.max_file_bytes,
            deadline_seconds=settings.limits.turn_deadline_seconds,
            budget=self.turn_budget,
        )

    async def _take_media(self, route: Route, msg: InboundMessage) -> UserContent:
        """The turn's user message from `msg`'s attachments, fetched through its channel."""
        assert self.media is not None
        return await self.media.take(msg, self.channels[route.channel], route.workspace,
                                     route.access)

    def tools_for(self, route: Route) -> ToolRegistry:
        base = self.private_tools if route.private else self.shared_tools
        # capabilities (issue 17): read_skill and MCP tools where the context allows them
        return self._guarded(self.capabilities.registry(
            base, self._capability_kind(route), route.workspace, route.access.area))

    def heartbeat_tools(self, person_id: str, workspace: Path) -> ToolRegistry:
        """A heartbeat turn's tools: the person's private ones, plus MCP servers allowing it."""
        kind = self.capabilities.kind(private=True, person_id=person_id, heartbeat=True)
        return self._guarded(self.capabilities.registry(self.private_tools, kind, workspace))

    def _guarded(self, registry: ToolRegistry) -> ToolRegistry:
        """Every registry a turn uses masks secrets in results, and its tools are the known
        label values of /metrics (anything else a model names counts as `other`; an MCP
        tool counts under its configured server's name)."""
        self.metrics.register_tools(self.capabilities.metric_labels(registry))
        return registry.redact_with(self.redactor)

    def capability_lines(self, route: Route) -> list[str]:
        """/context lines about skills and tool servers (issue 17)."""
        return self.capabilities.context_lines(route.workspace, self._capability_kind(route),
                                               route.access.area)

    def _capability_kind(self, route: Route) -> ContextKind:
        return self.capabilities.kind(private=route.private, person_id=route.person_id)

    def _today(self) -> date:
        """Today in the configured zone (a correction's "superseded" date)."""
        return self.clock.now().astimezone(self.settings.zone()).date()

    def context_files(self, route: Route) -> list[ContextFile]:
        today = self.clock.now().astimezone(self._zone).date()
        return self.loader.load(route.workspace, private=route.private, today=today,
                                area=route.access.area)

    def system_prompt(self, route: Route, files: list[ContextFile]) -> SystemPrompt:
        kind = "a direct message with the workspace owner" if route.private else "a group chat"
        model = self.models.for_person(route.person_id)
        run_info = (
            f"Channel: {route.channel}, {kind}. Session: {route.session_key}. "
            f"Model: {model.name}/{model.model}."
        )
        if not route.private:
            run_info += "\n" + speaker_line(route.sender_name, route.sender_id,
                                            route.sender_is_owner)
        now = self.clock.now().astimezone(self._zone)
        # capabilities (issue 17): the skills section (names and one-line descriptions)
        skills = self.capabilities.skill_section(route.workspace, self._capability_kind(route),
                                                 route.access.area)
        return build_system_prompt(files, private=route.private, now=now, run_info=run_info,
                                   area=route.access.area, sections=[skills.text])

    async def _ensure_workspace(self, route: Route) -> None:
        if route.person_id not in self._seeded:
            await asyncio.to_thread(ensure_workspace, self.settings.workspaces_dir, route.person_id)
            await self.versioning.ensure_repo(route.workspace)
            self._seeded.add(route.person_id)
            for listener in self.workspace_listeners:
                try:
                    listener(route.person_id)
                except Exception:
                    log.exception("workspace listener failed for %s", route.person_id)

