"""Pairing codes and wrong approval attempts: the tables behind gateway/pipeline/pairing.py.

`pairing`: one row per code handed to a stranger, with its sender, chat, times, whether it was
re-sent, and its status (`pending`, `approved`, `denied`, `expired`, `superseded`,
`revoked`). `approve_failures`: when an approval named a code that does not exist (the
pipeline refuses approvals after too many). The rules (how many codes, how long, who gives
way) are the pipeline's; this store only keeps the rows. Times are POSIX seconds.
"""

from __future__ import annotations

from typing import Any

from gateway.stores.database import StateDatabase

_REQUEST = (
    "SELECT channel, code, sender_id, chat_id, sender_name, created_at, expires_at FROM pairing"
)


class PairingStore:
    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    async def codes_of(self, channel: str, sender_id: str) -> list[Any]:
        """(code, status, created_at, expires_at, resent) of every code the sender got,
        newest first."""
        return await self.db.rows(
            "SELECT code, status, created_at, expires_at, resent FROM pairing"
            " WHERE channel = ? AND sender_id = ? ORDER BY created_at DESC",
            (channel, sender_id),
        )

    async def mark_resent(self, channel: str, code: str) -> None:
        await self.db.write(
            "UPDATE pairing SET resent = 1 WHERE channel = ? AND code = ?", (channel, code)
        )

    async def add_code(
        self,
        channel: str,
        code: str,
        sender_id: str,
        chat_id: str,
        sender_name: str,
        created_at: float,
        expires_at: float,
    ) -> None:
        await self.db.write(
            "INSERT INTO pairing (channel, code, sender_id, chat_id, sender_name, created_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (channel, code, sender_id, chat_id, sender_name, created_at, expires_at),
        )

    async def expire(self, channel: str, now: float) -> None:
        """Pending codes past their time become `expired`."""
        await self.db.write(
            "UPDATE pairing SET status = 'expired' WHERE channel = ? AND status = 'pending'"
            " AND expires_at <= ?",
            (channel, now),
        )

    async def pending_codes(self, channel: str) -> list[Any]:
        """(code, sender_id) of the channel's pending codes, oldest first."""
        return await self.db.rows(
            "SELECT code, sender_id FROM pairing WHERE channel = ? AND status = 'pending'"
            " ORDER BY created_at, rowid",
            (channel,),
        )

    async def supersede(self, channel: str, code: str) -> None:
        """A pending code gives way to a newer request (an access decision: durable)."""
        await self.db.write(
            "UPDATE pairing SET status = 'superseded' WHERE channel = ? AND code = ?"
            " AND status = 'pending'",
            (channel, code),
            durable=True,
        )

    async def withdraw(self, channel: str, sender_id: str) -> None:
        """The sender's pending codes can no longer be approved (durable)."""
        await self.db.write(
            "UPDATE pairing SET status = 'revoked' WHERE channel = ? AND sender_id = ?"
            " AND status = 'pending'",
            (channel, sender_id),
            durable=True,
        )

    async def requests(self, now: float, channel: str | None = None) -> list[Any]:
        """(channel, code, sender_id, chat_id, sender_name, created_at, expires_at) of the
        codes still pending and valid at `now`, oldest first."""
        sql = _REQUEST + " WHERE status = 'pending' AND expires_at > ?"
        params: tuple[object, ...] = (now,)
        if channel:
            sql += " AND channel = ?"
            params += (channel,)
        return await self.db.rows(sql + " ORDER BY created_at", params)

    async def request(self, channel: str, code: str, now: float) -> Any | None:
        """The pending, valid request with this code, as in `requests`; None if there is none."""
        rows = await self.db.rows(
            _REQUEST + " WHERE channel = ? AND code = ? AND status = 'pending' AND expires_at > ?",
            (channel, code, now),
        )
        return rows[0] if rows else None

    async def decided(self, channel: str, code: str) -> Any | None:
        """(status, sender_id, sender_name) of the code if it was approved or denied."""
        rows = await self.db.rows(
            "SELECT status, sender_id, sender_name FROM pairing WHERE channel = ? AND code = ?"
            " AND status IN ('approved', 'denied')",
            (channel, code),
        )
        return rows[0] if rows else None

    async def approved_names(self) -> list[Any]:
        """(channel, sender_id, sender_name) of every approved request, oldest first: the
        names people gave when they asked (the panel shows them)."""
        return await self.db.rows(
            "SELECT channel, sender_id, sender_name FROM pairing WHERE status = 'approved'"
            " ORDER BY created_at"
        )

    async def set_status(self, channel: str, code: str, status: str) -> None:
        await self.db.write(
            "UPDATE pairing SET status = ? WHERE channel = ? AND code = ?", (status, channel, code)
        )

    async def wrong_attempts(self, channel: str, since: float) -> int:
        [(wrong,)] = await self.db.rows(
            "SELECT COUNT(*) FROM approve_failures WHERE channel = ? AND at > ?", (channel, since)
        )
        return int(wrong)

    async def note_wrong(self, channel: str, at: float) -> None:
        await self.db.write(
            "INSERT INTO approve_failures (channel, at) VALUES (?, ?)", (channel, at)
        )
