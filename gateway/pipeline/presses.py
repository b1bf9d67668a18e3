"""Button presses and the typed answers that stand in for them: the pipeline's side.

A channel with buttons hands a press to the gateway as an `InboundMessage` with `press` set
(channels/base.py). The gateway does not record it as a message, route it to a session or
show it to a model: it gives it to the parts' `presses` (the exec approvals,
gateway/features/exec/desk.py, wired at construction through `PressWiring`), at once, outside
every lane, since the
turn that asked may be waiting for exactly this. `/approve` and `/deny` (`ANSWERS`) are the
same answers typed, for channels without buttons; they too are answered at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from channels.base import Channel, InboundMessage

if TYPE_CHECKING:
    from gateway.agent.tools import Tool
    from gateway.ops.versioning import Versioning
    from gateway.pipeline.delivery import Delivery
    from gateway.pipeline.dm_routes import DmRoutes
    from gateway.pipeline.routing import Router

__all__ = ["ANSWERS", "PressPorts", "PressWiring", "Presses"]

ANSWERS = frozenset({"approve", "deny"})


class Presses(Protocol):
    async def settled(self) -> None:
        """Until what the feature's tools need at start is known (the exec sandbox's probe,
        which otherwise runs beside the first poll)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def pressed(self, msg: InboundMessage) -> None: ...

    async def typed(self, channel: str, sender_id: str, name: str, args: str) -> str: ...


@dataclass(frozen=True, slots=True)
class PressWiring:
    """What a feature that asks with buttons gives the parts (gateway/assembly/exec.py): its
    tools for private contexts, who each is offered to, and who takes the presses."""

    presses: Presses
    tools: Sequence[Tool] = ()
    offered: Mapping[str, Callable[[str], bool]] = field(default_factory=dict)


class PressPorts:
    """What the approvals need of the message path (features/exec/desk.py's `DeskHost`), made
    of the parts before the turn setup exists: that is what lets the exec tool be one of the
    private tools at construction instead of being added to a built gateway."""

    def __init__(
        self,
        router: Router,
        channels: Mapping[str, Channel],
        delivery: Delivery,
        routes: DmRoutes,
        versioning: Versioning,
        *,
        owner: str,
    ) -> None:
        self.router, self.channels, self.delivery = router, channels, delivery
        self.routes, self.versioning, self.owner = routes, versioning, owner

    async def person_for(self, channel: str, sender_id: str) -> str:
        """The person behind an account (identity links; the terminal is the owner)."""
        return await self.router.person_for(channel, sender_id)

    def channel(self, name: str) -> Channel | None:
        return self.channels.get(name)

    async def deliver(
        self, channel: str, chat_id: str, text: str, *, key: str | None = None
    ) -> object:
        """Through the outbox (gateway/pipeline/delivery.py)."""
        return await self.delivery.deliver(channel, chat_id, text, key=key)

    async def owner_dm(self) -> tuple[str, str] | None:
        """The owner's DM to ask in: (channel, chat id), or None before they ever wrote."""
        route = await self.routes.last_dm_route(self.owner)
        if route is None or route.channel not in self.channels:
            return None
        return route.channel, route.chat_id

    async def commit(
        self, workspace: Path, reason: str, *, session: str = "", note: str = ""
    ) -> str | None:
        return await self.versioning.commit(workspace, reason, session=session, note=note)
