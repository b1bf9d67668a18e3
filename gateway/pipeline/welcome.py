"""After `clawgate pairing approve`: welcome the person, then answer what they wrote meanwhile.

The approval is made by another process (the CLI) in the shared state database; it queues a
row in `welcomes`. The running gateway picks it up here: every few seconds, at start, and
before the first allowed message of an account in this process (so a message sent right after
approval cannot overtake the ones that waited). For each approval it sends a short welcome,
then hands the messages the inbox kept with status `waiting` back to the message path, oldest
first, and marks the welcome done. A message is made pending before it is handed over, so a
crash in between answers it after the next start instead of dropping it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Container

from channels.base import InboundMessage
from gateway.stores.access import AccessStore, Welcome
from gateway.stores.inbox import InboxStore

log = logging.getLogger(__name__)

WELCOME = "You're approved: the owner of this assistant let you in, so I can talk with you now."
WELCOME_OWNER = (
    "This account is now linked to you, the owner: this chat is your own assistant, with the "
    "same memory and conversation as `clawgate chat`."
)
ANSWERING = " Now to what you wrote while you waited:"
# More than this many messages sent while waiting: the oldest ones are answered, the rest
# dropped (a person writes one or two; a flood should not turn into a flood of model calls).
MAX_WAITING_ANSWERED = 10
POLL_SECONDS = 2.0

Announce = Callable[[str, str, str, str], Awaitable[None]]  # channel, chat id, text, key
Answer = Callable[[InboundMessage], Awaitable[None]]


def welcome_text(welcome: Welcome, answering: bool) -> str:
    text = WELCOME_OWNER if welcome.as_owner else WELCOME
    return text + (ANSWERING if answering else "")


class ApprovalFollowUp:
    """Welcomes approved people and answers their waiting messages (start/stop service)."""

    def __init__(
        self,
        access: AccessStore,
        inbox: InboxStore,
        channels: Container[str],
        announce: Announce,
        answer: Answer,
        *,
        interval: float = POLL_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.access, self.inbox = access, inbox
        self.channels = channels
        self.announce = announce
        self.answer = answer
        self.interval = interval
        self.sleep = sleep
        self._lock = asyncio.Lock()
        self._seen: set[tuple[str, str]] = set()
        # Accounts whose waiting messages are being handed back right now, and those
        # messages: a new message of such an account waits until they are queued.
        self._following: set[tuple[str, str]] = set()
        self._handing: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.check()
        self._task = asyncio.create_task(self._poll(), name="approval-follow-up")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def before_allowed(self, msg: InboundMessage) -> None:
        """Called before an allowed message is processed: the first one of an account in this
        process may follow an approval the poll has not seen yet."""
        account = (msg.channel, msg.sender_id)
        if (msg.channel, msg.message_id) in self._handing:
            return  # one of the waiting messages this follow-up hands back
        if account not in self._seen:
            self._seen.add(account)
            await self.check()
        elif account in self._following:
            # The poll is answering what they wrote while waiting: this newer message goes
            # after those (the lock is released once they are all queued).
            async with self._lock:
                pass

    async def check(self) -> int:
        """One pass over the approvals not announced yet; returns how many were handled."""
        async with self._lock:
            handled = 0
            for welcome in await self.access.pending_welcomes():
                if welcome.channel not in self.channels:
                    continue  # that channel is not running here; a later start handles it
                await self._follow_up(welcome)
                handled += 1
            return handled

    async def _follow_up(self, welcome: Welcome) -> None:
        # Answering goes through the message path, which calls before_allowed: this account
        # is handled here, so that must not check again (the lock is held).
        account = (welcome.channel, welcome.sender_id)
        self._seen.add(account)
        self._following.add(account)
        try:
            await self._welcome_and_answer(welcome)
        finally:
            self._following.discard(account)

    async def _welcome_and_answer(self, welcome: Welcome) -> None:
        waiting = await self.inbox.waiting_inbound(welcome.channel, welcome.sender_id)
        kept, dropped = waiting[:MAX_WAITING_ANSWERED], waiting[MAX_WAITING_ANSWERED:]
        for msg in dropped:
            await self.inbox.mark_done(msg, "denied")
        if dropped:
            log.info(
                "approval of %s:%s: %d older waiting message(s) not answered",
                welcome.channel,
                welcome.sender_id,
                len(dropped),
            )
        key = f"welcome:{welcome.channel}:{welcome.sender_id}:{welcome.approved_at}"
        await self.announce(
            welcome.channel, welcome.chat_id, welcome_text(welcome, bool(kept)), key
        )
        for msg in kept:
            await self.inbox.requeue(msg)
            handing = (msg.channel, msg.message_id)
            self._handing.add(handing)
            try:
                await self.answer(msg)
            finally:
                self._handing.discard(handing)
        await self.access.mark_welcomed(welcome)
        log.info(
            "approval of %s:%s announced, %d waiting message(s) answered",
            welcome.channel,
            welcome.sender_id,
            len(kept),
        )

    async def _poll(self) -> None:
        while True:
            await self.sleep(self.interval)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not follow up on approvals; trying again")
