"""Access: who was approved to talk, and the approvals the running gateway has yet to announce.

`approved` is what gateway/pipeline/pairing.py's access check reads for every direct message
of a sender not on an allowlist. `welcomes` holds approvals made by `clawgate pairing approve`
in another process: the gateway welcomes the person and answers the messages they sent while
waiting (gateway/pipeline/welcome.py). Both are access decisions, so they are durable.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.stores.database import StateDatabase, now_iso


@dataclass(frozen=True, slots=True)
class Welcome:
    """An approval to announce: who, where to write, which person they are now."""

    channel: str
    sender_id: str
    chat_id: str
    person_id: str
    as_owner: bool
    approved_at: str


class AccessStore:
    """Approved senders and the welcomes owed to them."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        rows = await self.db.rows(
            "SELECT 1 FROM approved WHERE channel = ? AND sender_id = ?", (channel, sender_id)
        )
        return bool(rows)

    async def approve(self, channel: str, sender_id: str, via: str) -> None:
        await self.db.write(
            "INSERT OR IGNORE INTO approved (channel, sender_id, approved_at, via)"
            " VALUES (?, ?, ?, ?)",
            (channel, sender_id, now_iso(), via),
            durable=True,
        )

    async def approved(self) -> list[tuple[str, str, str, str]]:
        rows = await self.db.rows(
            "SELECT channel, sender_id, approved_at, via FROM approved ORDER BY approved_at"
        )
        return [tuple(row) for row in rows]

    async def revoke(self, channel: str, sender_id: str) -> bool:
        return (
            await self.db.write(
                "DELETE FROM approved WHERE channel = ? AND sender_id = ?", (channel, sender_id)
            )
            > 0
        )

    async def queue_welcome(
        self, channel: str, sender_id: str, chat_id: str, person_id: str, *, as_owner: bool
    ) -> None:
        await self.db.write(
            "INSERT INTO welcomes (channel, sender_id, chat_id, person_id, as_owner,"
            " approved_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, sender_id) DO UPDATE"
            " SET chat_id = excluded.chat_id, person_id = excluded.person_id,"
            " as_owner = excluded.as_owner, approved_at = excluded.approved_at, done_at = NULL",
            (channel, sender_id, chat_id, person_id, int(as_owner), now_iso()),
            durable=True,
        )

    async def pending_welcomes(self) -> list[Welcome]:
        rows = await self.db.rows(
            "SELECT channel, sender_id, chat_id, person_id, as_owner, approved_at FROM welcomes"
            " WHERE done_at IS NULL ORDER BY approved_at"
        )
        return [
            Welcome(str(c), str(s), str(chat), str(p), bool(o), str(at))
            for c, s, chat, p, o, at in rows
        ]

    async def mark_welcomed(self, welcome: Welcome) -> None:
        await self.db.write(
            "UPDATE welcomes SET done_at = ? WHERE channel = ? AND sender_id = ?"
            " AND approved_at = ?",
            (now_iso(), welcome.channel, welcome.sender_id, welcome.approved_at),
        )
