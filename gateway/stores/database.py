"""The state database's connections: one writer with group commit, one reader, one lifecycle.

One SQLite file in WAL mode at `<workspaces_root>/.gateway/state.db`, shared by the running
gateway and the `clawgate pairing` / `clawgate users` commands (another process: WAL plus a
busy timeout lets both write). `StateDatabase` opens it (creating it 0600 if needed), checks
it (`PRAGMA quick_check`), brings its schema up to date (gateway/stores/migrations.py) and
closes both connections together; the stores (inbox.py, outbox.py, ...) run their SQL through
it and never hold a connection of their own.

Every write goes through one writer, gateway/stores/group_commit.py: the writes that arrive
together share one transaction and one fsync, and no write waits out a busy timeout behind
another connection's lock. A `durable` write commits with `synchronous=FULL` (it gates an
acknowledgement to a platform or an access decision: "recorded" means on disk); the others
with `NORMAL` (in WAL mode that survives a crash of the process, and at worst repeats work
after a power loss). An `urgent` write is not queued behind the others (the outbox marks
after a platform accepted a send). Reads run on a second connection, read-only, beside the
writer, and see every commit that has returned.
"""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from gateway.stores.group_commit import GroupCommitter, Write
from gateway.stores.migrations import LATEST, SchemaTooNew, migrate, too_new
from memory.atomic import create_private_file, make_private_dirs

T = TypeVar("T")

STATE_DIR = ".gateway"
STATE_FILE = "state.db"
# How long a write waits for another process's lock (`clawgate pairing approve`).
BUSY_TIMEOUT_SECONDS = 10.0


class StateError(Exception):
    """The state database cannot be opened; `str()` is one line saying what to do."""


def state_path(workspaces_root: Path) -> Path:
    return workspaces_root / STATE_DIR / STATE_FILE


def iso(moment: datetime) -> str:
    """How the state database writes a moment: ISO 8601 in UTC (sorts as text)."""
    return moment.astimezone(UTC).isoformat()


def now_iso() -> str:
    return iso(datetime.now(UTC))


def _writer_connection(path: Path) -> sqlite3.Connection:
    """The writer's connection (gateway/stores/group_commit.py), opened in its thread."""
    # Autocommit mode: the committer begins and ends each transaction itself.
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
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


class StateDatabase:
    """The reader and the writer of one state database file. `open()` before use, `close()`
    at the end (both connections and the writer's thread go together)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: aiosqlite.Connection | None = None
        self.writer = GroupCommitter(lambda: _writer_connection(path), "state")

    @property
    def is_open(self) -> bool:
        return self._reader is not None

    @property
    def reader(self) -> aiosqlite.Connection:
        """The read-only connection (health checks and tests read through it)."""
        if self._reader is None:
            raise RuntimeError("state database is not open")
        return self._reader

    async def open(self) -> None:
        """Open (creating if needed), check and migrate the database. Raises `StateError` with
        one line to show, having closed whatever it opened (no thread is left running)."""
        if self._reader is not None:
            return
        try:
            make_private_dirs(self.path.parent)
            create_private_file(self.path)  # 0600; SQLite gives -wal and -shm the same mode
            self._reader = await _connect(self.path)
            async with self._reader.execute("PRAGMA quick_check") as cursor:
                problems = [row[0] for row in await cursor.fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError(f"integrity check failed: {problems[0]}")
            # This connection only reads: every write, the schema's too, goes through the writer.
            await self._reader.execute("PRAGMA query_only=ON")
            async with self._reader.execute("PRAGMA user_version") as cursor:
                row = await cursor.fetchone()
            version = int(row[0]) if row is not None else 0
            if version > LATEST:  # refused before the writer starts: nothing is changed
                raise SchemaTooNew(too_new(version))
            await self.writer.open()
            if version < LATEST:
                # One transaction (BEGIN IMMEDIATE) that reads the version again: a second
                # process opening the file meanwhile waits, then finds the schema current.
                # Durable: the schema is on disk before anything is written in it.
                await self.writer.run(migrate, durable=True)
        except SchemaTooNew as exc:
            await self.close()
            raise StateError(f"{self.path}: {exc}") from None
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

    async def open_read_only(self) -> int:
        """Open the reader alone, on an existing file (SQLite `mode=ro`): nothing is created,
        checked, migrated or pruned, and no writer starts, so a command can read beside the
        running gateway even while it holds the write lock (`clawgate tasks list`). The
        stores' reads work; a write raises. Returns the schema's version, which the caller
        must check against what it reads (`migrations.LATEST`)."""
        if self._reader is not None:
            raise RuntimeError("state database is already open")
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            reader = await aiosqlite.connect(uri, uri=True, timeout=5)
        except (sqlite3.Error, OSError) as exc:
            raise StateError(f"cannot read the state database {self.path}: {exc}") from None
        try:
            await reader.execute("PRAGMA query_only=ON")
            async with reader.execute("PRAGMA user_version") as cursor:
                row = await cursor.fetchone()
        except BaseException:
            await reader.close()
            raise
        self._reader = reader
        return int(row[0]) if row is not None else 0

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        with contextlib.suppress(sqlite3.Error):
            await self.writer.close()
        if reader is not None:
            with contextlib.suppress(sqlite3.Error):
                await reader.close()

    # -- what the stores use -------------------------------------------------------------------

    async def write(
        self, sql: str, params: tuple[Any, ...] = (), *, durable: bool = False, urgent: bool = False
    ) -> int:
        """One statement, committed when this returns (on disk when `durable`; `urgent`: not
        queued behind other writes, group_commit.py); the number of rows it changed."""
        return await self.commit(
            lambda db: db.execute(sql, params).rowcount, durable=durable, urgent=urgent
        )

    async def commit(self, write: Write[T], *, durable: bool = False, urgent: bool = False) -> T:
        """Statements committed together or not at all, when this returns (group_commit.py)."""
        if self._reader is None:
            raise RuntimeError("state database is not open")
        return await self.writer.run(write, durable=durable, urgent=urgent)

    async def write_returning(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """One statement with a RETURNING clause, committed when this returns."""
        return await self.commit(lambda db: db.execute(sql, params).fetchall())

    async def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[aiosqlite.Row]:
        """A read on the read-only connection."""
        return list(await self.reader.execute_fetchall(sql, params))
