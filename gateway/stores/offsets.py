"""Channel offsets: the Telegram update offset (the next update id to ask for).

This is the store a polling channel is given (channels.base.OffsetStore): its offset, and
where an update it could not read is recorded (a `failed` inbox row, by the inbox store).
Bookkeeping: the channel moves the offset only after the inbox recorded the updates before
it, so a lost offset write at worst asks again for updates the inbox already has.
"""

from __future__ import annotations

from gateway.stores.database import StateDatabase
from gateway.stores.inbox import InboxStore


class OffsetStore:
    def __init__(self, db: StateDatabase, inbox: InboxStore) -> None:
        self.db = db
        self.inbox = inbox

    async def load_offset(self, channel: str) -> int | None:
        rows = await self.db.rows("SELECT value FROM offsets WHERE channel = ?", (channel,))
        return int(rows[0][0]) if rows else None

    async def save_offset(self, channel: str, value: int) -> None:
        await self.db.write(
            "INSERT INTO offsets (channel, value) VALUES (?, ?)"
            " ON CONFLICT (channel) DO UPDATE SET value = excluded.value",
            (channel, value),
        )

    async def record_failed(self, channel: str, ref: str, error: str) -> None:
        """An update the channel skipped as unreadable: kept in the inbox for the record."""
        await self.inbox.record_failed(channel, ref, error)
