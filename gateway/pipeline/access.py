"""Access control: who may reach the model at all. Unknown senders are denied by default.

The foundation trusts only the local terminal (whoever can type there already owns the
machine). Platform channels bring their own policies (pairing, allowlists) behind the same
small interface.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from channels.base import InboundMessage
from gateway.pipeline.routing import TERMINAL_CHANNEL

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AccessDecision:
    allowed: bool
    reply: str = ""  # what to tell a denied sender, if anything
    # Denied for now, but the sender holds a pairing code: keep the message (inbox status
    # `waiting`) so it is answered if the owner approves them.
    waiting: bool = False


class AccessPolicy(Protocol):
    async def check(self, msg: InboundMessage) -> AccessDecision: ...


class LocalOnlyAccess:
    """Allows the terminal; denies every other sender without telling the model anything."""

    async def check(self, msg: InboundMessage) -> AccessDecision:
        if msg.channel == TERMINAL_CHANNEL:
            return AccessDecision(True)
        log.warning("denied message from unknown sender on %s", msg.channel)
        return AccessDecision(False)
