"""The outbox: every outbound message, from the moment it is decided until the platform took it.

A row is `pending` until the platform accepted it, then `sent` (its text cleared), or
`refused` / `failed` (gateway/pipeline/delivery.py decides which). An optional unique `key`
makes a delivery idempotent. Pending rows are what a restart sends again, from `parts_sent`
on: the parts of a long reply the platform accepted are not sent twice. A row with a `file`
sends that workspace file (the text is its caption); `replaces` names the live preview message
its first part is written into.

Adding the reply that answers an inbox entry marks that entry done in the same statement (a
trigger): one atomic write, so a crash can repeat a send but never a turn. The marks after a
platform accepted a send (`mark_sent`, `note_parts`) are urgent: committed at once, never
queued behind bookkeeping (until they commit, a crash sends the message again).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from channels.base import InboundMessage
from gateway.stores.database import StateDatabase, now_iso


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One outbound message; `row` is its outbox id (None on a channel that is not durable).

    `parts_sent`: how many of its parts (a long reply is cut into several platform messages)
    the platform accepted already; a retry, also after a restart, sends only the rest.
    """

    row: int | None
    channel: str
    chat_id: str
    text: str
    attempts: int = 0
    parts_sent: int = 0
    replaces: str = ""  # the live preview message the first part is written into
    file: str = ""  # a file to send, with `text` as its caption


class OutboxStore:
    """Outbound messages and their progress (attempts, parts sent, final status)."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    async def enqueue_outbound(
        self,
        channel: str,
        chat_id: str,
        text: str,
        *,
        key: str | None = None,
        done: InboundMessage | None = None,
        done_status: str = "done",
        replaces: str = "",
        file: str = "",
        together: Callable[[sqlite3.Connection], object] | None = None,
    ) -> int | None:
        """Add a message to the outbox and mark `done` answered, in one statement (trigger).

        Returns the row id, or None when `key` was used before (nothing added, nothing marked:
        the earlier delivery did both). `replaces`: the preview message it is written into.
        `together`: more statements committed in the same transaction as the row (a task's
        final state with its report, gateway/stores/tasks.py); run whether or not the key
        was used before, so it must be conditional on its own.
        """
        params = (
            key,
            channel,
            chat_id,
            text,
            now_iso(),
            *(
                (done.channel, done.chat_id, done.message_id, done_status)
                if done is not None
                else (None, None, None, None)
            ),
            replaces,
            file,
        )

        def enqueue(db: sqlite3.Connection) -> int | None:
            cursor = db.execute(
                "INSERT OR IGNORE INTO outbox (key, channel, chat_id, text, created_at,"
                " done_channel, done_chat, done_message, done_status, replaces, file)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params,
            )
            row = cursor.lastrowid if cursor.rowcount == 1 else None
            if together is not None:
                together(db)
            return row

        return await self.db.commit(enqueue, durable=together is not None)

    async def commit_alone(self, write: Callable[[sqlite3.Connection], object]) -> None:
        """`together`'s statements for a message that gets no outbox row (a channel that keeps
        none, the terminal): committed durably on their own."""
        await self.db.commit(write, durable=True)

    async def note_attempt(self, row: int, error: str) -> None:
        await self.db.write(
            "UPDATE outbox SET attempts = attempts + 1, error = ? WHERE id = ?", (error, row)
        )

    async def note_parts(self, row: int, parts_sent: int) -> None:
        """The platform accepted the first `parts_sent` parts of a multi-part message.

        Urgent, like `mark_sent`: until it commits, a crash sends those parts again."""
        await self.db.write(
            "UPDATE outbox SET parts_sent = ? WHERE id = ?", (parts_sent, row), urgent=True
        )

    async def finish_outbound(self, row: int, status: str, error: str = "") -> None:
        """`sent`, `refused` or `failed`; the text is not kept once the row is finished."""
        await self.db.write(
            "UPDATE outbox SET status = ?, error = ?, text = '', finished_at = ? WHERE id = ?",
            (status, error, now_iso(), row),
        )

    async def mark_sent(self, *rows: int) -> None:
        """Rows the platform accepted (the text is not kept).

        Urgent: not queued behind bookkeeping (usage, previews) in the writer, because until
        it commits a crash makes the restart send the message again. No fsync of its own: a
        kill of the process keeps it as soon as it returns, and a power loss before the next
        durable commit (which carries it to disk, WAL order) repeats a reply, never loses one.
        """
        if not rows:
            return
        marks = ",".join("?" * len(rows))
        await self.db.write(
            f"UPDATE outbox SET status = 'sent', text = '', finished_at = ? WHERE id IN ({marks})",
            (now_iso(), *rows),
            urgent=True,
        )

    async def pending_outbound(self) -> list[Outgoing]:
        rows = await self.db.rows(
            "SELECT id, channel, chat_id, text, attempts, parts_sent, replaces, file FROM outbox"
            " WHERE status = 'pending' ORDER BY id"
        )
        return [
            Outgoing(
                int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]), str(r[6] or ""), str(r[7] or "")
            )
            for r in rows
        ]
