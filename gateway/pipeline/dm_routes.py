"""Where a person can be reached outside a conversation: their last direct-message route.

Heartbeat alerts, reminders and the owner's budget notes are sent to the chat where the
person last wrote to us in a DM. The state database records that route (platforms only); the
channels this process runs decide whether it can be used now. While a terminal chat runs,
it is the owner's DM unless they wrote from a platform channel that is running too (so
heartbeat alerts appear in `clawgate chat`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from channels.base import Channel
from channels.terminal import LOCAL_CHAT as TERMINAL_CHAT
from gateway.clock import Clock
from gateway.pipeline.routing import TERMINAL_CHANNEL
from gateway.stores.links import DmRoute
from gateway.stores.state import StateDB

if TYPE_CHECKING:
    from gateway.pipeline.delivery import Delivery

log = logging.getLogger(__name__)


class DmRoutes:
    """The last DM route of each person, on the channels of this process."""

    def __init__(
        self,
        state: StateDB,
        channels: Mapping[str, Channel],
        delivery: Delivery,
        *,
        owner: str,
        clock: Clock,
    ) -> None:
        self.state, self.channels, self.delivery = state, channels, delivery
        self.owner, self.clock = owner, clock

    def runs_channel(self, name: str) -> bool:
        return name in self.channels

    def channel_names(self) -> frozenset[str]:
        return frozenset(self.channels)

    async def last_dm_route(self, person_id: str) -> DmRoute | None:
        """Where `person_id` last wrote to us in a DM (channel and chat), for proactive sends;
        the terminal chat for its owner when no running platform channel has a route."""
        route = await self.state.links.last_dm_route(person_id)
        if (
            (route is None or route.channel not in self.channels)
            and TERMINAL_CHANNEL in self.channels
            and person_id == self.owner
        ):
            return DmRoute(
                person_id, TERMINAL_CHANNEL, TERMINAL_CHAT, TERMINAL_CHAT, self.clock.now()
            )
        return route

    async def note_to_owner(self, text: str, key: str) -> None:
        """A note for the owner (the budgets' notes), sent once per `key` to their DM."""
        route = await self.last_dm_route(self.owner)
        if route is None or route.channel not in self.channels:
            log.warning("note for the owner not sent: they have no DM route yet")
            return
        await self.delivery.deliver(route.channel, route.chat_id, text, key=key)
