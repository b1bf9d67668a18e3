"""Live previews: the preview message of a reply being streamed, by the reply's key.

A restart goes on in the preview message an earlier run left (gateway/pipeline/streaming.py),
and the reply replaces it instead of leaving it behind. Bookkeeping: a crash before a record
leaves a preview the reply does not replace; it still ends with the cursor.
"""

from __future__ import annotations

from datetime import datetime

from gateway.stores.database import StateDatabase, iso, now_iso


class PreviewStore:
    """reply key -> the platform message id of its live preview."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    async def record_preview(self, key: str, channel: str, chat_id: str, message_id: str) -> None:
        """The preview message of the reply named `key`."""
        await self.db.write(
            "INSERT OR REPLACE INTO previews (key, channel, chat_id, message_id, at)"
            " VALUES (?, ?, ?, ?, ?)",
            (key, channel, chat_id, message_id, now_iso()),
        )

    async def preview_for(self, key: str) -> str:
        rows = await self.db.rows("SELECT message_id FROM previews WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else ""

    async def forget_preview(self, key: str) -> None:
        await self.db.write("DELETE FROM previews WHERE key = ?", (key,))

    async def prune(self, before: datetime) -> int:
        """Previews of replies long since queued (a kill left the row): at open."""
        return await self.db.write("DELETE FROM previews WHERE at < ?", (iso(before),))
