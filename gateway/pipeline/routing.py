"""Who is this, which workspace, which session, and is it private?

Privacy is decided here once, structurally: a session is private only when it is a direct
message whose sender owns the workspace it routes to. A group routes to the gateway owner's
workspace as a shared context with its own writable area (`memory.layout.group_area`).
Everything downstream (prompt files, tools) asks `Route.access`, and `memory.layout` answers
what that access may read and write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from channels.base import InboundMessage
from gateway.workspace.seed import workspace_path
from memory.layout import Access, dm_session_key, group_area, group_session_key

TERMINAL_CHANNEL = "terminal"


@dataclass(frozen=True, slots=True)
class Route:
    person_id: str  # whose workspace this is
    workspace: Path
    session_key: str
    private: bool
    channel: str
    chat_id: str
    # A group's own writable area inside the owner's workspace ("" for private routes).
    area: str = ""
    # Who sent the message, for the group prompt: name, platform id, and whether that account
    # is the gateway owner (decided here from identity links, never from what they wrote).
    sender_id: str = ""
    sender_name: str = ""
    sender_is_owner: bool = False
    # The platform message this route answers ("" for none): names what a turn sends once.
    message_id: str = ""

    @property
    def access(self) -> Access:
        return Access(self.private, "" if self.private else self.area)

    @property
    def group(self) -> str:
        """The group chat this route serves, by its session key ("" for a DM): what the
        group's own budget counts (gateway/pipeline/budgets.py)."""
        return "" if self.private else self.session_key


def person_id_for(channel: str, sender_id: str, owner: str) -> str:
    """A stable, path-safe person id for a platform account (the terminal is the owner)."""
    if channel == TERMINAL_CHANNEL:
        return owner
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", sender_id).strip("._") or "unknown"
    return f"{channel}-{safe}"


class Identities(Protocol):
    """Identity links: (channel, user id) -> person id, when accounts were joined."""

    async def person_for(self, channel: str, sender_id: str) -> str | None: ...


class Router:
    def __init__(
        self, workspaces_root: Path, owner: str, identities: Identities | None = None
    ) -> None:
        self.workspaces_root = workspaces_root
        self.owner = owner
        self.identities = identities

    async def person_for(self, channel: str, sender_id: str) -> str:
        """The person behind an account: a linked person id, or the account's own id."""
        if self.identities is not None and channel != TERMINAL_CHANNEL:
            linked = await self.identities.person_for(channel, sender_id)
            if linked:
                return linked
        return person_id_for(channel, sender_id, self.owner)

    async def resolve(self, msg: InboundMessage) -> Route:
        sender = await self.person_for(msg.channel, msg.sender_id)
        if msg.chat_type == "direct":
            workspace = workspace_path(self.workspaces_root, sender)
            return Route(
                sender,
                workspace,
                dm_session_key(sender),
                True,
                msg.channel,
                msg.chat_id,
                sender_id=msg.sender_id,
                sender_name=msg.sender_name,
                sender_is_owner=sender == self.owner,
                message_id=msg.message_id,
            )
        # A group talks to the gateway owner's assistant, never with their private memory, and
        # writes only in its own area.
        workspace = workspace_path(self.workspaces_root, self.owner)
        key = group_session_key(msg.channel, msg.chat_id)
        return Route(
            self.owner,
            workspace,
            key,
            False,
            msg.channel,
            msg.chat_id,
            area=group_area(msg.channel, msg.chat_id),
            sender_id=msg.sender_id,
            sender_name=msg.sender_name,
            sender_is_owner=sender == self.owner,
            message_id=msg.message_id,
        )
