"""The gateway state database: what the gateway must remember that is not a workspace file.

One SQLite file in WAL mode at `<workspaces_root>/.gateway/state.db`, shared by the running
gateway and the `clawgate pairing` / `clawgate users` commands (another process: WAL plus a
busy timeout lets both write). It holds:

- `inbox`: every inbound platform message, recorded before it is acknowledged to the platform
  and marked done once answered. Its key (channel, chat, message id) is what makes a redelivery
  after a restart a no-op, and its pending rows are what a restart picks up again.
- `offsets`: the Telegram update offset (the next update id to ask for).
- `approved`, `pairing`, `approve_failures`: access control (see gateway/pipeline/pairing.py).
- `links`: identity links, (channel, user id) -> person id.
- `last_dm_route`: where each person last wrote to us in a DM (heartbeat delivery).
- `deliveries`: one row per reply sent or failed.

Two connections: writes that gate an acknowledgement to a platform (the inbox record) and
access decisions commit with `synchronous=FULL`, so "recorded" means on disk, not in a page
cache; bookkeeping (offsets, done marks, routes, deliveries) commits with `NORMAL`, which in
WAL mode survives a crash of the process and at worst repeats work after a power loss (a
redelivered update is deduplicated by the inbox). Measured: 2.3x the messages per second of
FULL everywhere.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from channels.base import InboundMessage

log = logging.getLogger(__name__)

STATE_DIR = ".gateway"
STATE_FILE = "state.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    channel TEXT NOT NULL, chat_id TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    received_at TEXT NOT NULL, done_at TEXT,
    PRIMARY KEY (channel, chat_id, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_pending ON inbox (status, received_at);
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
CREATE TABLE IF NOT EXISTS links (
    channel TEXT NOT NULL, sender_id TEXT NOT NULL, person_id TEXT NOT NULL,
    linked_at TEXT NOT NULL, PRIMARY KEY (channel, sender_id)
);
CREATE TABLE IF NOT EXISTS last_dm_route (
    person_id TEXT PRIMARY KEY, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    sender_id TEXT NOT NULL, at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, chat_id TEXT NOT NULL,
    ok INTEGER NOT NULL, error TEXT NOT NULL DEFAULT '', at TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class DmRoute:
    """Where a person last wrote to us in a direct message: deliver proactive messages here."""

    person_id: str
    channel: str
    chat_id: str
    sender_id: str
    at: datetime


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
        }
    )


def _decode(payload: str) -> InboundMessage:
    data: dict[str, Any] = json.loads(payload)
    data["received_at"] = datetime.fromisoformat(data["received_at"])
    return InboundMessage(**data)


async def _connect(path: Path, synchronous: str) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, timeout=10.0)
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute(f"PRAGMA synchronous={synchronous}")
    await db.execute("PRAGMA busy_timeout=10000")
    return db


class StateDB:
    """Async access to the state database. `open()` before use, `close()` at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._durable: aiosqlite.Connection | None = None
        # Last DM routes written by this process: an unchanged route costs no disk write.
        self._routes: dict[str, tuple[str, str, str]] = {}

    @classmethod
    def for_root(cls, workspaces_root: Path) -> StateDB:
        return cls(state_path(workspaces_root))

    @property
    def is_open(self) -> bool:
        return self._db is not None

    async def open(self) -> StateDB:
        if self._db is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = await _connect(self.path, "NORMAL")
        await db.executescript(_SCHEMA)
        await db.commit()
        self._durable = await _connect(self.path, "FULL")
        self._db = db
        return self

    async def close(self) -> None:
        for connection in (self._db, self._durable):
            if connection is not None:
                await connection.close()
        self._db = self._durable = None

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
        self, sql: str, params: tuple[Any, ...] = (), *, durable: bool = False
    ) -> int:
        connection = self._durable if durable and self._durable is not None else self.db
        cursor = await connection.execute(sql, params)
        await connection.commit()
        return cursor.rowcount

    async def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[aiosqlite.Row]:
        async with self.db.execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    # -- inbox: durable inbound, dedupe -------------------------------------------------------

    async def record_inbound(self, msg: InboundMessage) -> bool:
        """Record a message durably. False if this (channel, chat, message id) was seen before."""
        added = await self._write(
            "INSERT OR IGNORE INTO inbox (channel, chat_id, message_id, payload, received_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (msg.channel, msg.chat_id, msg.message_id, _encode(msg), _iso(msg.received_at)),
            durable=True,
        )
        return added == 1

    async def mark_done(self, msg: InboundMessage, status: str = "done") -> None:
        await self._write(
            "UPDATE inbox SET status = ?, done_at = ? WHERE channel = ? AND chat_id = ?"
            " AND message_id = ?",
            (status, _iso(datetime.now(UTC)), msg.channel, msg.chat_id, msg.message_id),
        )

    async def pending_inbound(self) -> list[InboundMessage]:
        """Recorded but not yet answered, oldest first (what a restart must still process)."""
        rows = await self._rows(
            "SELECT payload FROM inbox WHERE status = 'pending' ORDER BY received_at, rowid"
        )
        return [_decode(row[0]) for row in rows]

    async def inbound_status(self, channel: str, chat_id: str, message_id: str) -> str | None:
        rows = await self._rows(
            "SELECT status FROM inbox WHERE channel = ? AND chat_id = ? AND message_id = ?",
            (channel, chat_id, message_id),
        )
        return rows[0][0] if rows else None

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
        return [tuple(row) for row in rows]  # type: ignore[misc]

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
        return [tuple(row) for row in rows]  # type: ignore[misc]

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

    # -- deliveries ---------------------------------------------------------------------------

    async def record_delivery(self, channel: str, chat_id: str, ok: bool, error: str = "") -> None:
        await self._write(
            "INSERT INTO deliveries (channel, chat_id, ok, error, at) VALUES (?, ?, ?, ?, ?)",
            (channel, chat_id, int(ok), error, _iso(datetime.now(UTC))),
        )
