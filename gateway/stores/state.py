"""The gateway state database: what the gateway must remember that is not a workspace file.

One SQLite file in WAL mode at `<workspaces_root>/.gateway/state.db`, shared by the running
gateway and the `clawgate pairing` / `clawgate users` commands (another process: WAL plus a
busy timeout lets both write). It holds:

- `inbox`: every inbound platform message, recorded before it is acknowledged to the platform
  and marked done once answered. Its key (channel, chat, message id) is what makes a redelivery
  after a restart a no-op, and its pending rows are what a restart picks up again. The row
  itself holds only the key, status, times and chat type; the message (text, sender name,
  attachment) sits in `inbox_body` only while it may still need an answer and is deleted when
  the row is marked done (answered or denied), so a stranger's words are not kept: only while
  they hold a valid pairing code (status `waiting`, at most WAITING_TTL, an hour like the
  code) so that the owner's approval can answer them; then they are dropped. A separate
  table because shrinking rows in place leaves half-empty pages (3,000 refused 4 KB messages:
  3.4 MB that way, 0.7 MB with bodies apart). Done rows older than `inbox_retention` are
  pruned, except each chat's newest answered one (Discord catch-up starts from it).
  `retries` counts the restarts after which the message's turn was taken up again, so a
  message that crashes the process every time is given up after a bounded number of tries
  (gateway/pipeline/recovery.py) instead of staying pending forever.
- `offsets`: the Telegram update offset (the next update id to ask for).
- `approved`, `pairing`, `approve_failures`: access control (see gateway/pipeline/pairing.py).
- `welcomes`: approvals the running gateway has not announced yet (written by `clawgate
  pairing approve` in another process; the gateway welcomes the person and answers the
  messages they sent while waiting, which the inbox kept with status `waiting`).
- `links`: identity links, (channel, user id) -> person id.
- `last_dm_route`: where each person last wrote to us in a DM (heartbeat delivery).
- `outbox`: every outbound message (gateway/pipeline/delivery.py): pending until the platform
  accepted it, then `sent` (its text cleared), or `refused` / `failed`. An optional unique
  `key` makes a delivery idempotent. Pending rows are what a restart sends again, from
  `parts_sent` on: the parts of a long reply the platform accepted are not sent twice. A row
  with a `file` sends that workspace file (the text is its caption).

Writes that gate an acknowledgement to a platform (the inbox record) and access decisions
are durable: their commit waits for the fsync (`synchronous=FULL`), so "recorded" means on
disk, not in a page cache; bookkeeping (offsets, done marks, routes, outbox) commits with
`NORMAL`, which in WAL mode survives a crash of the process and at worst repeats work after a
power loss (a redelivered update is deduplicated by the inbox). The outbox marks after a
platform accepted a send (`mark_sent`, `note_parts`) are urgent: they commit at once, never
queued behind other writes, since until then a crash repeats the send. Every write goes through one
writer, gateway/stores/group_commit.py: the writes that arrive together share one transaction
and one fsync, and no write waits out a busy timeout behind another connection's lock.
Reads use a second connection (read-only), beside the writer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from channels.base import Attachment, InboundMessage
from gateway.stores.group_commit import GroupCommitter, Write
from memory.atomic import create_private_file, make_private_dirs

log = logging.getLogger(__name__)
T = TypeVar("T")

STATE_DIR = ".gateway"
STATE_FILE = "state.db"
# How long the id of an answered (or denied) message is kept to recognise a redelivery. Platforms
# redeliver within minutes (Telegram: until the offset moves; Discord: catch-up after a restart).
DEFAULT_INBOX_RETENTION = timedelta(days=7)
# Pruning runs after this many done marks (and at open): a DELETE per message would cost more.
PRUNE_EVERY = 500
# How long a stranger's message waits for the owner's approval (a pairing code's lifetime).
WAITING_TTL = timedelta(hours=1)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    received_at TEXT NOT NULL, done_at TEXT, retries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, chat_id, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_pending ON inbox (status, received_at);
CREATE TABLE IF NOT EXISTS inbox_body (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, PRIMARY KEY (channel, chat_id, message_id)
);
CREATE TABLE IF NOT EXISTS offsets (channel TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS approved (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, approved_at TEXT NOT NULL, via TEXT NOT NULL,
    PRIMARY KEY (channel, sender_id)
);
CREATE TABLE IF NOT EXISTS pairing (
    channel TEXT NOT NULL, code TEXT NOT NULL, sender_id TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_name TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,
    resent INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'pending',
    PRIMARY KEY (channel, code)
);
CREATE INDEX IF NOT EXISTS pairing_sender ON pairing (channel, sender_id);
CREATE TABLE IF NOT EXISTS approve_failures (channel TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS welcomes (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, chat_id TEXT NOT NULL,
    person_id TEXT NOT NULL, as_owner INTEGER NOT NULL, approved_at TEXT NOT NULL,
    done_at TEXT, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE IF NOT EXISTS links (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, person_id TEXT NOT NULL,
    linked_at TEXT NOT NULL, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE IF NOT EXISTS last_dm_route (
    person_id TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_id TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT UNIQUE, channel TEXT NOT NULL,
    chat_id TEXT NOT NULL, text TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL, finished_at TEXT,
    done_channel TEXT, done_chat TEXT, done_message TEXT, done_status TEXT,
    parts_sent INTEGER NOT NULL DEFAULT 0,
    file TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (status, id);
-- A reply's live preview message (gateway/pipeline/streaming.py), by the reply's key: a
-- restart goes on in it, and the reply replaces it, instead of leaving it behind.
CREATE TABLE IF NOT EXISTS previews (
    key TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL, at TEXT NOT NULL
);
-- The inbox entry a reply answers is marked done by the same statement that adds the reply
-- to the outbox: one atomic write, so a crash can repeat a send but never a turn.
CREATE TRIGGER IF NOT EXISTS outbox_marks_done AFTER INSERT ON outbox
WHEN NEW.done_message IS NOT NULL BEGIN
    UPDATE inbox SET status = NEW.done_status, done_at = NEW.created_at,
        payload = CASE WHEN NEW.done_status = 'waiting' THEN payload
                  ELSE json_object('chat_type', json_extract(payload, '$.chat_type')) END
    WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message;
    -- The body is needed only while the message may still be answered (`waiting`: the
    -- sender holds a pairing code and may be approved).
    DELETE FROM inbox_body WHERE channel = NEW.done_channel AND chat_id = NEW.done_chat
    AND message_id = NEW.done_message AND NEW.done_status != 'waiting';
END;
"""


# Columns added after the first release: (table, column, definition), added at open when missing.
_ADDED_COLUMNS = (
    ("inbox", "retries", "INTEGER NOT NULL DEFAULT 0"),
    ("outbox", "parts_sent", "INTEGER NOT NULL DEFAULT 0"),
    ("outbox", "replaces", "TEXT NOT NULL DEFAULT ''"),
    ("outbox", "file", "TEXT NOT NULL DEFAULT ''"),
)


# What an inbox row keeps of the message: the chat type (catch-up looks for direct chats).
# Rows written before `inbox_body` existed carry the whole message; marking them done trims it.
_ID_ONLY_PAYLOAD = "json_object('chat_type', json_extract(payload, '$.chat_type'))"


@dataclass(frozen=True, slots=True)
class DmRoute:
    """Where a person last wrote to us in a direct message: deliver proactive messages here."""

    person_id: str
    channel: str
    chat_id: str
    sender_id: str
    at: datetime


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


@dataclass(frozen=True, slots=True)
class Welcome:
    """An approval to announce: who, where to write, which person they are now."""

    channel: str
    sender_id: str
    chat_id: str
    person_id: str
    as_owner: bool
    approved_at: str


def state_path(workspaces_root: Path) -> Path:
    return workspaces_root / STATE_DIR / STATE_FILE


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _encode(msg: InboundMessage) -> str:
    return json.dumps(
        {
            "channel": msg.channel, "chat_id": msg.chat_id, "sender_id": msg.sender_id,
            "text": msg.text, "chat_type": msg.chat_type, "message_id": msg.message_id,
            "sender_name": msg.sender_name, "received_at": _iso(msg.received_at),
            "addressed": msg.addressed, "attachment": msg.attachment,
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
        for item in data.get("attachments") or () if isinstance(item, dict)
    )
    return InboundMessage(**data)


class StateError(Exception):
    """The state database cannot be opened; `str()` is one line saying what to do."""


# How long a write waits for another process's lock (`clawgate pairing approve`).
BUSY_TIMEOUT_SECONDS = 10.0


def _writer_connection(path: Path) -> sqlite3.Connection:
    """The writer's connection (gateway/stores/group_commit.py), opened in its thread."""
    # Autocommit mode: the committer begins and ends each transaction itself.
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None,
                         check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # A dropped message body is overwritten on disk, not left in a free block of the page.
        db.execute("PRAGMA secure_delete=ON")
    except BaseException:
        db.close()
        raise
    return db


async def _connect(path: Path) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
        await db.execute("PRAGMA secure_delete=ON")
    except BaseException:
        # aiosqlite's worker thread is not a daemon: an unclosed connection keeps the process
        # alive after the error (the start-up hang on a corrupt file).
        await db.close()
        raise
    return db


class StateDB:
    """Async access to the state database. `open()` before use, `close()` at the end."""

    def __init__(
        self, path: Path, *, inbox_retention: timedelta = DEFAULT_INBOX_RETENTION
    ) -> None:
        self.path = path
        self.inbox_retention = inbox_retention
        self._done_marks = 0
        self._db: aiosqlite.Connection | None = None  # reads
        self.writer = GroupCommitter(lambda: _writer_connection(path), "state")
        # Last DM routes written by this process: an unchanged route costs no disk write.
        self._routes: dict[str, tuple[str, str, str]] = {}

    @classmethod
    def for_root(
        cls, workspaces_root: Path, *, inbox_retention: timedelta = DEFAULT_INBOX_RETENTION
    ) -> StateDB:
        return cls(state_path(workspaces_root), inbox_retention=inbox_retention)

    @property
    def is_open(self) -> bool:
        return self._db is not None

    async def open(self) -> StateDB:
        """Open (creating if needed) and check the database. Raises `StateError` with one line
        to show, having closed whatever it opened (no thread is left running)."""
        if self._db is not None:
            return self
        try:
            make_private_dirs(self.path.parent)
            create_private_file(self.path)  # 0600; SQLite gives -wal and -shm the same mode
            self._db = await _connect(self.path)
            async with self._db.execute("PRAGMA quick_check") as cursor:
                problems = [row[0] for row in await cursor.fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError(f"integrity check failed: {problems[0]}")
            await self._db.executescript(_SCHEMA)
            await self._add_columns(self._db)
            await self._db.commit()
            # From here on this connection only reads: every write goes through the writer.
            await self._db.execute("PRAGMA query_only=ON")
            await self.writer.open()
            await self.prune_inbox()
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StateError(
                f"cannot open the state database {self.path}: {exc}. Restore it from a backup "
                f"(clawgate restore ARCHIVE --force), or move it aside to start with an empty one "
                f"(approvals, links and unanswered messages are then lost)"
            ) from None
        except BaseException:
            await self.close()
            raise
        return self

    @staticmethod
    async def _add_columns(db: aiosqlite.Connection) -> None:
        """Bring a database written by an older version up to the current columns."""
        for table, column, definition in _ADDED_COLUMNS:
            async with db.execute(f"PRAGMA table_info({table})") as cursor:
                present = {row[1] for row in await cursor.fetchall()}
            if column not in present:
                await db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    async def close(self) -> None:
        connection, self._db = self._db, None
        with contextlib.suppress(sqlite3.Error):
            await self.writer.close()
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                await connection.close()

    async def __aenter__(self) -> StateDB:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("state database is not open")
        return self._db

    async def _write(
        self, sql: str, params: tuple[Any, ...] = (), *, durable: bool = False,
        urgent: bool = False,
    ) -> int:
        """One statement, committed when this returns (on disk when `durable`; `urgent`: not
        queued behind other writes, group_commit.py)."""
        return await self._commit(lambda db: db.execute(sql, params).rowcount,
                                  durable=durable, urgent=urgent)

    async def _commit(self, write: Write[T], *, durable: bool = False,
                      urgent: bool = False) -> T:
        """Statements committed together or not at all, when this returns (group_commit.py)."""
        if self._db is None:
            raise RuntimeError("state database is not open")
        return await self.writer.run(write, durable=durable, urgent=urgent)

    async def _write_returning(
        self, sql: str, params: tuple[Any, ...] = ()
    ) -> list[Any]:
        """One statement with a RETURNING clause, committed when this returns."""
        return await self._commit(lambda db: db.execute(sql, params).fetchall())

    async def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[aiosqlite.Row]:
        return list(await self.db.execute_fetchall(sql, params))

    # -- inbox: durable inbound, dedupe -------------------------------------------------------

    async def record_inbound(self, msg: InboundMessage) -> bool:
        """Record a message durably. False if this (channel, chat, message id) was seen before."""
        key = (msg.channel, msg.chat_id, msg.message_id)
        row = (*key, json.dumps({"chat_type": msg.chat_type}), _iso(msg.received_at))
        body = (*key, _encode(msg))

        def record(db: sqlite3.Connection) -> bool:  # the key and body, or neither
            added = db.execute(
                "INSERT OR IGNORE INTO inbox (channel, chat_id, message_id, payload, received_at)"
                " VALUES (?, ?, ?, ?, ?)", row,
            ).rowcount == 1
            if added:
                db.execute(
                    "INSERT OR REPLACE INTO inbox_body (channel, chat_id, message_id, payload)"
                    " VALUES (?, ?, ?, ?)", body,
                )
            return added

        return await self._commit(record, durable=True)

    async def mark_done(self, msg: InboundMessage, status: str = "done") -> None:
        """Answered (or denied): the body is no longer needed, only the key (dedup).

        `waiting` (the sender holds a pairing code) keeps the body, to answer it if the owner
        approves them within WAITING_TTL (gateway/pipeline/welcome.py).
        """
        key = (msg.channel, msg.chat_id, msg.message_id)
        if status == "waiting":
            await self._write(
                "UPDATE inbox SET status = 'waiting' WHERE channel = ? AND chat_id = ?"
                " AND message_id = ?", key,
            )
            return
        done_at = _iso(datetime.now(UTC))

        def mark(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE inbox SET status = ?, done_at = ?, payload = " + _ID_ONLY_PAYLOAD +
                " WHERE channel = ? AND chat_id = ? AND message_id = ?", (status, done_at, *key),
            )
            db.execute(
                "DELETE FROM inbox_body WHERE channel = ? AND chat_id = ? AND message_id = ?", key
            )

        await self._commit(mark)
        self._done_marks += 1
        if self._done_marks % PRUNE_EVERY == 0:
            await self.prune_inbox()

    async def prune_inbox(self, now: datetime | None = None) -> int:
        """Forget done rows received before the retention window, except each chat's newest
        answered one (a channel's catch-up starts from it). Returns the rows removed."""
        now = now or datetime.now(UTC)
        cutoff = _iso(now - self.inbox_retention)
        await self._write(  # nobody approved them in time: the stranger's words go
            "UPDATE inbox SET status = 'expired', payload = " + _ID_ONLY_PAYLOAD +
            " WHERE status = 'waiting' AND received_at < ?", (_iso(now - WAITING_TTL),),
        )
        await self._write(  # previews of replies long since queued (a kill left the row)
            "DELETE FROM previews WHERE at < ?", (cutoff,))
        await self._write(  # bodies of rows no longer pending or waiting
            "DELETE FROM inbox_body WHERE NOT EXISTS (SELECT 1 FROM inbox AS i WHERE"
            " i.status IN ('pending', 'waiting') AND i.channel = inbox_body.channel AND"
            " i.chat_id = inbox_body.chat_id AND i.message_id = inbox_body.message_id)"
        )
        return await self._write(
            "DELETE FROM inbox WHERE status != 'pending' AND received_at < ? AND rowid NOT IN"
            " (SELECT MAX(rowid) FROM inbox WHERE status = 'done' GROUP BY channel, chat_id)",
            (cutoff,),
        )

    async def pending_inbound(self) -> list[InboundMessage]:
        """Recorded but not yet answered, oldest first (what a restart must still process)."""
        rows = await self._rows(
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
        rows = await self._write_returning(
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
        rows = await self._rows(
            "SELECT chat_id, message_id FROM inbox WHERE channel = ?"
            " AND json_extract(payload, '$.chat_type') = 'direct'",
            (channel,),
        )
        latest: dict[str, str] = {}
        for chat_id, message_id in rows:
            if str(message_id).isdigit() and int(message_id) > int(latest.get(chat_id, "0")):
                latest[chat_id] = str(message_id)
        return latest

    # -- offsets ------------------------------------------------------------------------------

    async def load_offset(self, channel: str) -> int | None:
        rows = await self._rows("SELECT value FROM offsets WHERE channel = ?", (channel,))
        return int(rows[0][0]) if rows else None

    async def save_offset(self, channel: str, value: int) -> None:
        await self._write(
            "INSERT INTO offsets (channel, value) VALUES (?, ?)"
            " ON CONFLICT (channel) DO UPDATE SET value = excluded.value",
            (channel, value),
        )

    # -- approvals ----------------------------------------------------------------------------

    async def is_approved(self, channel: str, sender_id: str) -> bool:
        rows = await self._rows(
            "SELECT 1 FROM approved WHERE channel = ? AND sender_id = ?", (channel, sender_id)
        )
        return bool(rows)

    async def approve(self, channel: str, sender_id: str, via: str) -> None:
        await self._write(
            "INSERT OR IGNORE INTO approved (channel, sender_id, approved_at, via)"
            " VALUES (?, ?, ?, ?)",
            (channel, sender_id, _iso(datetime.now(UTC)), via),
            durable=True,
        )

    async def approved(self) -> list[tuple[str, str, str, str]]:
        rows = await self._rows(
            "SELECT channel, sender_id, approved_at, via FROM approved ORDER BY approved_at"
        )
        return [tuple(row) for row in rows]

    # -- welcomes: approvals to announce, messages that waited for them ----------------------

    async def queue_welcome(
        self, channel: str, sender_id: str, chat_id: str, person_id: str, *, as_owner: bool
    ) -> None:
        await self._write(
            "INSERT INTO welcomes (channel, sender_id, chat_id, person_id, as_owner,"
            " approved_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, sender_id) DO UPDATE"
            " SET chat_id = excluded.chat_id, person_id = excluded.person_id,"
            " as_owner = excluded.as_owner, approved_at = excluded.approved_at, done_at = NULL",
            (channel, sender_id, chat_id, person_id, int(as_owner), _iso(datetime.now(UTC))),
            durable=True,
        )

    async def pending_welcomes(self) -> list[Welcome]:
        rows = await self._rows(
            "SELECT channel, sender_id, chat_id, person_id, as_owner, approved_at FROM welcomes"
            " WHERE done_at IS NULL ORDER BY approved_at"
        )
        return [Welcome(str(c), str(s), str(chat), str(p), bool(o), str(at))
                for c, s, chat, p, o, at in rows]

    async def mark_welcomed(self, welcome: Welcome) -> None:
        await self._write(
            "UPDATE welcomes SET done_at = ? WHERE channel = ? AND sender_id = ?"
            " AND approved_at = ?",
            (_iso(datetime.now(UTC)), welcome.channel, welcome.sender_id, welcome.approved_at),
        )

    async def waiting_inbound(self, channel: str, sender_id: str) -> list[InboundMessage]:
        """Direct messages of `sender_id` kept while they waited for approval, oldest first."""
        rows = await self._rows(
            "SELECT b.payload FROM inbox AS i JOIN inbox_body AS b"
            " USING (channel, chat_id, message_id) WHERE i.channel = ? AND i.status = 'waiting'"
            " AND json_extract(b.payload, '$.sender_id') = ? ORDER BY i.received_at, i.rowid",
            (channel, sender_id),
        )
        return [_decode(row[0]) for row in rows]

    async def requeue(self, msg: InboundMessage) -> None:
        """Make a recorded message pending again (answered now, or after the next start)."""
        await self._write(
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

    async def revoke(self, channel: str, sender_id: str) -> bool:
        return (
            await self._write(
                "DELETE FROM approved WHERE channel = ? AND sender_id = ?", (channel, sender_id)
            )
            > 0
        )

    # -- identity links -----------------------------------------------------------------------

    async def person_for(self, channel: str, sender_id: str) -> str | None:
        rows = await self._rows(
            "SELECT person_id FROM links WHERE channel = ? AND sender_id = ?", (channel, sender_id)
        )
        return rows[0][0] if rows else None

    async def link(self, channel: str, sender_id: str, person_id: str) -> None:
        await self._write(
            "INSERT INTO links (channel, sender_id, person_id, linked_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (channel, sender_id) DO UPDATE SET person_id = excluded.person_id,"
            " linked_at = excluded.linked_at",
            (channel, sender_id, person_id, _iso(datetime.now(UTC))),
            durable=True,
        )

    async def unlink(self, channel: str, sender_id: str) -> bool:
        return (
            await self._write(
                "DELETE FROM links WHERE channel = ? AND sender_id = ?", (channel, sender_id)
            )
            > 0
        )

    async def links(self) -> list[tuple[str, str, str]]:
        rows = await self._rows(
            "SELECT person_id, channel, sender_id FROM links ORDER BY person_id, channel"
        )
        return [tuple(row) for row in rows]

    # -- last DM route ------------------------------------------------------------------------

    async def set_last_dm_route(
        self, person_id: str, channel: str, chat_id: str, sender_id: str, at: datetime
    ) -> None:
        """Remember where the person wrote from; `at` is when the route last changed."""
        if self._routes.get(person_id) == (channel, chat_id, sender_id):
            return
        self._routes[person_id] = (channel, chat_id, sender_id)
        await self._write(
            "INSERT INTO last_dm_route (person_id, channel, chat_id, sender_id, at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (person_id) DO UPDATE SET"
            " channel = excluded.channel, chat_id = excluded.chat_id,"
            " sender_id = excluded.sender_id, at = excluded.at",
            (person_id, channel, chat_id, sender_id, _iso(at)),
        )

    async def last_dm_route(self, person_id: str) -> DmRoute | None:
        rows = await self._rows(
            "SELECT channel, chat_id, sender_id, at FROM last_dm_route WHERE person_id = ?",
            (person_id,),
        )
        if not rows:
            return None
        channel, chat_id, sender_id, at = rows[0]
        return DmRoute(person_id, channel, chat_id, sender_id, datetime.fromisoformat(at))

    # -- outbox -------------------------------------------------------------------------------

    async def enqueue_outbound(
        self, channel: str, chat_id: str, text: str, *, key: str | None = None,
        done: InboundMessage | None = None, done_status: str = "done", replaces: str = "",
        file: str = "",
    ) -> int | None:
        """Add a message to the outbox and mark `done` answered, in one statement (trigger).

        Returns the row id, or None when `key` was used before (nothing added, nothing marked:
        the earlier delivery did both). `replaces`: the preview message it is written into.
        """
        params = (key, channel, chat_id, text, _iso(datetime.now(UTC)),
                  *((done.channel, done.chat_id, done.message_id, done_status)
                    if done is not None else (None, None, None, None)), replaces, file)

        def enqueue(db: sqlite3.Connection) -> int | None:
            cursor = db.execute(
                "INSERT OR IGNORE INTO outbox (key, channel, chat_id, text, created_at,"
                " done_channel, done_chat, done_message, done_status, replaces, file)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", params,
            )
            return cursor.lastrowid if cursor.rowcount == 1 else None

        return await self._commit(enqueue)

    async def record_preview(self, key: str, channel: str, chat_id: str,
                             message_id: str) -> None:
        """The preview message of the reply named `key` (bookkeeping: a crash before this
        leaves a preview the reply does not replace; it still ends with the cursor)."""
        await self._write(
            "INSERT OR REPLACE INTO previews (key, channel, chat_id, message_id, at)"
            " VALUES (?, ?, ?, ?, ?)", (key, channel, chat_id, message_id,
                                        _iso(datetime.now(UTC))))

    async def preview_for(self, key: str) -> str:
        rows = await self._rows("SELECT message_id FROM previews WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else ""

    async def forget_preview(self, key: str) -> None:
        await self._write("DELETE FROM previews WHERE key = ?", (key,))

    async def note_attempt(self, row: int, error: str) -> None:
        await self._write("UPDATE outbox SET attempts = attempts + 1, error = ? WHERE id = ?",
                          (error, row))

    async def note_parts(self, row: int, parts_sent: int) -> None:
        """The platform accepted the first `parts_sent` parts of a multi-part message.

        Urgent, like `mark_sent`: until it commits, a crash sends those parts again."""
        await self._write("UPDATE outbox SET parts_sent = ? WHERE id = ?", (parts_sent, row),
                          urgent=True)

    async def finish_outbound(self, row: int, status: str, error: str = "") -> None:
        """`sent`, `refused` or `failed`; the text is not kept once the row is finished."""
        await self._write(
            "UPDATE outbox SET status = ?, error = ?, text = '', finished_at = ? WHERE id = ?",
            (status, error, _iso(datetime.now(UTC)), row),
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
        await self._write(
            f"UPDATE outbox SET status = 'sent', text = '', finished_at = ? WHERE id IN ({marks})",
            (_iso(datetime.now(UTC)), *rows), urgent=True,
        )

    async def pending_outbound(self) -> list[Outgoing]:
        rows = await self._rows(
            "SELECT id, channel, chat_id, text, attempts, parts_sent, replaces, file FROM outbox"
            " WHERE status = 'pending' ORDER BY id"
        )
        return [Outgoing(int(r[0]), r[1], r[2], r[3], int(r[4]), int(r[5]),
                         str(r[6] or ""), str(r[7] or "")) for r in rows]

    # -- updates a channel could not read -------------------------------------------------------

    async def record_failed(self, channel: str, ref: str, error: str) -> None:
        """An update a channel skipped as unreadable: kept (without a body) for the record."""
        payload = json.dumps({"error": error})
        await self._write(
            "INSERT OR IGNORE INTO inbox (channel, chat_id, message_id, payload, status,"
            " received_at, done_at) VALUES (?, '', ?, ?, 'failed', ?, ?)",
            (channel, ref, payload, _iso(datetime.now(UTC)), _iso(datetime.now(UTC))),
        )

    # -- for modules that keep a table of their own here (usage, pairing) --------------------

    async def execute(self, sql: str, params: tuple[Any, ...] = (), *,
                      durable: bool = False) -> int:
        """One statement, committed when this returns (on disk when `durable`), never inside
        another's transaction; the number of rows it changed."""
        return await self._write(sql, params, durable=durable)

    async def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[aiosqlite.Row]:
        return await self._rows(sql, params)
