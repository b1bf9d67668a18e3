"""The one way out: every message the gateway sends goes through `Delivery.deliver`.

Replies, command answers, pairing codes, media and empty-message replies, compaction notices,
heartbeat alerts and reminders all take this path, so each is recorded, counted and
retried the same way.

`deliver` writes the message to the outbox table of the state database (and, in the same
statement, marks the inbound message it answers as done), queues it for its chat and
returns at once; it never waits for the platform. Each chat has its own sender task that sends
that chat's messages in order: a chat that is rate-limited (Telegram 429 with retry_after) or
whose platform is down waits alone, while every other chat keeps getting its answers.

A send that fails is retried with backoff while the gateway runs; the outbox row stays
pending, so a restart sends it again (`resume`). A long reply goes out as several platform
messages (parts); each accepted part is recorded in the outbox row (`parts_sent`) before the
next one is sent, so a retry or a restart sends only the parts not yet accepted. A send the
platform refuses for good (`DeliveryRefused`: blocked by the person, chat gone) is recorded
as failed and not retried.

A reply that had a live preview (gateway/pipeline/streaming.py) names the preview message
(`replaces`, kept in the outbox row): its first part is written into that message by an
edit. An edit is idempotent, so for such a reply even the window below closes: sent again
after a crash, it edits the same message to the same text (channels/preview.py).

Exactly-once where it matters: an optional idempotency `key` (unique in the outbox) makes a
second `deliver` with the same key a no-op, so a scheduler firing twice, or a restart
re-running an answered message, never sends twice. The remaining window is a crash after the
platform accepted a message (or one part of it) and before the outbox recorded that: that
message (or part) is sent again after the restart (docs/reliability.md measures it). So the
mark is written at once by the chat's sender, an urgent write that no other write queues
ahead of (gateway/stores/group_commit.py), and the next message of the chat waits for it;
`clawgate_delivery_mark_seconds` times it. Where the platform can recognise a repeat
(Discord's message nonce, derived from the outbox row) the channel uses it and the window
closes for restarts within the platform's memory of nonces.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from channels import voice
from channels.base import Channel, DeliveryRefused, InboundMessage, OutboundMessage
from gateway.agent.metrics import GatewayMetrics
from gateway.stores.inbox import InboxStore
from gateway.stores.outbox import OutboxStore, Outgoing
from heartbeat.ack import scrub_token
from retrypolicy import Backoff

log = logging.getLogger(__name__)

# What became of a message's first send attempt:
# sent; queued (failed once, retried in the background); refused (for good); duplicate (the
# key was delivered or queued before: nothing sent); empty (nothing left to send); no_channel.
Outcome = Literal["sent", "queued", "refused", "duplicate", "empty", "no_channel"]
Sleep = Callable[[float], Awaitable[object]]
Together = Callable[[sqlite3.Connection], object]


@dataclass
class _Item:
    message: Outgoing
    first: asyncio.Future[Outcome]
    attempts: int = 0
    parts_sent: int = 0  # parts of a long message the platform accepted (see Outgoing)


class Delivery:
    """Outbox plus one ordered sender per chat. `resume()` after the channels started."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        outbox: OutboxStore,
        inbox: InboxStore,
        metrics: GatewayMetrics,
        *,
        retry_first: float = 1.0,
        retry_cap: float = 300.0,
        max_attempts: int = 30,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.channels = channels
        self.outbox, self.inbox = outbox, inbox
        self.metrics = metrics
        self.retry_first, self.retry_cap = retry_first, retry_cap
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._queues: dict[tuple[str, str], deque[_Item]] = {}
        self._senders: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def deliver(
        self,
        channel: str,
        chat_id: str,
        text: str,
        *,
        key: str | None = None,
        done: InboundMessage | None = None,
        done_status: str = "done",
        replaces: str = "",
        file: str = "",
        together: Together | None = None,
    ) -> asyncio.Future[Outcome]:
        """Record `text` for `chat_id` and queue it; the future says how the first try went.

        `done`: the inbound message this answers, marked done by the same statement that adds the
        outbox row (so a crash after this point repeats at most a send, never a turn).
        `file`: a file to send (absolute path), `text` being its caption (send_file tool), or
        a voice note with the reply's text (gateway/pipeline/voice_reply.py).
        `together`: statements committed in the same transaction as the outbox row (a
        task's final state, gateway/features/tasks/); on a channel that keeps no outbox
        they commit alone, durably, before the send. Not run when there is no channel or
        nothing to send: the caller sees `no_channel` / `empty` and decides.
        """
        target = self.channels.get(channel)
        text = scrub_token(text)  # HEARTBEAT_OK never reaches a person, whatever sent it
        if target is None or (nothing_to_send(text) and not file):
            if target is None:
                log.error("no channel %r to deliver to", channel)
            else:
                log.info("nothing left to send to %s after removing HEARTBEAT_OK", channel)
            if done is not None:
                await self.inbox.mark_done(done, done_status)
            return _settled("no_channel" if target is None else "empty")
        row: int | None = None
        if target.durable:
            row = await self.outbox.enqueue_outbound(
                channel,
                chat_id,
                text,
                key=key,
                done=done,
                done_status=done_status,
                replaces=replaces,
                file=file,
                together=together,
            )
            if row is None:
                log.info("delivery %s was made before; not sending it again", key)
                return _settled("duplicate")
        elif together is not None:
            await self.outbox.commit_alone(together)
        return self._queue(Outgoing(row, channel, chat_id, text, replaces=replaces, file=file))

    async def resume(self) -> int:
        """Queue what the outbox still holds from before a restart; returns how many."""
        pending = [m for m in await self.outbox.pending_outbound() if m.channel in self.channels]
        for message in pending:
            self._queue(message)
        if pending:
            log.info("resending %d message(s) not delivered before the restart", len(pending))
        return len(pending)

    def pending(self) -> int:
        """Messages queued or being sent, all chats."""
        return sum(len(queue) for queue in self._queues.values())

    async def drain(self) -> None:
        """Wait until every queued message was sent (and recorded), refused or given up on."""
        while self._senders:
            await asyncio.gather(*list(self._senders.values()), return_exceptions=True)

    async def close(self, timeout: float = 5.0) -> None:
        """Let queued sends finish for up to `timeout` s; the rest stay in the outbox."""
        try:
            await asyncio.wait_for(self.drain(), timeout)
        except TimeoutError:
            log.warning("stopping with %d message(s) still in the outbox", self.pending())
        for task in list(self._senders.values()):
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)
        self._senders.clear()
        self._queues.clear()

    # -- per-chat senders ---------------------------------------------------------------------

    def _queue(self, message: Outgoing) -> asyncio.Future[Outcome]:
        first: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        chat = (message.channel, message.chat_id)
        self._queues.setdefault(chat, deque()).append(
            _Item(message, first, message.attempts, message.parts_sent)
        )
        if chat not in self._senders:
            self._senders[chat] = asyncio.create_task(
                self._send_all(chat), name=f"deliver:{chat[0]}:{chat[1]}"
            )
        return first

    async def _send_all(self, chat: tuple[str, str]) -> None:
        queue = self._queues[chat]
        backoff = Backoff(self.retry_first, self.retry_cap)
        try:
            while queue:
                item = queue[0]
                if await self._attempt(item):
                    queue.popleft()
                    backoff.reset()
                else:
                    await self._sleep(backoff.next())
        finally:
            self._senders.pop(chat, None)
            if not queue:
                self._queues.pop(chat, None)

    async def _attempt(self, item: _Item) -> bool:
        """One send; True when the item is finished (sent, refused or given up)."""
        message = item.message
        channel = self.channels[message.channel]

        async def accepted(parts_sent: int, total: int) -> None:
            # Recorded before the next part goes out, so neither a retry nor a restart sends
            # an accepted part again; the last part is recorded by marking the row sent.
            item.parts_sent = parts_sent
            if parts_sent < total:
                await self._mark(self.outbox.note_parts, message.row, parts_sent)

        try:
            await channel.send(
                OutboundMessage(
                    message.channel,
                    message.chat_id,
                    message.text,
                    key="" if message.row is None else str(message.row),
                    first_part=item.parts_sent,
                    on_part=accepted,
                    replaces=message.replaces,
                    file=message.file,
                )
            )
        except asyncio.CancelledError:
            raise
        except DeliveryRefused as exc:
            log.warning("delivery to %s chat %s refused: %s", message.channel, message.chat_id, exc)
            await self._finish(item, "refused", str(exc))
            return True
        except Exception as exc:
            item.attempts += 1
            error = type(exc).__name__
            self.metrics.delivery_retry(message.channel)
            _settle(item.first, "queued")
            if item.attempts >= self.max_attempts:
                log.error(
                    "delivery to %s chat %s given up after %d attempts (%s)",
                    message.channel,
                    message.chat_id,
                    item.attempts,
                    error,
                )
                await self._finish(item, "failed", error)
                return True
            log.warning(
                "delivery to %s chat %s failed (%s); retrying",
                message.channel,
                message.chat_id,
                error,
            )
            await self._record(self.outbox.note_attempt, message.row, error)
            return False
        await self._finish(item, "sent", "")
        return True

    async def _finish(self, item: _Item, status: str, error: str) -> None:
        message = item.message
        self.metrics.deliveries.inc(
            channel=message.channel, outcome="ok" if status == "sent" else "failed"
        )
        if status != "sent":
            await self._record(self.outbox.finish_outbound, message.row, status, error)
            _settle(item.first, "refused")
        else:
            _settle(item.first, "sent")
            await self._mark(self.outbox.mark_sent, message.row)  # handed to the writer at once
        if message.file and voice.is_voice(message.file):
            # A spoken reply's file was made for this row only (gateway/pipeline/voice_reply.py).
            await asyncio.to_thread(voice.discard, Path(message.file))

    async def _mark(
        self, write: Callable[..., Awaitable[None]], row: int | None, *args: object
    ) -> None:
        """Record what the platform accepted, timed: until it commits, a crash sends it again."""
        if row is None:
            return
        accepted = time.perf_counter()
        await self._record(write, row, *args)
        self.metrics.delivery_mark_seconds.observe(time.perf_counter() - accepted)

    async def _record(
        self, write: Callable[..., Awaitable[None]], row: int | None, *args: object
    ) -> None:
        if row is None:
            return
        try:
            await write(row, *args)
        except Exception:  # the send happened; a bookkeeping failure must not resend it now
            log.exception("could not record delivery %d", row)


def nothing_to_send(text: str) -> bool:
    """Whether `deliver` would send nothing of `text` (empty once HEARTBEAT_OK is out)."""
    return not scrub_token(text).strip()


def _settled(outcome: Outcome) -> asyncio.Future[Outcome]:
    future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    future.set_result(outcome)
    return future


def _settle(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():
        future.set_result(outcome)
