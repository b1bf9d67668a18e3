"""The Gateway object: takes in one message, and starts and stops the parts it moves it with.

Channel → inbox record → access → limits → routing → (slash command | session lane → turn
runner) → delivery. The channel's handler (`handle`) only records and hands over: nothing in
it waits for a platform, so one slow or rate-limited chat never stalls another person. Every
outbound message goes through `self.delivery` (gateway/pipeline/delivery.py); turns are run
by `self.turns` (gateway/pipeline/turns.py). The parts are built by gateway/pipeline/parts.py
and handed over ready; the parts around the gateway (the assembly, the panel, health, the CLI)
are given those parts themselves, through the protocols of gateway/pipeline/ports.py, never
the Gateway. No global state: tests build a Gateway (`Gateway.build`) with fakes in place of
the provider, channels and clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from channels.base import Channel, InboundMessage
from gateway.agent.providers.base import Provider
from gateway.agent.scope import usage_scope
from gateway.agent.tools import Tool
from gateway.clock import Clock
from gateway.config.settings import Settings
from gateway.ops.redaction import Redactor
from gateway.pipeline.access import AccessPolicy
from gateway.pipeline.commands import Command, lookup, parse_command
from gateway.pipeline.lanes import Job
from gateway.pipeline.limits import Account
from gateway.pipeline.parts import GatewayParts, build_parts
from gateway.pipeline.presses import ANSWERS, Presses, PressPorts, PressWiring
from gateway.pipeline.recovery import answer_key
from gateway.pipeline.routing import TERMINAL_CHANNEL, Route
from gateway.pipeline.turns import INTERNAL_ERROR_REPLY, TranscriptWriteError
from gateway.pipeline.welcome import ApprovalFollowUp
from gateway.stores.state import StateDB
from gateway.workspace.seed import ensure_workspace
from retrypolicy import Backoff

if TYPE_CHECKING:
    from gateway.agent.sessions import SessionStore
    from gateway.agent.tools.schedule_tools import ScheduleDesk
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
    ...)` wires them from settings. `on_new_workspace(person_id)` is called when a workspace
    is first used in this run (the assembly starts that person's heartbeat timer at once, not
    at its rescan).
    """

    def __init__(
        self, parts: GatewayParts, *, on_new_workspace: Callable[[str], object] | None = None
    ) -> None:
        p = self.parts = parts  # each part's job: gateway/pipeline/parts.py
        # The parts the message path uses; the others are in `parts` only.
        self.settings, self.clock, self.redactor = p.settings, p.clock, p.redactor
        self.access, self.channels, self.state, self.router = (
            p.access,
            p.channels,
            p.state,
            p.router,
        )
        self.lanes, self.limits, self.turns = p.lanes, p.limits, p.turns
        self.metrics, self.versioning, self.capabilities, self.delivery = (
            p.metrics,
            p.versioning,
            p.capabilities,
            p.delivery,
        )
        self.models, self.budgets, self.media, self.memory = (
            p.models,
            p.budgets,
            p.media,
            p.memory,
        )
        self._resumed = asyncio.Event()  # cleared while start() re-queues: new messages wait
        self._resumed.set()
        self.accepting = True  # False once stopping: new messages wait for the next start
        self._on_new_workspace = on_new_workspace
        self._seeded: set[str] = set()
        self.persist_backoff = Backoff(1.0, 60.0)  # between tries to save a refused message
        # Welcomes the newly approved, and answers what they wrote while waiting (as resumed).
        self.approvals = ApprovalFollowUp(
            self.state.access,
            self.state.inbox,
            self.channels,
            self._announce,
            lambda msg: self._process(msg, resumed=True),
        )
        self.presses: Presses | None = parts.presses  # exec approvals (buttons, /approve)

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
        shared_tools: Sequence[Tool] = (),
        state: StateDB | None = None,
        redactor: Redactor | None = None,
        sessions: SessionStore | None = None,
        memory: MemoryService | None = None,
        schedule_desk: ScheduleDesk | None = None,
        press_wiring: Callable[[PressPorts], PressWiring | None] | None = None,
        on_new_workspace: Callable[[str], object] | None = None,
    ) -> Gateway:
        """A Gateway wired from `settings` (tests give fakes for the provider, channels and
        clock; gateway/assembly/ builds the real ones). The keywords are `build_parts`'."""
        return cls(
            build_parts(
                settings,
                provider,
                channels=channels,
                clock=clock,
                access=access,
                private_tools=private_tools,
                shared_tools=shared_tools,
                state=state,
                redactor=redactor,
                sessions=sessions,
                memory=memory,
                schedule_desk=schedule_desk,
                press_wiring=press_wiring,
            ),
            on_new_workspace=on_new_workspace,
        )

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
            pending = [
                m for m in await self.state.inbox.pending_inbound() if m.channel in self.channels
            ]
            polled = [name for name in self.channels if name != TERMINAL_CHANNEL]
            if self.presses is not None and (pending or not polled):
                # The exec tool is offered once its sandbox's probe has passed, and the probe
                # runs beside the first poll. Starts that wait for it before any channel runs:
                # one with messages left unanswered by the last run (their turns, maybe cut
                # off in the middle of a command, get the tools they had; waiting here keeps
                # them ahead of newer messages of the same chats), a terminal chat (a person
                # types slower than the probe runs, and a piped script gets the same tools on
                # its first line as on its last), and one with no channel at all (`clawgate
                # heartbeat run`: its one beat gets the tools a beat gets).
                await self.presses.settled()
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
            keep = {m.file for m in await self.state.outbox.pending_outbound() if m.file}
            removed = await asyncio.to_thread(voice.sweep, keep)
        except Exception:  # housekeeping: never a reason not to start
            log.exception("could not tidy the voice notes folder")
            return
        if removed:
            log.info("removed %d voice note(s) left behind by an earlier run", removed)

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
            log.warning(
                "stopping with %d turn(s) still running after %.1f s: left pending "
                "for the next start",
                pending,
                drain_timeout,
            )
            await self.lanes.cancel()
            draining.cancel()
            await asyncio.gather(draining, return_exceptions=True)
        if self.presses is not None:
            try:
                await self.presses.stop()
            except Exception:
                log.exception("error while stopping the approvals; carrying on")
        await self.delivery.close(min(drain_timeout, 5.0))
        closers = [
            *(channel.stop for channel in self.channels.values()),
            self.capabilities.stop,  # MCP servers
            self.models.close,
            self.parts.accounting.settled,  # the last calls' usage, before the database
            self.state.close,
        ]
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
                log.exception(
                    "error while stopping (%s); carrying on", getattr(close, "__qualname__", close)
                )

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
        if self._durable(msg) and not await self.state.inbox.record_inbound(msg):
            log.info("ignored redelivered %s message %s", msg.channel, msg.message_id)
            return
        if not self.accepting:
            log.info(
                "stopping: %s message %s is answered after the next start",
                msg.channel,
                msg.message_id,
            )
            return
        await self._resumed.wait()
        await self._process_or_answer(msg)

    async def _press(self, msg: InboundMessage) -> None:
        """A button press: decided at once, outside every lane (the turn that asked may be
        waiting for it), by the parts' `presses` (the exec approvals); never a message, never the
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
                log.exception(
                    "could not answer %s message %s either; it stays pending",
                    msg.channel,
                    msg.message_id,
                )

    async def _process(self, msg: InboundMessage, *, resumed: bool = False) -> None:
        decision = await self.access.check(msg)
        if not decision.allowed:
            await self._answer_now(msg, decision.reply, "waiting" if decision.waiting else "denied")
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
            if msg.chat_type == "direct" and self._durable(msg) and msg.channel != TERMINAL_CHANNEL:
                await self.state.links.set_last_dm_route(
                    route.person_id, msg.channel, msg.chat_id, msg.sender_id, msg.received_at
                )
            command = parse_command(msg.text)
            if (
                command is None
                and not msg.text.strip()
                and not (msg.attachments and self.media is not None)
            ):
                kind = msg.attachment
                await self._answer_now(
                    msg, MEDIA_REPLY.format(kind=kind) if kind else EMPTY_MESSAGE_REPLY
                )
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
            msg.channel,
            msg.chat_id,
            text,
            key=key if durable else None,
            done=msg if durable else None,
            done_status=status,
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

    async def _announce(self, channel: str, chat_id: str, text: str, key: str) -> None:
        """A message no one asked for right now (a welcome); `key` names it once."""
        await self.delivery.deliver(channel, chat_id, text, key=key)

    def _durable(self, msg: InboundMessage) -> bool:
        """Platform messages go through the inbox; a channel that is not durable does not."""
        channel = self.channels.get(msg.channel)
        return channel is not None and channel.durable and bool(msg.message_id)

    def _command_job(self, route: Route, command: Command, msg: InboundMessage) -> Job:
        async def job() -> None:
            with usage_scope(route.person_id, "conversation", route.group):  # /compact
                answer = await lookup(command.name).handler(
                    self.parts.commands.for_route(route, command.args)
                )
            await self._answer_now(msg, answer)

        return job

    def _answer_job(self, msg: InboundMessage, command: Command) -> Job:
        """/approve or /deny: answered at once, beside a turn that may wait for it."""
        presses = self.presses

        async def job() -> None:
            assert presses is not None
            answer = await presses.typed(msg.channel, msg.sender_id, command.name, command.args)
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
                log.exception(
                    "budget check before the turn for %s message %s failed",
                    msg.channel,
                    msg.message_id,
                )
            backoff = Backoff(self.persist_backoff.first, self.persist_backoff.cap)
            for attempt in range(1, PERSIST_ATTEMPTS + 1):
                try:
                    async with self.channels[route.channel].typing(route.chat_id):
                        with usage_scope(route.person_id, "conversation", route.group):
                            await self.turns.run(route, msg, durable=self._durable(msg))
                    return
                except TranscriptWriteError as exc:
                    log.error(
                        "could not save %s message %s to the transcript (%s); try %d of %d",
                        msg.channel,
                        msg.message_id,
                        exc,
                        attempt,
                        PERSIST_ATTEMPTS,
                    )
                    if attempt == 1:
                        key = f"persist:{answer_key(msg)}" if self._durable(msg) else None
                        await self.delivery.deliver(
                            route.channel, route.chat_id, PERSIST_REPLY, key=key
                        )
                    if attempt < PERSIST_ATTEMPTS:
                        await asyncio.sleep(backoff.next())
                except Exception:
                    # The turn raises only before its reply is queued (TurnRunner.run): one
                    # short error reply, never a second answer.
                    log.exception(
                        "turn for %s message %s failed before its reply",
                        msg.channel,
                        msg.message_id,
                    )
                    await self._answer_now(msg, INTERNAL_ERROR_REPLY)
                    return
            log.error(
                "%s message %s stays pending; it is tried again at the next start",
                msg.channel,
                msg.message_id,
            )

        return job

    async def _ensure_workspace(self, route: Route) -> None:
        if route.person_id not in self._seeded:
            await asyncio.to_thread(ensure_workspace, self.settings.workspaces_dir, route.person_id)
            await self.versioning.ensure_repo(route.workspace)
            self._seeded.add(route.person_id)
            if self._on_new_workspace is not None:
                try:
                    self._on_new_workspace(route.person_id)
                except Exception:
                    log.exception("new-workspace callback failed for %s", route.person_id)
