"""The turn runner: owns one turn from the person's message to the queued reply.

In order, so a crash repeats at most a send: the person's message is appended to the
transcript; the prompt is assembled; flush and compaction run if due; the agent loop answers
(all of it within one overall deadline); the answer is appended to the transcript; the reply
goes to the outbox and the inbox entry is marked done in one statement (gateway/pipeline/
delivery.py); then it is sent. Everything the person must hear about (provider errors, our
own bugs, the deadline) ends in a reply, never in silence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from channels.base import InboundMessage
from gateway.agent.compaction import Compactor
from gateway.agent.conversation import Message, SystemPrompt, Usage
from gateway.agent.loop import AgentLoop, Recorder
from gateway.agent.prompt import request_overhead_chars
from gateway.agent.providers.base import ProviderError
from gateway.agent.sessions import Session, SessionStore
from gateway.agent.tools import ToolContext, ToolRegistry
from gateway.ops.logs import turn_scope
from gateway.ops.metrics import GatewayMetrics
from gateway.ops.versioning import Versioning
from gateway.pipeline.commands import PromptParts
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.replies import provider_error_reply
from gateway.pipeline.routing import Route

if TYPE_CHECKING:
    from gateway.agent.media.intake import UserContent

log = logging.getLogger(__name__)

INTERNAL_ERROR_REPLY = (
    "Something went wrong on my side while answering. Your message is saved; try again."
)
DEADLINE_REPLY = (
    "That took longer than I allow for one answer ({seconds:.0f} s), so I stopped. Your "
    "message is saved; try again, perhaps asking for less at once."
)
# Overflow recoveries (flush, compact, retry) per turn before giving up with a clear message.
OVERFLOW_RETRIES = 2


class TranscriptWriteError(Exception):
    """The person's message could not be appended to the transcript (disk full, read-only,
    immutable file): the turn did not start, the message stays pending."""


def answer_key(msg: InboundMessage) -> str:
    """The idempotency key of the one answer a platform message gets."""
    return f"answer:{msg.channel}:{msg.chat_id}:{msg.message_id}"


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
        *,
        deadline_seconds: float,
        model: str = "",
        host: str = "",
    ) -> None:
        self.sessions = sessions
        self.agent = agent
        self.compactor = compactor
        self.prompt = prompt
        self.delivery = delivery
        self.metrics = metrics
        self.versioning = versioning
        self.deadline_seconds = deadline_seconds
        # Named in a refusal, so the person can tell the operator which endpoint and model.
        self.model, self.host = model, host
        # Messages re-queued by a restart: they may be in the transcript already.
        self.resuming: set[tuple[str, str, str]] = set()
        # Voice notes, photos, documents: set by the gateway when media are enabled.
        self.media: MediaStep | None = None

    async def run(self, route: Route, msg: InboundMessage, *, durable: bool) -> str:
        """One turn. Hand edits since the last turn are committed first, the turn's after."""
        with turn_scope(route.session_key) as turn:
            key = route.session_key
            await self.versioning.commit(route.workspace, "hand edit", session=key)
            log.info("turn started (%s)", route.channel)
            started = time.perf_counter()
            session = await self.sessions.get(route.workspace, route.session_key)
            # A message whose attachments all failed is answered without the model.
            direct = await self._record_message(session, msg, route)
            reply = direct or await self._reply(session, route)
            sent = await self.delivery.deliver(
                route.channel, route.chat_id, reply,
                key=answer_key(msg) if durable else None, done=msg if durable else None,
            )
            outcome = await sent
            session.record_event("delivery", ok=outcome == "sent", channel=route.channel,
                                 **({} if outcome == "sent" else {"error": outcome}))
            elapsed = time.perf_counter() - started
            self.metrics.turn_seconds.observe(elapsed)
            log.info("turn finished in %.2f s", elapsed)
            await self.versioning.commit(route.workspace, "turn", session=key, turn=turn)
            return reply

    async def _record_message(self, session: Session, msg: InboundMessage,
                              route: Route) -> str:
        """Append the person's message; returns a direct reply when its attachments left
        nothing for the model to answer ("" otherwise)."""
        if await self._recorded_before(session, msg):
            return ""
        message, extra, direct = Message("user", attributed_text(msg)), {}, ""
        if msg.attachments and self.media is not None:
            content = await self.media(route, msg)
            text = attributed_text(dataclasses.replace(msg, text=content.text))
            message = Message("user", text, images=content.images)
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
            if direct:
                session.record(Message("assistant", direct))
        except OSError as exc:
            raise TranscriptWriteError(f"{type(exc).__name__}: {exc}") from exc
        return direct

    async def _recorded_before(self, session: Session, msg: InboundMessage) -> bool:
        """A resumed message may be in the transcript already (the last run died mid-turn)."""
        key = (msg.channel, msg.chat_id, msg.message_id)
        if key not in self.resuming:
            return False
        self.resuming.discard(key)

        def scan() -> bool:
            return any(
                entry.get("message_id") == msg.message_id and entry.get("channel") == msg.channel
                and entry.get("chat_id") == msg.chat_id for entry in session.transcript.load()
            )

        return await asyncio.to_thread(scan)

    async def _reply(self, session: Session, route: Route) -> str:
        """The answer to send, whatever happened: the model's, or a clear error line."""
        prompt = self.prompt
        tools = prompt.tools_for(route)
        system = prompt.system_prompt(route, prompt.context_files(route))
        ctx = prompt.tool_context(route)
        overhead = request_overhead_chars(system, tools.specs())
        try:
            async with asyncio.timeout(self.deadline_seconds):
                for notice in await self.compactor.before_turn(session, system, ctx, overhead):
                    await self.delivery.deliver(route.channel, route.chat_id, notice)
                reply = await self._answer(session, route, system, ctx, tools, overhead)
            self.metrics.turns.inc(outcome="ok")
        except TimeoutError:
            log.warning("turn in %s passed its deadline of %.0f s", route.session_key,
                        self.deadline_seconds)
            reply = DEADLINE_REPLY.format(seconds=self.deadline_seconds)
            self.metrics.turns.inc(outcome="deadline")
            session.record_event("error", error_kind="deadline", text=reply)
        except ProviderError as exc:
            log.warning("provider error in %s: %s (%s; %s, model %s)", route.session_key,
                        exc.kind, exc, self.host, self.model)
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
