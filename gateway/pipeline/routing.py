"""Who is this, which workspace, which session, and is it private?

Privacy is decided here once, structurally: a session is private only when it is a direct
message whose sender owns the workspace it routes to. Everything downstream (prompt files,
tools) asks `Route.private` and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from channels.base import InboundMessage
from gateway.workspace.seed import workspace_path

TERMINAL_CHANNEL = "terminal"


@dataclass(frozen=True, slots=True)
class Route:
    person_id: str  # whose workspace this is
    workspace: Path
    session_key: str
    private: bool
    channel: str
    chat_id: str


def dm_session_key(person_id: str) -> str:
    """The one builder of session keys: a person's direct messages (all their accounts)."""
    return f"{person_id}:dm"


def heartbeat_session_key(person_id: str) -> str:
    """The person's heartbeat runs, isolated from their DM history."""
    return f"{person_id}:heartbeat"


def group_session_key(channel: str, chat_id: str) -> str:
    return f"{channel}:group:{chat_id}"


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
            return Route(sender, workspace, dm_session_key(sender), True, msg.channel,
                         msg.chat_id)
        # A group talks to the gateway owner's assistant, never with their private memory.
        workspace = workspace_path(self.workspaces_root, self.owner)
        key = group_session_key(msg.channel, msg.chat_id)
        return Route(self.owner, workspace, key, False, msg.channel, msg.chat_id)
