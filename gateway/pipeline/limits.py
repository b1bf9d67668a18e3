"""Per-person limits: how many messages may wait, and how many may arrive per minute.

One person (one platform account) flooding the gateway must not make everyone else wait nor
grow memory without bound. A message over a limit is not dropped silently: it is recorded in
the inbox as `over_limit`, logged, and the person gets one polite line (once per minute at
most, so the refusals themselves cannot become a flood).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from gateway.clock import Clock

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0
BUSY_REPLY = (
    "I'm still working through your earlier messages ({count} waiting). Please wait for my "
    "answers, then send this one again."
)
RATE_REPLY = (
    "You're sending messages faster than I can take them (more than {limit} a minute). "
    "Please wait a minute, then send this one again."
)

Account = tuple[str, str]  # (channel, sender id)


@dataclass
class _Usage:
    arrivals: deque[float] = field(default_factory=deque)
    inflight: int = 0
    last_refusal: float = float("-inf")


class PersonLimits:
    def __init__(self, clock: Clock, queue_per_person: int, messages_per_minute: int) -> None:
        self.clock = clock
        self.queue_per_person = queue_per_person
        self.messages_per_minute = messages_per_minute
        self._usage: dict[Account, _Usage] = {}

    def admit(self, account: Account) -> tuple[bool, str]:
        """(admitted, reply). An admitted message must be `release`d once answered.

        A refused message comes with the polite reply, or "" when the person was told less
        than a minute ago.
        """
        now = self.clock.now().timestamp()
        usage = self._usage.setdefault(account, _Usage())
        while usage.arrivals and usage.arrivals[0] <= now - WINDOW_SECONDS:
            usage.arrivals.popleft()
        reply = ""
        if usage.inflight >= self.queue_per_person:
            reply = BUSY_REPLY.format(count=usage.inflight)
        elif self.messages_per_minute and len(usage.arrivals) >= self.messages_per_minute:
            reply = RATE_REPLY.format(limit=self.messages_per_minute)
        if not reply:
            usage.arrivals.append(now)
            usage.inflight += 1
            return True, ""
        log.warning(
            "%s account %s is over its limit: %s",
            account[0],
            account[1],
            "queue full" if usage.inflight >= self.queue_per_person else "rate",
        )
        if now - usage.last_refusal < WINDOW_SECONDS:
            return False, ""
        usage.last_refusal = now
        return False, reply

    def release(self, account: Account) -> None:
        usage = self._usage.get(account)
        if usage is None:
            return
        usage.inflight = max(0, usage.inflight - 1)
        if not usage.inflight and not usage.arrivals:
            del self._usage[account]
