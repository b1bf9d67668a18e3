"""Joining accounts into one person: the logic shared by `clawgate users link` and the panel.

A link says "telegram:123 and discord:456 are the same person"; it also approves each account
(the owner vouched for it), so linking a stranger's account is as deliberate as approving them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gateway.pipeline.routing import person_id_for
from gateway.stores.state import StateDB
from gateway.workspace.seed import WorkspaceError, workspace_path

# The platforms an account (and so a link) can be on; the assembly builds a channel for each.
PLATFORMS = ("telegram", "discord")


class LinkError(ValueError):
    """Accounts that cannot be linked as given; `str()` is the line to show."""


@dataclass(frozen=True, slots=True)
class LinkResult:
    person: str
    accounts: tuple[tuple[str, str], ...]
    workspace: Path


def parse_account(text: str) -> tuple[str, str]:
    """`channel:user_id` -> (channel, user_id), or LinkError."""
    channel, sep, user_id = text.strip().partition(":")
    if not sep or channel not in PLATFORMS or not user_id.strip():
        raise LinkError(f"{text!r} is not CHANNEL:USER_ID (channels: {', '.join(PLATFORMS)})")
    return channel, user_id.strip()


async def link_accounts(state: StateDB, root: Path, owner: str, items: list[str]) -> LinkResult:
    """Link `items`: accounts (`channel:id`), optionally led by a bare person id.

    Without a person id the accounts join whichever person one of them already belongs to
    (keeping that workspace), else the first account's own person.
    """
    items = [item.strip() for item in items if item.strip()]
    person: str | None = None
    if items and ":" not in items[0]:
        person = items.pop(0)
        try:
            workspace_path(root, person)  # validates the id
        except WorkspaceError as exc:
            raise LinkError(str(exc)) from exc
    accounts = [parse_account(item) for item in items]
    if not accounts or (person is None and len(accounts) < 2):
        raise LinkError("give two accounts (telegram:ID discord:ID), or a person id and an account")
    if person is None:
        for channel, user_id in accounts:
            person = await state.links.person_for(channel, user_id)
            if person:
                break
        person = person or person_id_for(accounts[0][0], accounts[0][1], owner)
    for channel, user_id in accounts:
        await state.links.link(channel, user_id, person)
        await state.access.approve(channel, user_id, via="link")
        waiting = await state.inbox.waiting_inbound(channel, user_id)
        if waiting:  # they wrote while unknown: the gateway greets them and answers it
            await state.access.queue_welcome(
                channel, user_id, waiting[0].chat_id, person, as_owner=person == owner
            )
    return LinkResult(person, tuple(accounts), workspace_path(root, person))
