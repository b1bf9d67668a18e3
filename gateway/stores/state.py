"""The gateway state database: what the gateway must remember that is not a workspace file.

`StateDB` opens and closes one database (gateway/stores/database.py: the writer with group
commit, the read-only connection, the migrations) and hands out its stores, one per concern;
a part of the gateway takes the store it needs, not the whole:

- `inbox` (inbox.py): inbound messages, recorded durably before a platform is acknowledged;
- `outbox` (outbox.py): outbound messages and their per-part progress;
- `previews` (previews.py): the live preview message of a reply being streamed;
- `access` (access.py): approved senders, and approvals still to announce (welcomes);
- `pairing` (pairing.py): pairing codes and wrong approval attempts;
- `links` (links.py): identity links and last DM routes;
- `offsets` (offsets.py): channel offsets (the Telegram update offset);
- `usage` (usage_daily.py): the usage ledger's daily totals;
- `tasks` (tasks.py): background tasks, their progress and their one report.

Tables come only from gateway/stores/migrations.py. docs/architecture.md ("State database")
says how to add a store.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiosqlite

from gateway.stores.access import AccessStore
from gateway.stores.database import StateDatabase, StateError, state_path
from gateway.stores.group_commit import GroupCommitter
from gateway.stores.inbox import DEFAULT_INBOX_RETENTION, InboxStore
from gateway.stores.links import LinkStore
from gateway.stores.offsets import OffsetStore
from gateway.stores.outbox import OutboxStore
from gateway.stores.pairing import PairingStore
from gateway.stores.previews import PreviewStore
from gateway.stores.tasks import TaskStore
from gateway.stores.usage_daily import UsageStore

__all__ = ["StateDB", "StateError", "state_path"]


class StateDB:
    """One state database and its stores. `open()` before use, `close()` at the end."""

    def __init__(self, path: Path, *, inbox_retention: timedelta = DEFAULT_INBOX_RETENTION) -> None:
        self.database = StateDatabase(path)
        self.inbox = InboxStore(self.database, inbox_retention)
        self.outbox = OutboxStore(self.database)
        self.previews = PreviewStore(self.database)
        self.access = AccessStore(self.database)
        self.pairing = PairingStore(self.database)
        self.links = LinkStore(self.database)
        self.offsets = OffsetStore(self.database, self.inbox)
        self.usage = UsageStore(self.database)
        self.tasks = TaskStore(self.database)

    @classmethod
    def for_root(
        cls, workspaces_root: Path, *, inbox_retention: timedelta = DEFAULT_INBOX_RETENTION
    ) -> StateDB:
        return cls(state_path(workspaces_root), inbox_retention=inbox_retention)

    @property
    def path(self) -> Path:
        return self.database.path

    @property
    def writer(self) -> GroupCommitter:
        return self.database.writer

    @property
    def is_open(self) -> bool:
        return self.database.is_open

    @property
    def db(self) -> aiosqlite.Connection:
        """The read-only connection (health checks and tests read through it)."""
        return self.database.reader

    async def open(self) -> StateDB:
        """Open (creating, checking and migrating it if needed) and prune what has expired.
        Raises `StateError` with one line to show, having closed whatever it opened."""
        if self.database.is_open:
            return self
        await self.database.open()
        try:
            now = datetime.now(UTC)
            await self.inbox.prune_inbox(now)
            await self.previews.prune(now - self.inbox.retention)
        except sqlite3.Error as exc:
            await self.database.close()
            raise StateError(f"cannot open the state database {self.path}: {exc}") from None
        except BaseException:
            await self.database.close()
            raise
        return self

    async def close(self) -> None:
        await self.database.close()

    async def __aenter__(self) -> StateDB:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
