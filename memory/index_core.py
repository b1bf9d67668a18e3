"""The state every job of a recall index shares, and its storage (memory.index).

One `IndexCore` holds the open database, the lock, the models and what is kept in memory
(vectors, the fitted line space, counts); it opens, creates and rebuilds the index file and
reads and writes the embedding cache. The jobs build on it: `memory.index_sync` (files into
the index), `memory.embed_queue` (the vectors it lacks) and `memory.index_search`;
`memory.index.MemoryIndex` is all of them together.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import numpy as np

from memory import search as search_mod
from memory.atomic import create_private_file, make_private_dirs
from memory.context import CONTEXT_VERSION, embedding_text
from memory.defaults import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_OVERLAP_LINES,
)
from memory.embedders import Embedder
from memory.layout import RECALL_DIR
from memory.lines import (
    LineEnsemble,
    content_lines,
    join_numbers,
    pack_vectors,
    unpack_vectors,
)
from memory.sqlite import connect_with_vec, sqlite_module
from memory.text import TOKENIZER_VERSION
from memory.vectors import VectorMatrix

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: line vectors (memory.lines)
INDEX_DIR = RECALL_DIR  # memory.layout
INDEX_FILE = "index.sqlite"
CACHE_FILE = "embeddings.sqlite"
EMBED_BATCH = 32  # most chunks embedded in one call
# A background batch aims at this many seconds of model time, so a search that needs the model
# for its query waits at most about that long (the local model takes ~0.2 s for one
# 600-character chunk on 2 cores, an endpoint far less).
EMBED_BATCH_SECONDS = 0.5
EMBED_WINDOW = 512  # pending chunks read at a time, embedded shortest first
EMBED_RETRY_SECONDS = 60.0  # after an embedding error, the background waits this long
FILE_BATCH = 64
MAX_FILE_BYTES = 8 * 1024 * 1024

Progress = Callable[[int, int], None]  # (files done, files to read)
# A chunk still needing vectors: its own, or its lines' (memory.lines).
PENDING = ("id NOT IN (SELECT rowid FROM chunks_vec) OR "
           "id NOT IN (SELECT chunk_id FROM chunk_lines)")


@dataclass(frozen=True)
class EmbedProgress:
    """Where computing the missing vectors stands, told after every batch."""

    done: int
    total: int
    seconds: float  # since embedding started

    @property
    def per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far; None before the first batch."""
        if not self.done or self.seconds <= 0:
            return None
        return max(0.0, (self.total - self.done) * self.seconds / self.done)


VectorProgress = Callable[[EmbedProgress], None]
# The connection comes from pysqlite3 where the stdlib cannot load extensions: its exception
# classes are not the stdlib's.
DB_ERRORS: tuple[type[Exception], ...] = tuple(
    {sqlite_module().DatabaseError, aiosqlite.DatabaseError}
)


@dataclass
class SyncStats:
    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0  # chunk vectors computed (cache misses)
    lines_embedded: int = 0  # line vectors computed (cache misses)
    cached: int = 0  # vectors reused from the cache
    rebuilt: bool = False
    seconds: float = 0.0
    embed_error: str = ""
    pending: int = 0  # chunks still without a vector when the sync returned


@dataclass(frozen=True)
class IndexStatus:
    path: str
    files: int
    chunks: int
    vectors: int
    embedder: str
    model: str
    dimension: int
    mode: str  # "hybrid" | "keyword-only"
    dirty: bool
    last_sync: str | None
    note: str = ""
    line_model: str = ""  # the second model for line vectors, "" when none


def space_key(embedder: Embedder | None) -> str:
    if embedder is None:
        return "none"
    return f"{embedder.name}:{embedder.model}:{embedder.dim}"


class IndexCore:
    """One workspace's index state and storage. Safe to use from one event loop; operations
    are serialized by `_lock`."""

    def __init__(
        self,
        workspace: Path,
        embedder: Embedder | None,
        *,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_lines: int = DEFAULT_OVERLAP_LINES,
        sessions: bool = True,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
        today: Callable[[], date] | None = None,
        embed_in_background: bool = False,
        context: bool = False,
        line_model: Embedder | None = None,
    ) -> None:
        self.workspace = Path(workspace)
        # True in the gateway: a sync started by a search or the watcher embeds in a
        # background task. False (the CLI): vectors are computed only by `sync()` proper.
        self.embed_in_background = embed_in_background
        # Embed each chunk with its note's date and speakers in front (memory.context). Off by
        # default: measured, it moved recall within noise (README, "Recall"), and turning it
        # on re-embeds every chunk (new cache keys).
        self.context = context
        self.embedder = embedder
        # A second model for line vectors only (memory.minilm): its vectors sit after the
        # embedder's in each line row, and the line leg adds its score (memory.lines).
        self.line_model = line_model if embedder is not None else None
        self.chunk_chars = chunk_chars
        self.overlap_lines = overlap_lines
        self.sessions = sessions
        self.half_life_days = half_life_days
        self._today = today or (lambda: datetime.now().date())
        self.dir = self.workspace / INDEX_DIR
        self.path = self.dir / INDEX_FILE
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._dirty = True  # unknown until the first sync in this process
        self._synced_once = False
        self._embed_error = ""
        self._query_vectors = RecentVectors()  # the embedder's, by query text
        self._line_queries = RecentVectors()  # the line model's
        # The vectors of chunks_vec in memory for the vector leg (about 1.5 KiB a chunk at 384
        # dimensions): loaded at the first search, updated by every write to chunks_vec,
        # dropped when the index is rebuilt or closed. None: not loaded (vec0 KNN is used).
        self._vectors: VectorMatrix | None = None
        self._terms = search_mod.TermStats()  # word document frequencies, new after each sync
        # The whitening of line vectors (memory.lines), fitted at the first search and again
        # once REFIT_FRACTION of the lines changed; None: not fitted in this process.
        self._line_space: LineEnsemble | None = None
        self._lines_changed = 0
        self._watch_task: asyncio.Task[None] | None = None
        self.watching = False
        self._pending: int | None = None  # chunks without a vector, None: not counted yet
        self._embed_guard = asyncio.Lock()  # one embedding loop at a time
        self._embed_task: asyncio.Task[None] | None = None
        self._embed_retry_at = 0.0
        self._queries_waiting = 0  # searches wanting the model: embedding yields to them

    # --- identity and opening -------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """Everything that, when changed, makes the stored index invalid."""
        return {
            "schema": SCHEMA_VERSION,
            "space": space_key(self.embedder),
            "chunk_chars": self.chunk_chars,
            "overlap_lines": self.overlap_lines,
            "tokenizer": TOKENIZER_VERSION,
            "sessions": self.sessions,
            **({"lines": space_key(self.line_model)} if self.line_model else {}),
            # Only when on: an index built without it keeps its stored configuration.
            **({"context": CONTEXT_VERSION} if self.context else {}),
        }

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
        dim = self.embedder.dim if self.embedder else 0
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
        if dim:
            await db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING "
                f"vec0(embedding float[{dim}] distance_metric=cosine)"
            )
        await db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('config', ?)",
            (json.dumps(self.config(), sort_keys=True),),
        )
        await db.commit()

    async def _open_existing(self) -> aiosqlite.Connection | None:
        """The stored index if it is readable and built for this configuration, else None."""
        if not self.path.exists():
            return None
        db: aiosqlite.Connection | None = None
        try:
            db = await self._connect(self.path)
            rows = list(await db.execute_fetchall(
                "SELECT value FROM meta WHERE key = 'config'"))
            stored = json.loads(rows[0][0]) if rows else None
            if stored != json.loads(json.dumps(self.config(), sort_keys=True)):
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

    async def _ensure_open(self) -> aiosqlite.Connection:
        """The open connection; a missing or unusable index is rebuilt first."""
        if self._db is None:
            await asyncio.to_thread(make_private_dirs, self.dir)
            self._db = await self._open_existing()
        if self._db is None:
            await self._rebuild()
            self._synced_once = True
            self._dirty = False
        assert self._db is not None
        return self._db

    async def _rebuild(self, progress: Progress | None = None) -> SyncStats:
        """Build a fresh index beside the old one, then swap it into place."""
        self._vectors = None
        self._line_space = None
        self._terms = search_mod.TermStats()
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
            stats = await self._sync_into(db, progress)
        finally:
            await db.close()
        for old in sqlite_files(self.path)[1:]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        os.replace(aside, self.path)
        self._db = await self._connect(self.path)
        stats.rebuilt = True
        return stats

    def _embedding_text(self, rel: str, text: str) -> str:
        return embedding_text(rel, text) if self.context else text

    def _vector_key(self, rel: str, text: str) -> str:
        """The chunk's `hash` column: what its vector is computed from, the cache key."""
        return hashlib.sha256(self._embedding_text(rel, text).encode("utf-8")).hexdigest()

    async def _cached(self, db: aiosqlite.Connection, hashes: list[str]) -> dict[str, bytes]:
        space = space_key(self.embedder)
        found: dict[str, bytes] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await db.execute_fetchall(
                f"SELECT hash, vector FROM cache.embeddings WHERE space = ? AND hash IN ({marks})",
                (space, *part),
            )
            found.update((row[0], row[1]) for row in rows)
        return found

    @property
    def _line_models(self) -> list[Embedder]:
        """The models whose vectors make up a line's row, in their order in it."""
        if self.embedder is None:
            return []
        return [self.embedder, *([self.line_model] if self.line_model else [])]

    @property
    def line_dim(self) -> int:
        """Columns of a stored line row: every line model's dimensions."""
        return sum(model.dim for model in self._line_models)

    async def _cached_line_parts(self, db: aiosqlite.Connection, hashes: list[str]
                                 ) -> list[dict[str, np.ndarray]]:
        """For each line model, the line vectors by text hash that the cache holds."""
        parts: list[dict[str, np.ndarray]] = []
        unique = list(dict.fromkeys(hashes))
        for model in self._line_models:
            space, dim = space_key(model), model.dim
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                rows = await db.execute_fetchall(
                    "SELECT hash, vector FROM cache.line_embeddings WHERE space = ? AND hash "
                    f"IN ({','.join('?' * len(part))})", (space, *part))
                found.update((row[0], unpack_vectors(row[1], 1, dim)[0]) for row in rows)
            parts.append(found)
        return parts

    async def _cached_lines(self, db: aiosqlite.Connection, hashes: list[str]
                            ) -> dict[str, np.ndarray]:
        """Whole line rows by text hash: the lines every line model's cache holds."""
        if self.embedder is None or not hashes:
            return {}
        return joined(await self._cached_line_parts(db, hashes))

    async def _insert_lines(self, db: aiosqlite.Connection, chunk_id: int,
                            items: list[tuple[int, str, str]],
                            vectors: dict[str, np.ndarray]) -> None:
        """The chunk's row of line vectors (lock held; every item's vector is in `vectors`)."""
        assert self.embedder is not None
        matrix = (np.stack([vectors[h] for _, h, _ in items]) if items
                  else np.zeros((0, self.line_dim), dtype=np.float32))
        await db.execute(
            "INSERT OR REPLACE INTO chunk_lines(chunk_id, numbers, vectors) VALUES (?, ?, ?)",
            (chunk_id, join_numbers([n for n, _, _ in items]), pack_vectors(matrix)))
        self._lines_changed += len(items)

    async def _count_pending(self, db: aiosqlite.Connection) -> int:
        if self.embedder is None:
            return 0
        rows = list(await db.execute_fetchall(
            f"SELECT count(*) FROM chunks WHERE {PENDING}"))
        return int(rows[0][0])

    # --- what the jobs provide (memory.index_sync, memory.embed_queue) ---------------------

    async def _sync_into(self, db: aiosqlite.Connection, progress: Progress | None
                         ) -> SyncStats:
        raise NotImplementedError

    def _start_background(self) -> None:
        raise NotImplementedError

    def mark_dirty(self) -> None:
        raise NotImplementedError

    async def sync(self, *, force: bool = False, progress: Progress | None = None,
                   embed: bool = True, vector_progress: VectorProgress | None = None
                   ) -> SyncStats:
        raise NotImplementedError

    async def embed_pending(
        self, stats: SyncStats | None = None, progress: VectorProgress | None = None,
        *, batch_seconds: float | None = None,
    ) -> SyncStats:
        raise NotImplementedError


def line_items(text: str, numbers: Sequence[int]) -> list[tuple[int, str, str]]:
    """(line number, cache key, text) of a chunk's lines that get a vector (memory.lines)."""
    return [(number, hashlib.sha256(line.encode("utf-8")).hexdigest(), line)
            for number, line in content_lines(text, list(numbers))]


def sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Whole line rows: each hash every part holds, its vectors side by side."""
    if not parts:
        return {}
    return {h: np.concatenate([part[h] for part in parts]) if len(parts) > 1 else vector
            for h, vector in parts[0].items() if all(h in part for part in parts[1:])}


class RecentVectors:
    """Query vectors by query text, the least recently used dropped beyond `size`: the
    assistant often searches the same words again within a turn or a heartbeat."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: dict[str, np.ndarray] = {}

    async def embed(self, model: Embedder, query: str) -> np.ndarray:
        """`model`'s vector of `query`, from here when recently asked (off the event loop
        otherwise)."""
        vector = self._items.pop(query, None)
        if vector is None:
            vector = np.asarray(await asyncio.to_thread(model.embed_query, query),
                                dtype=np.float32)
            if len(self._items) >= self.size:
                self._items.pop(next(iter(self._items)))
        self._items[query] = vector  # at the end: the most recently used
        return vector
