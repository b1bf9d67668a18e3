"""The files of a recall index (memory.index) and the one connection every job shares.

`<workspace>/.recall/index.sqlite` is the index, `embeddings.sqlite` beside it the embedding
cache, attached to the same connection as `cache` (memory.embedding_cache reads and writes
it). The store opens the index when it was built for the same identity (everything that,
changed, makes it invalid), creates the schema, and rebuilds into a new file that replaces the
old one only when complete, so a crash leaves the old one. Its lock serializes every job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from memory.atomic import create_private_file, make_private_dirs
from memory.layout import RECALL_DIR
from memory.sqlite import connect_with_vec, sqlite_module

__all__ = ["DB_ERRORS", "INDEX_DIR", "SCHEMA_VERSION", "IndexStore"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: line vectors (memory.lines)
INDEX_DIR = RECALL_DIR  # memory.layout
INDEX_FILE = "index.sqlite"
CACHE_FILE = "embeddings.sqlite"
# The connection comes from pysqlite3 where the stdlib cannot load extensions: its exception
# classes are not the stdlib's.
DB_ERRORS: tuple[type[Exception], ...] = tuple(
    {sqlite_module().DatabaseError, aiosqlite.DatabaseError}
)

T = TypeVar("T")


class IndexStore:
    """One workspace's index file, its connection and the lock every job holds to use it.

    `identity` is what the stored index must have been built for (memory.index computes it);
    `vector_dim` is the size of `chunks_vec`'s vectors, 0 for a keyword-only index."""

    def __init__(self, directory: Path, identity: dict[str, Any], vector_dim: int) -> None:
        self.dir = directory
        self.path = directory / INDEX_FILE
        self.identity = identity
        self.vector_dim = vector_dim
        self.lock = asyncio.Lock()
        self._db: aiosqlite.Connection | None = None

    @property
    def db(self) -> aiosqlite.Connection | None:
        """The open connection; None before the first open and after close."""
        return self._db

    async def make_dir(self) -> None:
        await asyncio.to_thread(make_private_dirs, self.dir)

    async def open(self) -> aiosqlite.Connection | None:
        """The open connection, else the stored index's when it is readable and built for
        this identity, else None: the index must be built (`replace`)."""
        if self._db is None:
            self._db = await self._open_existing()
        return self._db

    async def replace(self, fill: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Build a fresh index beside the old one, `fill` writing its content, then swap it
        into place and open it (lock held). What `fill` returns is returned."""
        if self._db is not None:
            await self._db.close()
            self._db = None
        aside = self.dir / f"{INDEX_FILE}.building"
        for stale in sqlite_files(aside):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        db = await self._connect(aside)
        try:
            await self._create_schema(db)
            filled = await fill(db)
        finally:
            await db.close()
        for old in sqlite_files(self.path)[1:]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        os.replace(aside, self.path)
        self._db = await self._connect(self.path)
        return filled

    async def close(self) -> None:
        """Close the connection (lock held); a later `open` opens the file again."""
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _connect(self, path: Path) -> aiosqlite.Connection:
        cache = str(self.dir / CACHE_FILE)

        def connector() -> Any:
            # 0600 before SQLite creates them: it gives -wal and -shm the database's mode.
            create_private_file(path)
            create_private_file(Path(cache))
            conn = connect_with_vec(str(path))
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("ATTACH DATABASE ? AS cache", (cache,))
            conn.execute("PRAGMA cache.journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS cache.embeddings ("
                "space TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, "
                "PRIMARY KEY (space, hash)) WITHOUT ROWID"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS cache.line_embeddings ("
                "space TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, "
                "PRIMARY KEY (space, hash)) WITHOUT ROWID"
            )
            conn.commit()
            return conn

        return await aiosqlite.Connection(connector, 64)

    async def _create_schema(self, db: aiosqlite.Connection) -> None:
        await db.executescript(
            """
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS files (
                path TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL,
                mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, chunks INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS chunks (
                id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL,
                start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL,
                day TEXT, text TEXT NOT NULL, lines TEXT NOT NULL DEFAULT '');
            CREATE TABLE IF NOT EXISTS chunk_lines (
                chunk_id INTEGER PRIMARY KEY, numbers TEXT NOT NULL, vectors BLOB NOT NULL);
            CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
            CREATE INDEX IF NOT EXISTS chunks_day ON chunks(day);
            CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts
                USING fts5(body, tokenize='porter unicode61 remove_diacritics 2');
            CREATE VIRTUAL TABLE IF NOT EXISTS chunks_tri
                USING fts5(body, tokenize='trigram case_sensitive 0');
            """
        )
        if self.vector_dim:
            await db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING "
                f"vec0(embedding float[{self.vector_dim}] distance_metric=cosine)"
            )
        await db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('config', ?)",
            (json.dumps(self.identity, sort_keys=True),),
        )
        await db.commit()

    async def _open_existing(self) -> aiosqlite.Connection | None:
        """The stored index if it is readable and built for this identity, else None."""
        if not self.path.exists():
            return None
        db: aiosqlite.Connection | None = None
        try:
            db = await self._connect(self.path)
            rows = list(await db.execute_fetchall("SELECT value FROM meta WHERE key = 'config'"))
            stored = json.loads(rows[0][0]) if rows else None
            if stored != json.loads(json.dumps(self.identity, sort_keys=True)):
                log.info("recall index %s was built differently; rebuilding", self.path)
                await db.close()
                return None
            await db.execute_fetchall("SELECT count(*) FROM chunks")
            # The notes of a date a question names (memory.dates) are found by this index;
            # an index built before it gets it here (derived data, no rebuild needed).
            await db.execute("CREATE INDEX IF NOT EXISTS chunks_day ON chunks(day)")
            await db.commit()
            return db
        except Exception as exc:  # corrupt file, wrong format, missing tables
            log.warning("recall index %s is unreadable (%s); rebuilding", self.path, exc)
            if db is not None:
                with contextlib.suppress(Exception):
                    await db.close()
            return None


def sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
