"""Taking a message up again after a restart: what was already done, and how often to try.

A restart finds pending inbox entries: messages recorded whose reply never reached the outbox
(the outbox insert is what marks an entry done). The last run may have stopped anywhere in
the turn, so the session transcript is read to find out where:

- the person's message is not in it: the turn never started; run it as new;
- the reply is in it (the model's final answer, or a `reply` event for a reply that is not
  the model's text: an error line, the tool-round note): the turn finished and only the
  outbox write was lost. Deliver that reply as recorded; never ask the model again, which
  would put a second answer in the transcript (and, with the answer already last in the
  history, ask the model to answer nothing);
- the message is in it with no reply after it: continue the turn from the history on disk,
  which ends with the message or with the tool results recorded since;
- the message is in it but someone else's message came after it (a turn of ours failed
  between the two): record it again, so the model answers it and not the later one.

A message whose turn keeps being cut short (a crash each time, say a message that makes the
process run out of memory) must not hold its session, or the gateway, in a loop. Each
restart that takes its turn up again counts one retry in the inbox, taken back while the
turn waits for the model provider (a kill then is not the message's doing: the gateway was
only waiting on it). Past `MAX_RETRIES` the message is given up: it leaves the session's
history (or every later message would bring it back), the person gets a short reply, the
inbox entry is marked `failed`, the log says which message,
`clawgate_messages_given_up_total` counts it, and `clawgate status` shows the number of
messages given up.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from channels.base import InboundMessage
from gateway.agent.loop import EMPTY_ANSWER, Waiting
from gateway.agent.metrics import GatewayMetrics
from gateway.pipeline.delivery import Delivery
from gateway.stores.inbox import InboxStore

log = logging.getLogger(__name__)

# Restarts after which a message's turn may be taken up again; the next one gives up on it.
# A kill in the middle of one turn is rare; the same message cut short six times running is
# a message that stops the gateway, or a crash loop that giving up on it may end. (The kill
# harness, which kills every few seconds right as the resumed turns wait for the provider's
# first call, saw at most 3 retries of one message in 20 kills; bench/crash_kill.py prints it.)
MAX_RETRIES = 5
GIVE_UP_REPLY = (
    "I'm sorry: I tried to answer this message {tries} times and each try was cut short "
    "(the gateway stopped), so I've given up on it. The operator can find it in the log. "
    "If it still matters, send it again, perhaps in other words."
)
# The transcript event that records a reply which is not the model's final text.
REPLY_EVENT = "reply"


def answer_key(msg: InboundMessage) -> str:
    """The idempotency key of the one answer a platform message gets."""
    return f"answer:{msg.channel}:{msg.chat_id}:{msg.message_id}"


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a resumed message's turn stopped, as the session transcript tells it.

    `recorded`: the message is in the transcript as the last person's message (do not append
    it again). `reply`: the reply recorded already, to deliver as it is (None: none yet).
    """

    recorded: bool = False
    reply: str | None = None


def _is_message(entry: dict[str, Any], msg: InboundMessage) -> bool:
    return (
        entry.get("type") == "user"
        and str(entry.get("message_id", "")) == msg.message_id
        and entry.get("channel") == msg.channel
        and entry.get("chat_id") == msg.chat_id
    )


def _is_final_answer(entry: dict[str, Any]) -> bool:
    """The model's last word in a turn: an assistant entry calling no tools. Heartbeat alerts
    and reminders are recorded as assistant entries too, but answer nobody."""
    return (
        entry.get("type") == "assistant"
        and not entry.get("tool_calls")
        and not entry.get("heartbeat")
        and not entry.get("reminder")
    )


def resume_point(entries: Iterable[dict[str, Any]], msg: InboundMessage) -> ResumePoint:
    """Read the transcript `entries` for what was done about `msg` before a restart."""
    found = False
    answer: str | None = None
    recorded_reply: str | None = None
    for entry in entries:
        if _is_message(entry, msg):
            found, answer, recorded_reply = True, None, None
            continue
        if not found:
            continue
        kind = entry.get("type")
        if kind == "user":  # another message came after it, unanswered in between
            if answer is None and recorded_reply is None:
                found = False
                continue
            break
        if kind == REPLY_EVENT and str(entry.get("message_id", "")) == msg.message_id:
            recorded_reply = str(entry.get("text", ""))
        elif answer is None and _is_final_answer(entry):
            answer = str(entry.get("text", "")).strip() or EMPTY_ANSWER
    if recorded_reply is not None:
        return ResumePoint(True, recorded_reply)
    if answer is not None:
        return ResumePoint(True, answer)
    return ResumePoint(recorded=found)


class Retries:
    """Counts the tries at messages taken up again after a restart; gives up past a bound."""

    def __init__(
        self,
        inbox: InboxStore,
        delivery: Delivery,
        metrics: GatewayMetrics,
        max_retries: int = MAX_RETRIES,
    ) -> None:
        self.inbox = inbox
        self.delivery = delivery
        self.metrics = metrics
        self.max_retries = max_retries

    async def exhausted(self, msg: InboundMessage) -> int:
        """Count this retry; 0 while within the bound, else the number of tries so far."""
        retries = await self.inbox.note_retry(msg)
        if retries <= self.max_retries:
            log.info(
                "taking up %s message %s again after a restart (retry %d of %d)",
                msg.channel,
                msg.message_id,
                retries,
                self.max_retries,
            )
            return 0
        return retries

    def waiting_on_model(self, msg: InboundMessage) -> Waiting:
        """For a retried turn's model calls: the retry it counted is taken back while the
        turn waits for the provider and counted again when the answer is in. A kill during
        the wait (most of a turn's time) is not the message's doing; one while the gateway
        works on the message (prompt, request, answer, tools) may be, and stays counted."""

        @contextlib.asynccontextmanager
        async def waiting() -> AsyncIterator[None]:
            await self._step(msg, -1)
            try:
                yield
            finally:
                await self._step(msg, 1)

        return waiting

    async def _step(self, msg: InboundMessage, step: int) -> None:
        try:
            await self.inbox.note_retry(msg, step)
        except Exception:  # bookkeeping: the turn goes on
            log.exception(
                "could not update the retry count of %s message %s", msg.channel, msg.message_id
            )

    async def give_up(self, msg: InboundMessage, *, tries: int) -> None:
        """Answer the person, mark the inbox entry failed (one statement), log, count."""
        log.error(
            "gave up on %s message %s in chat %s after %d tries; it is marked failed",
            msg.channel,
            msg.message_id,
            msg.chat_id,
            tries,
        )
        self.metrics.messages_given_up.inc(channel=msg.channel)
        await self.delivery.deliver(
            msg.channel,
            msg.chat_id,
            GIVE_UP_REPLY.format(tries=tries),
            key=answer_key(msg),
            done=msg,
            done_status="failed",
        )
