"""Who may talk to the assistant on Telegram and Discord: DM policies, pairing, group rules.

`dm_policy` per channel:
- `pairing` (default): allowlisted or approved senders pass; an unknown sender's message is
  not processed, they get a pairing code instead, and the owner approves it with
  `clawgate pairing approve CHANNEL CODE` (from another shell, while the gateway runs: both
  share the state database). `--owner` links that account to the owner, so its DMs are the
  owner's own workspace and session. What they wrote while waiting stays in the inbox
  (status `waiting`); after approval the gateway welcomes them and answers it, in order
  (gateway/pipeline/welcome.py); a denial drops it.
- `allowlist`: only `allow_from` and previously approved senders; others are ignored silently.
- `open`: anyone may talk (each person still gets their own workspace).
- `disabled`: no direct messages at all.

Pairing codes are 8 characters from an alphabet without 0/O/1/I, valid one hour, at most 3
pending per channel. A code is sent once and re-sent at most once; a sender gets at most 3
codes a day and nothing for a day after a denial; after 5 wrong codes in 15 minutes,
`approve` refuses for the rest of that window. Silence is the answer to anything beyond that.

Slots are not held forever: a code past its hour is marked `expired`, and when every slot is
taken the oldest pending request gives way (`superseded`, its waiting messages dropped) to the
newcomer. Otherwise three strangers (or one with three accounts) renewing their codes could
keep every slot, and the person the owner is waiting for would only ever meet silence.

Groups are off unless `groups_enabled`; then only listed group ids, and only when the bot is
mentioned or replied to (the channel sets `InboundMessage.addressed`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from channels.base import InboundMessage
from gateway.clock import Clock, SystemClock
from gateway.pipeline.access import AccessDecision
from gateway.pipeline.routing import TERMINAL_CHANNEL
from gateway.stores.state import StateDB

log = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
CODE_LENGTH = 8
CODE_TTL = timedelta(hours=1)
MAX_PENDING_PER_CHANNEL = 3
MAX_CODES_PER_SENDER_PER_DAY = 3
DENIAL_SILENCE = timedelta(days=1)
MAX_WRONG_APPROVALS = 5
WRONG_APPROVAL_WINDOW = timedelta(minutes=15)

PAIRING_REPLY = (
    "Hi! I don't know you yet, so I can't answer. Your pairing code is {code} "
    "(valid for 1 hour). Ask the owner of this assistant to run:\n"
    "clawgate pairing approve {channel} {code}"
)
PAIRING_REMINDER = "Still waiting for approval. Your pairing code is {code}."


class PairingError(Exception):
    """An approve/deny that cannot be done; `str()` is the line to show."""


class UnknownCode(PairingError):
    """No pending request has that code (mistyped, or expired): a mistake in the command."""


class AlreadyDecided(PairingError):
    """The code was approved or denied before (the command run twice, the panel first)."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status  # "approved" or "denied"


@dataclass(frozen=True, slots=True)
class PairingRequest:
    channel: str
    code: str
    sender_id: str
    chat_id: str
    sender_name: str
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    dm_policy: str = "pairing"
    allow_from: frozenset[str] = field(default_factory=frozenset)
    groups_enabled: bool = False
    groups: frozenset[str] = field(default_factory=frozenset)


def normalize_code(code: str) -> str:
    return "".join(code.split()).replace("-", "").upper()


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


class Pairing:
    def __init__(self, state: StateDB, clock: Clock | None = None) -> None:
        self.state = state
        self.clock = clock or SystemClock()

    def _now(self) -> float:
        return self.clock.now().timestamp()

    async def request(self, msg: InboundMessage) -> str:
        """The reply for an unknown sender's DM ("" means stay silent)."""
        reply, _ = await self.answer(msg)
        return reply

    async def answer(self, msg: InboundMessage) -> tuple[str, bool]:
        """(reply, waiting) for an unknown sender's DM. `waiting`: the sender holds a valid
        code, so their message is kept and answered if the owner approves them."""
        now = self._now()
        mine = await self.state.pairing.codes_of(msg.channel, msg.sender_id)
        silence = DENIAL_SILENCE.total_seconds()
        if any(status == "denied" and now - created < silence for _, status, created, _, _ in mine):
            return "", False
        for code, status, _, expires, resent in mine:
            if status == "pending" and expires > now:
                if resent:
                    log.info(
                        "pairing: %s:%s keeps writing, rate limited", msg.channel, msg.sender_id
                    )
                    return "", True
                await self.state.pairing.mark_resent(msg.channel, code)
                return PAIRING_REMINDER.format(code=code), True
        day = timedelta(days=1).total_seconds()
        if sum(now - created < day for _, _, created, _, _ in mine) >= MAX_CODES_PER_SENDER_PER_DAY:
            log.info("pairing: %s:%s asked too often today", msg.channel, msg.sender_id)
            return "", False
        await self._make_room(msg.channel, now)
        code = new_code()
        await self.state.pairing.add_code(
            msg.channel,
            code,
            msg.sender_id,
            msg.chat_id,
            msg.sender_name,
            now,
            now + CODE_TTL.total_seconds(),
        )
        log.warning(
            "pairing request on %s from %s (%s): code %s",
            msg.channel,
            msg.sender_id,
            msg.sender_name or "no name",
            code,
        )
        return PAIRING_REPLY.format(code=code, channel=msg.channel), True

    async def _make_room(self, channel: str, now: float) -> None:
        """Mark codes past their hour expired; if every slot is still taken, the oldest
        pending requests give way (their waiting messages are dropped: they cannot be
        approved any more)."""
        await self.state.pairing.expire(channel, now)
        pending = await self.state.pairing.pending_codes(channel)
        for code, sender in pending[: max(0, len(pending) - MAX_PENDING_PER_CHANNEL + 1)]:
            await self.state.pairing.supersede(channel, str(code))
            await self.state.inbox.settle_waiting(channel, str(sender), "expired")
            log.warning(
                "pairing: %d requests pending on %s; the oldest (from %s) gave way to a new one",
                len(pending),
                channel,
                sender,
            )

    async def pending(self, channel: str | None = None) -> list[PairingRequest]:
        rows = await self.state.pairing.requests(self._now(), channel)
        return [_request(row, self.clock) for row in rows]

    async def approve(self, channel: str, code: str, *, owner: str | None = None) -> PairingRequest:
        """Let the sender talk. With `owner` (the owner's person id) the account is linked to
        the owner first: its DMs become the owner's own workspace and session.

        The running gateway learns of it from the `welcomes` table: it welcomes the person and
        answers what they wrote while waiting.
        """
        request = await self._take(channel, code, "approved")
        if owner is not None:
            await self.state.links.link(request.channel, request.sender_id, owner)
        person = await self.state.links.person_for(request.channel, request.sender_id)
        await self.state.access.approve(request.channel, request.sender_id, via=f"pairing:{code}")
        await self.state.access.queue_welcome(
            request.channel,
            request.sender_id,
            request.chat_id,
            person or "",
            as_owner=owner is not None,
        )
        return request

    async def deny(self, channel: str, code: str) -> PairingRequest:
        request = await self._take(channel, code, "denied")
        await self.state.inbox.settle_waiting(request.channel, request.sender_id, "denied")
        return request

    async def revoke(self, channel: str, sender_id: str) -> bool:
        """Take back an approval: the sender's next message is treated as a stranger's (a new
        pairing request under the pairing policy). Their pending codes are withdrawn too, so
        an old code cannot be approved by mistake. Identity links and the workspace stay.
        True if the sender was approved. Takes effect at once: access reads the database."""
        was_approved = await self.state.access.revoke(channel, sender_id)
        await self.state.pairing.withdraw(channel, sender_id)
        # What they wrote while waiting is not answered later either.
        await self.state.inbox.settle_waiting(channel, sender_id, "denied")
        return was_approved

    async def _take(self, channel: str, code: str, status: str) -> PairingRequest:
        now = self._now()
        window = now - WRONG_APPROVAL_WINDOW.total_seconds()
        if await self.state.pairing.wrong_attempts(channel, window) >= MAX_WRONG_APPROVALS:
            raise PairingError(
                f"too many wrong codes for {channel} in the last 15 minutes; wait and retry"
            )
        code = normalize_code(code)
        found = await self.state.pairing.request(channel, code, now)
        if found is None:
            await self._decided_before(channel, code)
            await self.state.pairing.note_wrong(channel, now)
            raise UnknownCode(
                f"no pending pairing request {code} on {channel} (wrong or expired code); "
                f"see `clawgate pairing list`"
            )
        await self.state.pairing.set_status(channel, code, status)
        return _request(found, self.clock)

    async def _decided_before(self, channel: str, code: str) -> None:
        """AlreadyDecided when `code` was approved or denied already: saying "wrong or
        expired" of a code that worked sends a person looking for a mistake they did not
        make (and a repeat is not a guess: it does not count against the wrong-code limit)."""
        decided = await self.state.pairing.decided(channel, code)
        if decided is None:
            return
        status, sender, name = (str(value) for value in decided)
        who = f"{channel} user {sender}" + (f" ({name})" if name else "")
        if status == "approved":
            raise AlreadyDecided(
                f"{code} on {channel} was already approved: {who} may talk to "
                "the assistant; nothing to do",
                status,
            )
        raise AlreadyDecided(
            f"{code} on {channel} was already denied ({who}); when they write "
            "again they get a new code",
            status,
        )


def _request(row: Iterable[object], clock: Clock) -> PairingRequest:
    channel, code, sender, chat, name, created, expires = row
    zone = clock.now().tzinfo
    return PairingRequest(
        str(channel),
        str(code),
        str(sender),
        str(chat),
        str(name),
        datetime.fromtimestamp(float(created), zone),  # type: ignore[arg-type]
        datetime.fromtimestamp(float(expires), zone),  # type: ignore[arg-type]
    )


class ChannelAccess:
    """The AccessPolicy of a gateway with platform channels (the terminal always passes)."""

    def __init__(
        self,
        state: StateDB,
        policies: Mapping[str, ChannelPolicy],
        clock: Clock | None = None,
    ) -> None:
        self.state = state
        self.policies = dict(policies)
        self.pairing = Pairing(state, clock)

    async def check(self, msg: InboundMessage) -> AccessDecision:
        if msg.channel == TERMINAL_CHANNEL:
            return AccessDecision(True)
        policy = self.policies.get(msg.channel)
        if policy is None:
            log.warning("denied message on unconfigured channel %s", msg.channel)
            return AccessDecision(False)
        if msg.chat_type == "group":
            return AccessDecision(self._group_allowed(policy, msg))
        if policy.dm_policy == "disabled":
            return AccessDecision(False)
        if policy.dm_policy == "open" or await self._known(policy, msg):
            return AccessDecision(True)
        if policy.dm_policy == "allowlist":
            log.info("ignored DM from %s:%s (not on the allowlist)", msg.channel, msg.sender_id)
            return AccessDecision(False)
        reply, waiting = await self.pairing.answer(msg)
        return AccessDecision(False, reply, waiting=waiting)

    async def _known(self, policy: ChannelPolicy, msg: InboundMessage) -> bool:
        if msg.sender_id in policy.allow_from:
            return True
        return await self.state.access.is_approved(msg.channel, msg.sender_id)

    @staticmethod
    def _group_allowed(policy: ChannelPolicy, msg: InboundMessage) -> bool:
        if not policy.groups_enabled or not msg.addressed:
            return False
        if msg.chat_id not in policy.groups:
            log.info("ignored mention in group %s:%s (not in groups)", msg.channel, msg.chat_id)
            return False
        return True
