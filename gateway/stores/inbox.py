"""The inbox: every inbound platform message, recorded before it is acknowledged to the platform.

`inbox` holds each message's key (channel, chat, message id), status, times and chat type:
the key is what makes a redelivery after a restart a no-op, and the pending rows are what a
restart picks up again. The message itself (text, sender name, attachments) sits in
`inbox_body` only while it may still need an answer, and is deleted when the row is marked
done (answered or denied): a stranger's words are kept only while they hold a valid pairing
code (status `waiting`, at most WAITING_TTL, an hour like the code) so that the owner's approval
can answer them. A separate table because shrinking rows in place leaves half-empty pages
(3,000 refused 4 KB messages: 3.4 MB that way, 0.7 MB with bodies apart). Done rows older than
`retention` are pruned, except each chat's newest answered one (Discord catch-up starts from
it). `retries` counts the restarts after which the message's turn was taken up again, so a
message that crashes the process every time is given up after a bounded number of tries
(gateway/pipeline/recovery.py) instead of staying pending forever.

The record of a message is durable (its commit waits for the fsync): "recorded" means on
disk, since only then may the channel acknowledge it. Done marks are bookkeeping (a power loss
at worst repeats an answer, deduplicated by the key). The outbox row of an answer marks its
entry done itself (a trigger, gateway/stores/migrations.py).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from channels.base import Attachment, InboundMessage
from gateway.stores.database import StateDatabase, iso, now_iso

log = logging.getLogger(__name__)

# How long the id of an answered (or denied) message is kept to recognise a redelivery. Platforms
# redeliver within minutes (Telegram: until the offset moves; Discord: catch-up after a restart).
DEFAULT_INBOX_RETENTION = timedelta(days=7)
# Pruning runs after this many done marks (and at open): a DELETE per message would cost more.
PRUNE_EVERY = 500
# How long a stranger's message waits for the owner's approval (a pairing code's lifetime).
WAITING_TTL = timedelta(hours=1)

# What an inbox row keeps of the message: the chat type (catch-up looks for direct chats).
# Rows written before `inbox_body` existed carry the whole message; marking them done trims it.
_ID_ONLY_PAYLOAD = "json_object('chat_type', json_extract(payload, '$.chat_type'))"


def _encode(msg: InboundMessage) -> str:
    return json.dumps(
        {
            "channel": msg.channel,
            "chat_id": msg.chat_id,
            "sender_id": msg.sender_id,
            "text": msg.text,
            "chat_type": msg.chat_type,
            "message_id": msg.message_id,
            "sender_name": msg.sender_name,
            "received_at": iso(msg.received_at),
            "addressed": msg.addressed,
            "attachment": msg.attachment,
            "attachments": [_attachment_fields(a) for a in msg.attachments],
        }
    )


def _attachment_fields(attachment: Attachment) -> dict[str, Any]:
    return {name: getattr(attachment, name) for name in Attachment.__dataclass_fields__}


def _decode(payload: str) -> InboundMessage:
    data: dict[str, Any] = json.loads(payload)
    data["received_at"] = datetime.fromisoformat(data["received_at"])
    known = Attachment.__dataclass_fields__
    data["attachments"] = tuple(
        Attachment(**{k: v for k, v in item.items() if k in known})
        for item in data.get("attachments") or ()
        if isinstance(item, dict)
    )
    return InboundMessage(**data)


class InboxStore:
    """Durable inbound messages: record, dedupe, what is pending or waiting, done marks."""

    def __init__(self, db: StateDatabase, retention: timedelta = DEFAULT_INBOX_RETENTION) -> None:
        self.db = db
        self.retention = retention
        self._done_marks = 0

    async def record_inbound(self, msg: InboundMessage) -> bool:
        """Record a message durably. False if this (channel, chat, message id) was seen before."""
        key = (msg.channel, msg.chat_id, msg.message_id)
        row = (*key, json.dumps({"chat_type": msg.chat_type}), iso(msg.received_at))
        body = (*key, _encode(msg))

        def record(db: sqlite3.Connection) -> bool:  # the key and body, or neither
            added = (
                db.execute(
                    "INSERT OR IGNORE INTO inbox"
                    " (channel, chat_id, message_id, payload, received_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    row,
                ).rowcount
                == 1
            )
            if added:
                db.execute(
                    "INSERT OR REPLACE INTO inbox_body (channel, chat_id, message_id, payload)"
                    " VALUES (?, ?, ?, ?)",
                    body,
                )
            return added

        return await self.db.commit(record, durable=True)

    async def mark_done(self, msg: InboundMessage, status: str = "done") -> None:
        """Answered (or denied): the body is no longer needed, only the key (dedup).

        `waiting` (the sender holds a pairing code) keeps the body, to answer it if the owner
        approves them within WAITING_TTL (gateway/pipeline/welcome.py).
        """
        key = (msg.channel, msg.chat_id, msg.message_id)
        if status == "waiting":
            await self.db.write(
                "UPDATE inbox SET status = 'waiting' WHERE channel = ? AND chat_id = ?"
                " AND message_id = ?",
                key,
            )
            return
        done_at = now_iso()

        def mark(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE inbox SET status = ?, done_at = ?, payload = "
                + _ID_ONLY_PAYLOAD
                + " WHERE channel = ? AND chat_id = ? AND message_id = ?",
                (status, done_at, *key),
            )
            db.execute(
                "DELETE FROM inbox_body WHERE channel = ? AND chat_id = ? AND message_id = ?", key
            )

        await self.db.commit(mark)
        self._done_marks += 1
        if self._done_marks % PRUNE_EVERY == 0:
            await self.prune_inbox()

    async def prune_inbox(self, now: datetime | None = None) -> int:
        """Forget done rows received before the retention window, except each chat's newest
        answered one (a channel's catch-up starts from it). Returns the rows removed."""
        now = now or datetime.now(UTC)
        cutoff = iso(now - self.retention)
        await self.db.write(  # nobody approved them in time: the stranger's words go
            "UPDATE inbox SET status = 'expired', payload = "
            + _ID_ONLY_PAYLOAD
            + " WHERE status = 'waiting' AND received_at < ?",
            (iso(now - WAITING_TTL),),
        )
        await self.db.write(  # bodies of rows no longer pending or waiting
            "DELETE FROM inbox_body WHERE NOT EXISTS (SELECT 1 FROM inbox AS i WHERE"
            " i.status IN ('pending', 'waiting') AND i.channel = inbox_body.channel AND"
            " i.chat_id = inbox_body.chat_id AND i.message_id = inbox_body.message_id)"
        )
        return await self.db.write(
            "DELETE FROM inbox WHERE status != 'pending' AND received_at < ? AND rowid NOT IN"
            " (SELECT MAX(rowid) FROM inbox WHERE status = 'done' GROUP BY channel, chat_id)",
            (cutoff,),
        )

    async def pending_inbound(self) -> list[InboundMessage]:
        """Recorded but not yet answered, oldest first (what a restart must still process)."""
        rows = await self.db.rows(
            "SELECT COALESCE(b.payload, i.payload) FROM inbox AS i LEFT JOIN inbox_body AS b"
            " USING (channel, chat_id, message_id) WHERE i.status = 'pending'"
            " ORDER BY i.received_at, i.rowid"
        )
        pending = []
        for (payload,) in rows:
            try:
                pending.append(_decode(payload))
            except (ValueError, TypeError, KeyError):  # a row without its body: cannot answer
                log.error("inbox: a pending message has no body; skipped")
        return pending

    async def note_retry(self, msg: InboundMessage, step: int = 1) -> int:
        """Add `step` to a message's retry count (gateway/pipeline/recovery.py says when);
        returns the new count (the bound on a message that stops the gateway)."""
        rows = await self.db.write_returning(
            "UPDATE inbox SET retries = retries + ? WHERE channel = ? AND chat_id = ?"
            " AND message_id = ? RETURNING retries",
            (step, msg.channel, msg.chat_id, msg.message_id),
        )
        return int(rows[0][0]) if rows else 0

    async def last_message_ids(self, channel: str) -> dict[str, str]:
        """The newest recorded message id of each direct chat on `channel`.

        Platforms that do not replay what was sent while we were down (Discord) catch up from
        here; ids are numeric there (snowflakes), so the newest is the largest.
        """
        rows = await self.db.rows(
            "SELECT chat_id, message_id FROM inbox WHERE channel = ?"
            " AND json_extract(payload, '$.chat_type') = 'direct'",
            (channel,),
        )
        latest: dict[str, str] = {}
        for chat_id, message_id in rows:
            if str(message_id).isdigit() and int(message_id) > int(latest.get(chat_id, "0")):
                latest[chat_id] = str(message_id)
        return latest

    async def waiting_inbound(self, channel: str, sender_id: str) -> list[InboundMessage]:
        """Direct messages of `sender_id` kept while they waited for approval, oldest first."""
        rows = await self.db.rows(
            "SELECT b.payload FROM inbox AS i JOIN inbox_body AS b"
            " USING (channel, chat_id, message_id) WHERE i.channel = ? AND i.status = 'waiting'"
            " AND json_extract(b.payload, '$.sender_id') = ? ORDER BY i.received_at, i.rowid",
            (channel, sender_id),
        )
        return [_decode(row[0]) for row in rows]

    async def requeue(self, msg: InboundMessage) -> None:
        """Make a recorded message pending again (answered now, or after the next start)."""
        await self.db.write(
            "UPDATE inbox SET status = 'pending', done_at = NULL WHERE channel = ?"
            " AND chat_id = ? AND message_id = ?",
            (msg.channel, msg.chat_id, msg.message_id),
            durable=True,
        )

    async def settle_waiting(self, channel: str, sender_id: str, status: str) -> int:
        """Close the sender's waiting messages as `status` (e.g. 'denied'): bodies dropped."""
        waiting = await self.waiting_inbound(channel, sender_id)
        for msg in waiting:
            await self.mark_done(msg, status)
        return len(waiting)

    async def record_failed(self, channel: str, ref: str, error: str) -> None:
        """An update a channel skipped as unreadable: kept (without a body) for the record."""
        payload = json.dumps({"error": error})
        await self.db.write(
            "INSERT OR IGNORE INTO inbox (channel, chat_id, message_id, payload, status,"
            " received_at, done_at) VALUES (?, '', ?, ?, 'failed', ?, ?)",
            (channel, ref, payload, now_iso(), now_iso()),
        )
