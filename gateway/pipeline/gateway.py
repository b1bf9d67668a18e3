"""The Gateway object: owns and wires the parts, and runs one message end to end.

Channel → access → routing → (slash command | session lane → prompt → agent loop) →
transcript → delivery. No global state: tests build a Gateway with fakes in place of the
provider, channels and clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from channels.base import Channel, InboundMessage, OutboundMessage
from gateway.agent.compaction import Compactor
from gateway.agent.context_files import ContextFile, ContextFileLoader
from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop, Recorder
from gateway.agent.prompt import build_system_prompt, request_overhead_chars, speaker_line
from gateway.agent.providers.base import Provider, ProviderError
from gateway.agent.sessions import Session, SessionStore
from gateway.agent.tools import Tool, ToolContext, ToolRegistry, file_tools
from gateway.capabilities.hub import Capabilities
from gateway.clock import Clock, SystemClock
from gateway.config.settings import Settings
from gateway.ops.logs import turn_scope
from gateway.ops.metrics import GatewayMetrics, MeteredProvider
from gateway.ops.redaction import Redactor
from gateway.ops.state import DmRoute, StateDB
from gateway.ops.versioning import Versioning
from gateway.pipeline.access import AccessPolicy, LocalOnlyAccess
from gateway.pipeline.commands import QUEUED_COMMANDS, Command, parse_command, run_command
from gateway.pipeline.lanes import Job, Lanes
from gateway.pipeline.replies import provider_error_reply
from gateway.pipeline.routing import TERMINAL_CHANNEL, Route, Router
from gateway.workspace.seed import ensure_workspace
from heartbeat.ack import scrub_token

if TYPE_CHECKING:
    from gateway.agent.tools.schedule_tools import ScheduleBook
    from gateway.capabilities.contexts import ContextKind
    from memory.service import MemoryService

log = logging.getLogger(__name__)

INTERNAL_ERROR_REPLY = (
    "Something went wrong on my side while answering. Your message is saved; try again."
)
# Overflow recoveries (flush, compact, retry) per turn before giving up with a clear message.
OVERFLOW_RETRIES = 2
EMPTY_MESSAGE_REPLY = "I got an empty message. Send me some text (or /help)."
MEDIA_REPLY = (
    "Thanks! For now I can only read text, so I can't look at that {kind}. "
    "Could you describe it in words?"
)


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
        self._resuming: set[tuple[str, str, str]] = set()
        self.sessions = SessionStore(self.clock)
        self.lanes = Lanes()
        # Two registries, decided by the route: tools that reach private memory (recall, say)
        # do not exist at all in a session that is not the owner's DM.
        self.shared_tools = ToolRegistry(file_tools(), redact=self.redactor)
        self.private_tools = ToolRegistry([*file_tools(), *private_tools], redact=self.redactor)
        self._extra_private_tools = list(private_tools)
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
        metered = MeteredProvider(provider, self.metrics)
        self.agent = AgentLoop(metered, settings.llm.max_tool_rounds)
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
        self.memory: MemoryService | None = None
        # Reminders (gateway/assembly/scheduling.py sets it): /reminders and the schedule tools.
        self.schedules: ScheduleBook | None = None
        if memory is not None:
            self.use_memory(memory)

    async def start(self) -> None:
        """Open the state database, start every channel, then resume unanswered messages."""
        self._resumed.clear()
        try:
            await self.state.open()
            await self.capabilities.start()  # MCP servers (bounded by their start-up timeouts)
            pending = [m for m in await self.state.pending_inbound() if m.channel in self.channels]
            for channel in self.channels.values():
                await channel.start(self.handle)
            if pending:
                log.info("resuming %d message(s) recorded but not answered before", len(pending))
            for msg in pending:
                self._resuming.add((msg.channel, msg.chat_id, msg.message_id))
                await self._process(msg)
        finally:
            self._resumed.set()

    def use_memory(self, memory: MemoryService) -> None:
        """Give the owner's DM sessions recall: the memory tools, backed by `memory`."""
        from gateway.agent.tools.memory_tools import memory_tools

        self.memory = memory
        self.private_tools = ToolRegistry(
            [*file_tools(), *self._extra_private_tools,
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
            self.private_tools = ToolRegistry([*file_tools(), *self._extra_private_tools])

    async def stop(self, drain_timeout: float = 30.0) -> None:
        """Finish queued turns (nothing accepted is dropped), then close channels.

        A turn still running after `drain_timeout` is abandoned: the person's message is
        already in the transcript, so the next start continues from it.
        """
        try:
            await asyncio.wait_for(self.lanes.drain(), drain_timeout)
        except TimeoutError:
            log.warning("stopping with turns still running after %.0f s", drain_timeout)
        for channel in self.channels.values():
            await channel.stop()
        await self.capabilities.stop()  # MCP servers
        await self.provider.close()
        await self.state.close()
        if self.memory is not None:
            await self.memory.close()

    async def handle(self, msg: InboundMessage) -> None:
        """Entry point for every channel. Returns once the message is queued, not answered.

        A platform message is first recorded durably in the state database; only then may the
        channel acknowledge it to the platform (an exception here means: do not acknowledge).
        A message recorded before (same channel, chat and message id) is a redelivery and is
        ignored, so a restart never answers twice.
        """
        if _durable(msg) and not await self.state.record_inbound(msg):
            log.info("ignored redelivered %s message %s", msg.channel, msg.message_id)
            return
        await self._resumed.wait()
        try:
            await self._process(msg)
        except Exception:
            # Recorded and still pending: the next start processes it again.
            log.exception("could not process %s message %s", msg.channel, msg.message_id)

    async def _process(self, msg: InboundMessage) -> None:
        decision = await self.access.check(msg)
        if not decision.allowed:
            if decision.reply:
                await self._send(msg.channel, msg.chat_id, decision.reply)
            await self._done(msg, "denied")
            return
        route = await self.router.resolve(msg)
        await self._ensure_workspace(route)
        if msg.chat_type == "direct" and _durable(msg):
            await self.state.set_last_dm_route(
                route.person_id, msg.channel, msg.chat_id, msg.sender_id, msg.received_at
            )
        command = parse_command(msg.text)
        if command is not None and command.name not in QUEUED_COMMANDS:
            await self._send(route.channel, route.chat_id, await run_command(self, route, command))
            await self._done(msg)
            return
        if command is not None:
            job = self._command_job(route, command, msg)
        elif not msg.text.strip():
            kind = msg.attachment
            await self._send(route.channel, route.chat_id,
                             MEDIA_REPLY.format(kind=kind) if kind else EMPTY_MESSAGE_REPLY)
            await self._done(msg)
            return
        else:
            job = self._turn_job(route, msg)
        self.lanes.submit(route.session_key, job)

    async def last_dm_route(self, person_id: str) -> DmRoute | None:
        """Where `person_id` last wrote to us in a DM (channel and chat), for proactive sends."""
        return await self.state.last_dm_route(person_id)

    async def send_to_person(self, person_id: str, text: str) -> bool:
        """Deliver `text` to the person's last DM route; False if they never wrote in a DM."""
        route = await self.last_dm_route(person_id)
        if route is None or route.channel not in self.channels:
            return False
        await self._send(route.channel, route.chat_id, text)
        return True

    async def _recorded_before(self, session: Session, msg: InboundMessage) -> bool:
        """A resumed message may be in the transcript already (the last run died mid-turn)."""
        key = (msg.channel, msg.chat_id, msg.message_id)
        if key not in self._resuming:
            return False
        self._resuming.discard(key)

        def scan() -> bool:
            return any(
                entry.get("message_id") == msg.message_id and entry.get("channel") == msg.channel
                and entry.get("chat_id") == msg.chat_id for entry in session.transcript.load()
            )

        return await asyncio.to_thread(scan)

    async def _done(self, msg: InboundMessage, status: str = "done") -> None:
        if _durable(msg):
            try:
                await self.state.mark_done(msg, status)
            except Exception:
                log.exception("could not mark %s message %s done", msg.channel, msg.message_id)

    def _typing(self, route: Route) -> contextlib.AbstractAsyncContextManager[None]:
        typing = getattr(self.channels.get(route.channel), "typing", None)
        return typing(route.chat_id) if typing is not None else contextlib.nullcontext()

    def _command_job(self, route: Route, command: Command, msg: InboundMessage) -> Job:
        async def job() -> None:
            await self._send(route.channel, route.chat_id, await run_command(self, route, command))
            await self._done(msg)

        return job

    def _turn_job(self, route: Route, msg: InboundMessage) -> Job:
        async def job() -> None:
            async with self._typing(route):
                await self.run_turn(route, msg)

        return job

    async def run_turn(self, route: Route, msg: InboundMessage) -> str:
        """One turn: record the message, run the agent, record, then deliver the reply.

        Hand edits made since the last turn are committed first and the turn's own file
        changes after it (gateway/ops/versioning.py); log lines inside carry a turn id.
        """
        with turn_scope(route.session_key) as turn:
            key = route.session_key
            await self.versioning.commit(route.workspace, "hand edit", session=key)
            log.info("turn started (%s)", route.channel)
            started = time.perf_counter()
            reply = await self._run_turn(route, msg)
            # Done right after delivery, before the commit: a crash in between would
            # otherwise answer this message again after the restart.
            await self._done(msg)
            elapsed = time.perf_counter() - started
            self.metrics.turn_seconds.observe(elapsed)
            log.info("turn finished in %.2f s", elapsed)
            await self.versioning.commit(route.workspace, "turn", session=key, turn=turn)
            return reply

    async def _run_turn(self, route: Route, msg: InboundMessage) -> str:
        session = await self.sessions.get(route.workspace, route.session_key)
        if not await self._recorded_before(session, msg):
            session.record(
                Message("user", msg.text),
                channel=msg.channel,
                chat_id=msg.chat_id,
                sender_id=msg.sender_id,
                message_id=msg.message_id,
            )
        tools = self.tools_for(route)
        system = self.system_prompt(route, self.context_files(route))
        ctx = self.tool_context(route)
        overhead = request_overhead_chars(system, tools.specs())
        try:
            for notice in await self.compactor.before_turn(session, system, ctx, overhead):
                await self._send(route.channel, route.chat_id, notice)
            reply = await self._answer(session, route, system, ctx, tools, overhead)
            self.metrics.turns.inc(outcome="ok")
        except ProviderError as exc:
            log.warning("provider error in %s: %s (%s)", route.session_key, exc.kind, exc)
            reply = provider_error_reply(exc)
            self.metrics.turns.inc(outcome="provider_error")
            session.record_event("error", error_kind=exc.kind, text=reply)
        except Exception:
            # A bug of ours must still end in an answer: the person's message is on disk.
            log.exception("turn failed in %s", route.session_key)
            reply = INTERNAL_ERROR_REPLY
            self.metrics.turns.inc(outcome="internal_error")
            session.record_event("error", error_kind="internal", text=reply)
        await self._deliver(session, route, reply)
        return reply

    async def _answer(
        self, session: Session, route: Route, system: SystemPrompt, ctx: ToolContext,
        tools: ToolRegistry, overhead: int,
    ) -> str:
        """The agent turn. A context overflow triggers flush, compaction and a retry (twice)."""
        for attempt in range(OVERFLOW_RETRIES + 1):
            try:
                result = await self.agent.run(system, session.history, ctx, tools,
                                              _recorder(session, self.metrics))
                return result.reply
            except ProviderError as exc:
                if exc.kind != "context_overflow" or attempt == OVERFLOW_RETRIES:
                    raise
                log.warning("context overflow in %s; compacting and retrying",
                            route.session_key)
                await self.compactor.flush(session, system, ctx)
                outcome = await self.compactor.compact(session, overhead, reason="overflow")
                if outcome.notice:
                    await self._send(route.channel, route.chat_id, outcome.notice)
                if not outcome.compacted:
                    raise
        raise AssertionError("unreachable: the last attempt re-raises")

    def tool_context(self, route: Route) -> ToolContext:
        return ToolContext(
            route.workspace, route.session_key, route.private, self.settings.tools.max_file_bytes,
            area=route.access.area,
        )

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
        label values of /metrics (anything else a model names counts as `other`)."""
        self.metrics.register_tools(registry.names())
        return registry.redact_with(self.redactor)

    def capability_lines(self, route: Route) -> list[str]:
        """/context lines about skills and tool servers (issue 17)."""
        return self.capabilities.context_lines(route.workspace, self._capability_kind(route),
                                               route.access.area)

    def _capability_kind(self, route: Route) -> ContextKind:
        return self.capabilities.kind(private=route.private, person_id=route.person_id)

    def context_files(self, route: Route) -> list[ContextFile]:
        today = self.clock.now().astimezone(self._zone).date()
        return self.loader.load(route.workspace, private=route.private, today=today,
                                area=route.access.area)

    def system_prompt(self, route: Route, files: list[ContextFile]) -> SystemPrompt:
        kind = "a direct message with the workspace owner" if route.private else "a group chat"
        run_info = (
            f"Channel: {route.channel}, {kind}. Session: {route.session_key}. "
            f"Model: {self.provider.name}/{self.provider.model}."
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

    async def _deliver(self, session: Session, route: Route, text: str) -> None:
        try:
            await self._send(route.channel, route.chat_id, text)
        except Exception as exc:
            log.exception("delivery to %s failed", route.channel)
            session.record_event("delivery", ok=False, error=type(exc).__name__)
            self.metrics.deliveries.inc(channel=route.channel, outcome="failed")
        else:
            session.record_event("delivery", ok=True, channel=route.channel)
            self.metrics.deliveries.inc(channel=route.channel, outcome="ok")

    async def _send(self, channel_name: str, chat_id: str, text: str) -> None:
        channel = self.channels.get(channel_name)
        if channel is None:
            log.error("no channel %r to deliver to", channel_name)
            return
        text = scrub_token(text)  # HEARTBEAT_OK never reaches a person, whatever sent it
        if not text.strip():
            log.info("nothing left to send to %s after removing HEARTBEAT_OK", channel_name)
            return
        await channel.send(OutboundMessage(channel_name, chat_id, text))


def _durable(msg: InboundMessage) -> bool:
    """Platform messages go through the inbox; the terminal (no redelivery) does not."""
    return msg.channel != TERMINAL_CHANNEL and bool(msg.message_id)


def _recorder(session: Session, metrics: GatewayMetrics) -> Recorder:
    def record(message: Message, usage: Usage | None) -> None:
        session.record(message, usage=usage)
        metrics.tool_result(message)

    return record
