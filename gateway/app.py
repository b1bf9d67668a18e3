"""The Gateway object: owns and wires the parts, and runs one message end to end.

Channel → access → routing → (slash command | session lane → prompt → agent loop) →
transcript → delivery. No global state: tests build a Gateway with fakes in place of the
provider, channels and clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from channels.base import Channel, InboundMessage, OutboundMessage
from gateway.access import AccessPolicy, LocalOnlyAccess
from gateway.agent import AgentLoop, Recorder
from gateway.clock import Clock, SystemClock
from gateway.commands import QUEUED_COMMANDS, Command, parse_command, run_command
from gateway.compaction import Compactor
from gateway.config import Settings
from gateway.context_files import ContextFile, ContextFileLoader
from gateway.conversation import Message, SystemPrompt, Usage
from gateway.lanes import Job, Lanes
from gateway.prompt import build_system_prompt, request_overhead_chars
from gateway.providers.base import Provider, ProviderError
from gateway.replies import provider_error_reply
from gateway.routing import Route, Router
from gateway.sessions import Session, SessionStore
from gateway.tools import Tool, ToolContext, ToolRegistry, file_tools
from gateway.workspace import ensure_workspace

log = logging.getLogger(__name__)

INTERNAL_ERROR_REPLY = (
    "Something went wrong on my side while answering. Your message is saved; try again."
)
# Overflow recoveries (flush, compact, retry) per turn before giving up with a clear message.
OVERFLOW_RETRIES = 2
EMPTY_MESSAGE_REPLY = "I got an empty message. Send me some text (or /help)."


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
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.clock = clock or SystemClock()
        self.access = access or LocalOnlyAccess()
        self.channels = {channel.name: channel for channel in channels}
        self.router = Router(settings.workspaces_dir, settings.owner)
        self.sessions = SessionStore(self.clock)
        self.lanes = Lanes()
        # Two registries, decided by the route: tools that reach private memory (recall, say)
        # do not exist at all in a session that is not the owner's DM.
        self.shared_tools = ToolRegistry(file_tools())
        self.private_tools = ToolRegistry([*file_tools(), *private_tools])
        self.agent = AgentLoop(provider, settings.llm.max_tool_rounds)
        self.compactor = Compactor(
            provider, self.agent, settings.llm, settings.compaction, self.clock, settings.zone()
        )
        self.loader = ContextFileLoader(
            settings.prompt.file_max_chars, settings.prompt.total_max_chars
        )
        self._zone = settings.zone()
        self._seeded: set[str] = set()

    async def start(self) -> None:
        for channel in self.channels.values():
            await channel.start(self.handle)

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
        await self.provider.close()

    async def handle(self, msg: InboundMessage) -> None:
        """Entry point for every channel. Returns once the message is queued, not answered."""
        decision = await self.access.check(msg)
        if not decision.allowed:
            if decision.reply:
                await self._send(msg.channel, msg.chat_id, decision.reply)
            return
        route = self.router.resolve(msg)
        await self._ensure_workspace(route)
        command = parse_command(msg.text)
        if command is not None and command.name not in QUEUED_COMMANDS:
            await self._send(route.channel, route.chat_id, await run_command(self, route, command))
            return
        if command is not None:
            job = self._command_job(route, command)
        elif not msg.text.strip():
            await self._send(route.channel, route.chat_id, EMPTY_MESSAGE_REPLY)
            return
        else:
            job = self._turn_job(route, msg)
        self.lanes.submit(route.session_key, job)

    def _command_job(self, route: Route, command: Command) -> Job:
        async def job() -> None:
            await self._send(route.channel, route.chat_id, await run_command(self, route, command))

        return job

    def _turn_job(self, route: Route, msg: InboundMessage) -> Job:
        async def job() -> None:
            await self.run_turn(route, msg)

        return job

    async def run_turn(self, route: Route, msg: InboundMessage) -> str:
        """One turn: record the message, run the agent, record, then deliver the reply."""
        session = await self.sessions.get(route.workspace, route.session_key)
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
        except ProviderError as exc:
            log.warning("provider error in %s: %s (%s)", route.session_key, exc.kind, exc)
            reply = provider_error_reply(exc)
            session.record_event("error", error_kind=exc.kind, text=reply)
        except Exception:
            # A bug of ours must still end in an answer: the person's message is on disk.
            log.exception("turn failed in %s", route.session_key)
            reply = INTERNAL_ERROR_REPLY
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
                                              _recorder(session))
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
            route.workspace, route.session_key, route.private, self.settings.tools.max_file_bytes
        )

    def tools_for(self, route: Route) -> ToolRegistry:
        return self.private_tools if route.private else self.shared_tools

    def context_files(self, route: Route) -> list[ContextFile]:
        today = self.clock.now().astimezone(self._zone).date()
        return self.loader.load(route.workspace, private=route.private, today=today)

    def system_prompt(self, route: Route, files: list[ContextFile]) -> SystemPrompt:
        kind = "a direct message with the workspace owner" if route.private else "a group chat"
        run_info = (
            f"Channel: {route.channel}, {kind}. Session: {route.session_key}. "
            f"Model: {self.provider.name}/{self.provider.model}."
        )
        now = self.clock.now().astimezone(self._zone)
        return build_system_prompt(files, private=route.private, now=now, run_info=run_info)

    async def _ensure_workspace(self, route: Route) -> None:
        if route.person_id not in self._seeded:
            await asyncio.to_thread(ensure_workspace, self.settings.workspaces_dir, route.person_id)
            self._seeded.add(route.person_id)

    async def _deliver(self, session: Session, route: Route, text: str) -> None:
        try:
            await self._send(route.channel, route.chat_id, text)
        except Exception as exc:
            log.exception("delivery to %s failed", route.channel)
            session.record_event("delivery", ok=False, error=type(exc).__name__)
        else:
            session.record_event("delivery", ok=True, channel=route.channel)

    async def _send(self, channel_name: str, chat_id: str, text: str) -> None:
        channel = self.channels.get(channel_name)
        if channel is None:
            log.error("no channel %r to deliver to", channel_name)
            return
        await channel.send(OutboundMessage(channel_name, chat_id, text))


def _recorder(session: Session) -> Recorder:
    def record(message: Message, usage: Usage | None) -> None:
        session.record(message, usage=usage)

    return record
