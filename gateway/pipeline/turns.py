"""The turn runner: owns one turn from the person's message to the queued reply.

In order, so a crash repeats at most a send: the person's message is appended to the
transcript (its attachments fetched and turned into text and images first, gateway/agent/
media/); the prompt is assembled; flush and compaction run if due; the agent loop answers
(all of it within one overall deadline); the answer is appended to the transcript; the reply
goes to the outbox and the inbox entry is marked done in one statement (gateway/pipeline/
delivery.py); then it is sent (a reply to be heard is read aloud first and goes out as a
voice note with its text, gateway/pipeline/voice_reply.py). Everything the person must hear
about (provider errors, our own bugs, a prompt or tool set that cannot be built, the
deadline) ends in a reply, never in silence. A message re-queued by a restart continues
from what the transcript says was done (gateway/pipeline/recovery.py): a reply recorded
before the crash is delivered as it is.

Where the channel shows live previews, the turn streams into one (gateway/pipeline/
streaming.py) and its reply replaces the preview (the preview stops before the reply is
queued; the reply is the outbox message, as without streaming). A reply with nothing to send
(only HEARTBEAT_OK) or none (given up on) deletes the preview instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from channels.base import InboundMessage
from gateway.agent.compaction import Compactor
from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop, Recorder, TurnStream, Waiting
from gateway.agent.metrics import GatewayMetrics
from gateway.agent.prompt import request_overhead_chars
from gateway.agent.provenance import received_source
from gateway.agent.providers.base import ProviderError
from gateway.agent.sessions import Session, SessionStore
from gateway.agent.tools import ToolContext, ToolRegistry
from gateway.ops.logs import turn_scope
from gateway.ops.versioning import Versioning
from gateway.pipeline.commands import PromptParts
from gateway.pipeline.delivery import Delivery, nothing_to_send
from gateway.pipeline.recovery import (
    REPLY_EVENT,
    ResumePoint,
    Retries,
    answer_key,
    resume_point,
)
from gateway.pipeline.replies import provider_error_reply
from gateway.pipeline.routing import Route
from gateway.pipeline.streaming import ChatPace, LivePreview, open_preview
from gateway.stores.previews import PreviewStore

if TYPE_CHECKING:
    from gateway.agent.instructions import InstructionKeeper
    from gateway.agent.media.intake import UserContent
    from gateway.pipeline.auto_recall import AutoRecall
    from gateway.pipeline.capture import Capture, Due
    from gateway.pipeline.voice_reply import VoiceReplies

log = logging.getLogger(__name__)

INTERNAL_ERROR_REPLY = (
    "Something went wrong on my side while answering. Your message is saved; try again."
)
DEADLINE_REPLY = (
    "That took longer than I allow for one answer ({seconds:.0f} s), so I stopped. Your "
    "message is saved; try again, perhaps asking for less at once."
)
SETUP_REPLY = (
    "I couldn't prepare my answer: something I load for it failed (a file in the workspace, "
    "a skill or a tool server). The details are in the log; try again, and tell the operator "
    "if it keeps happening."
)
# Overflow recoveries (flush, compact, retry) per turn before giving up with a clear message.
OVERFLOW_RETRIES = 2
# Media results kept for messages the transcript refused (tried again shortly).
TAKEN_KEPT = 64


class TranscriptWriteError(Exception):
    """The person's message could not be appended to the transcript (disk full, read-only,
    immutable file): the turn did not start, the message stays pending."""


def attributed_text(msg: InboundMessage) -> str:
    """A group message as the model keeps it in the history: who said it, from the platform.

    The system prompt names only the current speaker; without this, every earlier line of a
    group would read as one anonymous voice that anyone could claim to be.
    """
    if msg.chat_type == "direct":
        return msg.text
    name = msg.sender_name.replace("\n", " ").strip()[:80] or "(no display name)"
    return f"[{name}, platform id {msg.channel}:{msg.sender_id}] {msg.text}"


# Turns a message's attachments into the turn's user message (gateway/agent/media/intake.py).
MediaStep = Callable[[Route, InboundMessage], Awaitable["UserContent"]]


class TurnRunner:
    def __init__(
        self,
        sessions: SessionStore,
        agent: AgentLoop,
        compactor: Compactor,
        prompt: PromptParts,
        delivery: Delivery,
        metrics: GatewayMetrics,
        versioning: Versioning,
        retries: Retries,
        previews: PreviewStore,
        *,
        deadline_seconds: float,
        model: str = "",
        host: str = "",
        media: MediaStep | None = None,
        recall: AutoRecall | None = None,
        capture: Capture | None = None,
        instructions: InstructionKeeper | None = None,
        voice: VoiceReplies | None = None,
    ) -> None:
        self.sessions = sessions
        self.agent = agent
        self.compactor = compactor
        self.prompt = prompt
        self.delivery = delivery
        self.metrics = metrics
        self.versioning = versioning
        self.retries = retries
        self.previews = previews  # live preview messages, by the reply's key
        self.deadline_seconds = deadline_seconds
        # Named in a refusal, so the person can tell the operator which endpoint and model.
        self.model, self.host = model, host
        # Messages re-queued by a restart: their turn may have run, in part or whole, before.
        self.resuming: set[tuple[str, str, str]] = set()
        # Replies whose live preview was opened in this process and not yet settled: a retry
        # of the turn goes on in the same preview message.
        self._previewing: set[str] = set()
        self.pace = ChatPace()  # live previews: each chat's update pace, across its replies
        # Voice notes, photos, documents: None when media are off.
        self.media = media
        # What the media step made of a message the transcript then refused: the gateway
        # tries the message again (gateway.py, PERSIST_ATTEMPTS), and a retry must not fetch
        # and transcribe its files again. Emptied as each message is recorded.
        self._taken: dict[tuple[str, str, str], UserContent] = {}
        # Replies read aloud (gateway/pipeline/voice_reply.py); None when speech is off.
        self.voice = voice
        # Memory hits for the message, given before private turns (None: no recall).
        self.recall = recall
        # "I'll remember that" with nothing written: a silent capture step after the reply.
        self.capture = capture
        self._captures: dict[str, Due] = {}  # session key -> the capture its turn owes
        # "Never delete anything without asking me": kept in INSTRUCTIONS.md after the reply.
        self.instructions = instructions

    async def run(self, route: Route, msg: InboundMessage, *, durable: bool) -> str:
        """One turn. Hand edits since the last turn are committed first, the turn's after.

        Raises only before the reply is queued (so the caller may answer with an error line
        without ever sending two replies); what comes after the queueing is logged.
        """
        with turn_scope(route.session_key) as turn:
            key = route.session_key
            self._captures.pop(key, None)  # owed by a turn whose reply was never queued
            await self.versioning.commit(route.workspace, "hand edit", session=key)
            log.info("turn started (%s)", route.channel)
            started = time.perf_counter()
            session = await self.sessions.get(route.workspace, route.session_key)
            rounds = session.tool_rounds
            live = await self._live_preview(route, msg, durable=durable)
            try:
                reply = await self._reply_to(session, route, msg, durable=durable, stream=live)
            finally:
                replaces = await live.finish() if live is not None else ""
            self._previewing.discard(answer_key(msg))
            if live is not None and (reply is None or nothing_to_send(reply)):
                # No reply will replace the preview: it must not stay behind unfinished.
                await live.discard()
                if replaces and durable:
                    await self._forget_preview(answer_key(msg))
                replaces = ""
            if reply is None:
                return ""  # given up on, and answered as such (recovery.py)
            reply_key = answer_key(msg) if durable else None
            voice = await self._voice_note(route, msg, reply, reply_key)
            if voice and replaces:
                # The text ends its preview as it always does; the voice note goes just
                # before it, on its own (a restart before the text's row repeats this turn's
                # delivery, and the voice's key makes that a no-op).
                await self.delivery.deliver(
                    route.channel,
                    route.chat_id,
                    "",
                    file=voice,
                    key=f"{reply_key}:voice" if reply_key else None,
                )
                voice = ""
            sent = await self.delivery.deliver(
                route.channel,
                route.chat_id,
                reply,
                key=reply_key,
                done=msg if durable else None,
                replaces=replaces,
                file=voice,
            )
            if replaces and durable:
                await self._forget_preview(answer_key(msg))
            try:
                captured = await self._capture_owed(session, route)
                captured = await self._keep_instructions(route, msg) or captured
                outcome = await sent
                session.record_event(
                    "delivery",
                    ok=outcome == "sent",
                    channel=route.channel,
                    **({} if outcome == "sent" else {"error": outcome}),
                )
                elapsed = time.perf_counter() - started
                self.metrics.turn_seconds.observe(elapsed)
                log.info("turn finished in %.2f s", elapsed)
                # Only tool calls (and a capture) write files in a turn: without them there is
                # nothing of the turn's to commit (a walk of the workspace per message saved;
                # a hand edit made meanwhile is committed as such before the next turn).
                if captured or session.tool_rounds != rounds:
                    await self.versioning.commit(route.workspace, "turn", session=key, turn=turn)
            except Exception:  # the reply is queued: nothing here may cause a second one
                log.exception("bookkeeping after the turn in %s failed", key)
            return reply

    async def _voice_note(
        self, route: Route, msg: InboundMessage, reply: str, key: str | None
    ) -> str:
        """The reply read aloud, as a file for the outbox ("" for text only: never fails)."""
        if self.voice is None or nothing_to_send(reply):
            return ""
        try:
            return await self.voice.voice_note_for(
                route, msg, reply, key=key or "", channel=self.delivery.channels.get(route.channel)
            )
        except Exception:
            log.exception("could not make the voice reply in %s", route.session_key)
            return ""

    async def _live_preview(
        self, route: Route, msg: InboundMessage, *, durable: bool
    ) -> LivePreview | None:
        """The turn's live preview, if its channel shows one (best effort: never fails the
        turn). Only for durable messages: the preview is named after the reply's key."""
        channel = self.delivery.channels.get(route.channel)
        if channel is None or not durable:
            return None
        key = answer_key(msg)
        # Only a message taken up again (after a restart, or a retry here) can have a
        # preview message already: a new one skips the state database's lookup.
        earlier = key in self._previewing or (
            (msg.channel, msg.chat_id, msg.message_id) in self.resuming
        )
        self._previewing.add(key)
        try:
            return await open_preview(
                channel,
                self.previews,
                chat_id=route.chat_id,
                direct=msg.chat_type == "direct",
                key=key,
                pace=self.pace,
                look_up=earlier,
            )
        except Exception:
            log.exception("could not open a live preview in %s", route.session_key)
            return None

    async def _forget_preview(self, key: str) -> None:
        try:
            await self.previews.forget_preview(key)
        except Exception:  # bookkeeping: the outbox row carries the preview already
            log.exception("could not forget the preview of %s", key)

    async def _reply_to(
        self,
        session: Session,
        route: Route,
        msg: InboundMessage,
        *,
        durable: bool,
        stream: TurnStream | None = None,
    ) -> str | None:
        """The reply to `msg`: recorded before a restart, or from a turn run (or continued)
        now; None when the message was given up on after too many retries."""
        resumed = durable and self._take_resumed(msg)
        point = await self._resume_point(session, msg) if resumed else ResumePoint()
        if point.reply is not None:
            log.info("delivering the reply recorded before the restart")
            return point.reply
        if resumed and (tries := await self.retries.exhausted(msg)):
            session.drop_turn(msg.message_id, reason="given up", tries=tries)
            await self.retries.give_up(msg, tries=tries)
            return None
        if not point.recorded:
            # A message whose attachments all failed is answered without the model; that
            # answer is in the transcript, so a restart delivers it as it is.
            direct = await self._record_message(session, route, msg)
            if direct:
                return direct
        waiting = self.retries.waiting_on_model(msg) if resumed else None
        reply = await self._reply(session, route, waiting, stream)
        if durable:
            self._record_reply(session, msg, reply)
        return reply

    def _take_resumed(self, msg: InboundMessage) -> bool:
        """Was `msg` re-queued by a restart? Asked once per message: a second try at it in
        the same run (the transcript refused it) starts from what this try did."""
        key = (msg.channel, msg.chat_id, msg.message_id)
        if key not in self.resuming:
            return False
        self.resuming.discard(key)
        return True

    async def _record_message(self, session: Session, route: Route, msg: InboundMessage) -> str:
        """Append the person's message, its attachments turned into what the model reads
        (media step); returns a direct reply when they left nothing for the model to answer
        ("" otherwise)."""
        extra: dict[str, Any] = {}
        message, direct = Message("user", attributed_text(msg)), ""
        key = (msg.channel, msg.chat_id, msg.message_id)
        content = self._taken.pop(key, None)
        if content is None and msg.attachments and self.media is not None:
            content = await self.media(route, msg)
        if content is not None:
            text = attributed_text(dataclasses.replace(msg, text=content.text))
            message = Message(
                "user", text, images=content.images, untrusted=received_source(content.media)
            )
            extra, direct = {"media": content.media}, content.reply
        try:
            session.record(
                message,
                channel=msg.channel,
                chat_id=msg.chat_id,
                sender_id=msg.sender_id,
                message_id=msg.message_id,
                **extra,
            )
        except OSError as exc:
            if content is not None and msg.message_id:
                if len(self._taken) >= TAKEN_KEPT:  # messages left for the next start
                    self._taken.pop(next(iter(self._taken)))
                self._taken[key] = content
            raise TranscriptWriteError(f"{type(exc).__name__}: {exc}") from exc
        if direct:
            try:
                session.record(Message("assistant", direct))
            except OSError as exc:  # the reply still goes out; a restart would recompute it
                log.warning("could not record the reply in the transcript: %s", exc)
        return direct

    async def _resume_point(self, session: Session, msg: InboundMessage) -> ResumePoint:
        """What the run before the restart did about `msg`, from the transcript on disk."""
        entries = await asyncio.to_thread(session.transcript.load)
        return resume_point(entries, msg)

    def _record_reply(self, session: Session, msg: InboundMessage, reply: str) -> None:
        """Note a reply that is not the model's last text (an error line, the tool-round note,
        the empty-answer line) so a restart delivers it as it is (recovery.py)."""
        last = session.history[-1] if session.history else None
        if (
            last is not None
            and last.role == "assistant"
            and not last.tool_calls
            and last.text.strip() == reply
        ):
            return  # the model's final answer, just recorded: that is the record
        try:
            session.record_event(
                REPLY_EVENT,
                channel=msg.channel,
                chat_id=msg.chat_id,
                message_id=msg.message_id,
                text=reply,
            )
        except OSError as exc:  # the reply still goes out; a restart would recompute it
            log.warning("could not record the reply in the transcript: %s", exc)

    async def _reply(
        self,
        session: Session,
        route: Route,
        waiting: Waiting | None,
        stream: TurnStream | None = None,
    ) -> str:
        """The answer to send, whatever happened: the model's, or a clear error line."""
        prompt = self.prompt
        try:  # a hostile or broken file, skill or tool server must not leave the person unanswered
            tools = prompt.tools_for(route)
            files = prompt.context_files(route)
            system = prompt.system_prompt(route, files)
            ctx = prompt.tool_context(route)
            overhead = request_overhead_chars(system, tools.specs())
        except Exception as exc:
            log.error(
                "could not prepare the turn in %s: %s: %s",
                route.session_key,
                type(exc).__name__,
                str(exc)[:200],
            )
            log.debug("preparing the turn failed", exc_info=True)  # RecursionError: long
            self.metrics.turns.inc(outcome="setup_error")
            session.record_event("error", error_kind="setup", text=SETUP_REPLY)
            return SETUP_REPLY
        try:
            async with asyncio.timeout(self.deadline_seconds):
                for notice in await self.compactor.before_turn(session, system, ctx, overhead):
                    await self.delivery.deliver(route.channel, route.chat_id, notice)
                if self.recall is not None:  # after compaction: its flush never sees it
                    system = await self.recall.add_to(system, route, session, files)
                reply = await self._answer(
                    session, route, system, ctx, tools, overhead, waiting, stream
                )
                if self.capture is not None and (
                    due := self.capture.check(route.private, reply, system, ctx)
                ):
                    self._captures[route.session_key] = due
            self.metrics.turns.inc(outcome="ok")
        except TimeoutError:
            log.warning(
                "turn in %s passed its deadline of %.0f s", route.session_key, self.deadline_seconds
            )
            reply = DEADLINE_REPLY.format(seconds=self.deadline_seconds)
            self.metrics.turns.inc(outcome="deadline")
            session.record_event("error", error_kind="deadline", text=reply)
        except ProviderError as exc:
            log.warning(
                "provider error in %s: %s (%s; %s, model %s)",
                route.session_key,
                exc.kind,
                exc,
                self.host,
                self.model,
            )
            reply = provider_error_reply(exc, model=self.model, host=self.host)
            self.metrics.turns.inc(outcome="provider_error")
            session.record_event("error", error_kind=exc.kind, text=reply)
        except Exception:
            # A bug of ours must still end in an answer: the person's message is on disk.
            log.exception("turn failed in %s", route.session_key)
            reply = INTERNAL_ERROR_REPLY
            self.metrics.turns.inc(outcome="internal_error")
            session.record_event("error", error_kind="internal", text=reply)
        return reply

    async def _capture_owed(self, session: Session, route: Route) -> bool:
        """Run the capture the turn owes (gateway/pipeline/capture.py), once the reply is
        queued: the person does not wait for it, the turn's commit includes what it wrote.
        Whether one ran (it may have written)."""
        due = self._captures.pop(route.session_key, None)
        if due is None or self.capture is None:
            return False
        today = self.compactor.clock.now().astimezone(self.compactor.zone).date()
        try:
            await self.capture.run(session, due, f"memory/{today.isoformat()}.md")
        except Exception:  # the reply is queued: a failure here is only logged
            log.exception("memory capture in %s failed", route.session_key)
        return True

    async def _keep_instructions(self, route: Route, msg: InboundMessage) -> bool:
        """A standing rule in the person's private message goes to INSTRUCTIONS.md in this
        turn, after the reply is queued (gateway/agent/instructions.py); a model call only
        when the cheap detector fires. Whether it wrote the file."""
        keeper = self.instructions
        if keeper is None or not keeper.due(route.private, msg.text):
            return False
        try:
            kept = await keeper.keep(
                route.workspace, [msg.text], f"said {keeper.today()}, {route.channel} DM"
            )
        except ProviderError as exc:  # a budget cap: compaction tries again later
            log.warning(
                "standing-instruction check in %s not made: %s", route.session_key, exc.kind
            )
            return False
        except Exception:  # the reply is queued: a failure here is only logged
            log.exception("standing-instruction check in %s failed", route.session_key)
            return False
        return bool(kept.added)

    async def _answer(
        self,
        session: Session,
        route: Route,
        system: SystemPrompt,
        ctx: ToolContext,
        tools: ToolRegistry,
        overhead: int,
        waiting: Waiting | None,
        stream: TurnStream | None = None,
    ) -> str:
        """The agent turn. A context overflow triggers flush, compaction and a retry (twice)."""
        for attempt in range(OVERFLOW_RETRIES + 1):
            try:
                result = await self.agent.run(
                    system,
                    session.history,
                    ctx,
                    tools,
                    _recorder(session, self.metrics),
                    waiting,
                    stream,
                )
                return result.reply
            except ProviderError as exc:
                if exc.kind != "context_overflow" or attempt == OVERFLOW_RETRIES:
                    raise
                log.warning("context overflow in %s; compacting and retrying", route.session_key)
                outcome = await self.compactor.flush_and_compact(
                    session, system, ctx, overhead, reason="overflow"
                )
                if outcome.notice:
                    await self.delivery.deliver(route.channel, route.chat_id, outcome.notice)
                if not outcome.compacted:
                    raise
        raise AssertionError("unreachable: the last attempt re-raises")


def _recorder(session: Session, metrics: GatewayMetrics) -> Recorder:
    def record(message: Message, usage: Usage | None) -> None:
        session.record(message, usage=usage)
        metrics.tool_result(message)

    return record
