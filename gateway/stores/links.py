"""Identity links and last DM routes: who a platform account is, and where to reach a person.

`links`: (channel, user id) -> person id (`clawgate users link`, `pairing approve --owner`);
linked accounts share one workspace and session. `last_dm_route`: where each person last
wrote to us in a direct message, so a heartbeat alert or a reminder goes there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.stores.database import StateDatabase, iso, now_iso


@dataclass(frozen=True, slots=True)
class DmRoute:
    """Where a person last wrote to us in a direct message: deliver proactive messages here."""

    person_id: str
    channel: str
    chat_id: str
    sender_id: str
    at: datetime


class LinkStore:
    """Identity links and last DM routes. Implements gateway.pipeline.routing.Identities."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db
        # Last DM routes written by this process: an unchanged route costs no disk write.
        self._routes: dict[str, tuple[str, str, str]] = {}

    async def person_for(self, channel: str, sender_id: str) -> str | None:
        rows = await self.db.rows(
            "SELECT person_id FROM links WHERE channel = ? AND sender_id = ?", (channel, sender_id)
        )
        return rows[0][0] if rows else None

    async def link(self, channel: str, sender_id: str, person_id: str) -> None:
        await self.db.write(
            "INSERT INTO links (channel, sender_id, person_id, linked_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (channel, sender_id) DO UPDATE SET person_id = excluded.person_id,"
            " linked_at = excluded.linked_at",
            (channel, sender_id, person_id, now_iso()),
            durable=True,
        )

    async def unlink(self, channel: str, sender_id: str) -> bool:
        return (
            await self.db.write(
                "DELETE FROM links WHERE channel = ? AND sender_id = ?", (channel, sender_id)
            )
            > 0
        )

    async def all(self) -> list[tuple[str, str, str]]:
        """(person id, channel, account id) of every link, by person."""
        rows = await self.db.rows(
            "SELECT person_id, channel, sender_id FROM links ORDER BY person_id, channel"
        )
        return [tuple(row) for row in rows]

    async def set_last_dm_route(
        self, person_id: str, channel: str, chat_id: str, sender_id: str, at: datetime
    ) -> None:
        """Remember where the person wrote from; `at` is when the route last changed."""
        if self._routes.get(person_id) == (channel, chat_id, sender_id):
            return
        self._routes[person_id] = (channel, chat_id, sender_id)
        await self.db.write(
            "INSERT INTO last_dm_route (person_id, channel, chat_id, sender_id, at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (person_id) DO UPDATE SET"
            " channel = excluded.channel, chat_id = excluded.chat_id,"
            " sender_id = excluded.sender_id, at = excluded.at",
            (person_id, channel, chat_id, sender_id, iso(at)),
        )

    async def last_dm_route(self, person_id: str) -> DmRoute | None:
        rows = await self.db.rows(
            "SELECT channel, chat_id, sender_id, at FROM last_dm_route WHERE person_id = ?",
            (person_id,),
        )
        if not rows:
            return None
        channel, chat_id, sender_id, at = rows[0]
        return DmRoute(person_id, channel, chat_id, sender_id, datetime.fromisoformat(at))
