"""Which kind of conversation a turn is, as far as skills and tool servers are concerned.

The route already decided privacy (gateway/pipeline/routing.py); this adds whose it is, because
a tool server configured by the gateway's owner (their calendar, their mail) must not reach
another person's DM even though that DM is private to that person.
"""

from __future__ import annotations

from typing import Literal

ContextKind = Literal["owner_dm", "heartbeat", "people", "group"]


def context_kind(
    *, private: bool, person_id: str, owner: str, heartbeat: bool = False
) -> ContextKind:
    """`owner_dm`/`heartbeat` for the owner, `people` for anyone else's own chats, else `group`."""
    if not private:
        return "group"
    if person_id != owner:
        return "people"
    return "heartbeat" if heartbeat else "owner_dm"
