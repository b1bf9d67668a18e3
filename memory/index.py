"""The recall index of one workspace: a derived SQLite file, rebuildable from the files.

`<workspace>/.recall/index.sqlite` holds the chunks, an FTS5 word index, an FTS5 trigram
index, a sqlite-vec `vec0` table (cosine) and `chunk_lines`, the vectors of each chunk's lines
(`memory.lines`). `<workspace>/.recall/embeddings.sqlite` is the embedding cache, keyed by
(embedder, model, dimension) and chunk or line text hash, kept apart so a rebuild never
re-embeds a text it has seen. A chunk is pending until it has both its vector and its lines'
vectors (its own may come first, from the cache).

Sync is incremental: files are compared by mtime and size, then by content hash; only new
chunks are embedded.

Searching never waits for embeddings. A sync writes new and changed text into the keyword
indexes (and vectors the cache already holds) at once; computing the missing vectors is a
separate step, `embed_pending`, which takes the index lock only to read and to write, never
while the model runs, and yields to any waiting search between batches. `sync()` runs both
(the CLI's `memory index`); `sync(embed=False)` only the first, and with
`embed_in_background` (the gateway) the second then runs as a background task. A search in
between fuses the keyword legs with the vectors of the chunks that have one.

A change of embedder, dimension, chunking or tokenizer rebuilds the index into a new file that
replaces the old one when complete (a crash leaves the old one). A corrupt or missing index is
rebuilt the same way (vectors come back from the cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import numpy as np

from memory import search as search_mod
from memory.atomic import create_private_file, make_private_dirs
from memory.chunking import Chunk, chunk_lines, markdown_lines, transcript_lines
from memory.context import CONTEXT_VERSION, embedding_text
from memory.defaults import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_MAX_RESULTS,
    DEFAULT_OVERLAP_LINES,
)
from memory.embedders import Embedder, EmbedderError
from memory.layout import RECALL_DIR
from memory.lines import (
    FIT_SAMPLE_LINES,
    MIN_FIT_LINES,
    REFIT_FRACTION,
    LineEnsemble,
    content_lines,
    join_numbers,
    pack_vectors,
    split_numbers,
    unpack_vectors,
)
from memory.minilm import english_enough
from memory.search import SearchResponse
from memory.sources import SourceFile, daily_note_date, is_dm_transcript, scan_sources
from memory.sqlite import connect_with_vec, sqlite_module
from memory.text import TOKENIZER_VERSION, index_text
from memory.vectors import VectorMatrix

__all__ = ["DEFAULT_CHUNK_CHARS", "EmbedProgress", "IndexStatus", "MemoryIndex", "SyncStats"]

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


def _space(embedder: Embedder | None) -> str:
    if embedder is None:
        return "none"
    return f"{embedder.name}:{embedder.model}:{embedder.dim}"


class MemoryIndex:
    """One workspace's index. Safe to use from one event loop; operations are serialized."""

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
        self._query_vectors = _RecentVectors()  # the embedder's, by query text
        self._line_queries = _RecentVectors()  # the line model's
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
            "space": _space(self.embedder),
            "chunk_chars": self.chunk_chars,
            "overlap_lines": self.overlap_lines,
            "tokenizer": TOKENIZER_VERSION,
            "sessions": self.sessions,
            **({"lines": _space(self.line_model)} if self.line_model else {}),
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
            rows = await db.execute_fetchall("SELECT value FROM meta WHERE key = 'config'")
            stored = json.loads(rows[0][0]) if rows else None
            if stored != json.loads(json.dumps(self.config(), sort_keys=True)):
                log.info("recall index %s was built differently; rebuilding", self.path)
                await db.close()
                return None
            await db.execute_fetchall("SELECT count(*) FROM chunks")
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
        for stale in _sqlite_files(aside):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        db = await self._connect(aside)
        try:
            await self._create_schema(db)
            stats = await self._sync_into(db, progress)
        finally:
            await db.close()
        for old in _sqlite_files(self.path)[1:]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        os.replace(aside, self.path)
        self._db = await self._connect(self.path)
        stats.rebuilt = True
        return stats

    # --- sync -------------------------------------------------------------------------------

    def mark_dirty(self) -> None:
        self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    async def sync(
        self,
        *,
        force: bool = False,
        progress: Progress | None = None,
        embed: bool = True,
        vector_progress: VectorProgress | None = None,
    ) -> SyncStats:
        """Bring the index up to date with the files; `force` rebuilds it from scratch.

        The text is searchable by keyword when the first step returns; with `embed` this
        waits for every missing vector too, else they are left to `embed_pending` (started
        in the background when `embed_in_background`).
        """
        async with self._lock:
            stats = await self._sync_locked(force=force, progress=progress)
        if embed:
            started = time.perf_counter()
            await self.embed_pending(stats, vector_progress)
            stats.seconds += time.perf_counter() - started
        else:
            self._start_background()
        stats.pending = self._pending or 0
        return stats

    async def _sync_locked(self, *, force: bool, progress: Progress | None) -> SyncStats:
        started = time.perf_counter()
        await asyncio.to_thread(make_private_dirs, self.dir)
        if self._db is None and not force:
            self._db = await self._open_existing()
        if force or self._db is None:
            stats = await self._rebuild(progress)
        else:
            try:
                stats = await self._sync_into(self._db, progress)
            except DB_ERRORS as exc:
                log.warning("recall index failed during sync (%s); rebuilding", exc)
                stats = await self._rebuild(progress)
        stats.seconds = time.perf_counter() - started
        self._terms = search_mod.TermStats()
        self._dirty = False
        self._synced_once = True
        return stats

    async def _sync_into(
        self,
        db: aiosqlite.Connection,
        progress: Progress | None,
    ) -> SyncStats:
        stats = SyncStats()
        found = await asyncio.to_thread(scan_sources, self.workspace, sessions=self.sessions)
        stats.files_seen = len(found)
        known = {
            row[0]: (row[1], row[2], row[3])
            for row in await db.execute_fetchall("SELECT path, hash, mtime_ns, size FROM files")
        }
        changed = [f for f in found if known.get(f.rel, (None, None, None))[1:] != (
            f.mtime_ns, f.size)]
        present = {f.rel for f in found}
        removed = [path for path in known if path not in present]
        total = len(changed)
        if progress:
            progress(0, total)
        for start in range(0, total, FILE_BATCH):
            batch = changed[start : start + FILE_BATCH]
            parsed = await asyncio.to_thread(self._read_batch, batch)
            await self._apply(db, parsed, known, stats)
            if progress:
                progress(min(start + FILE_BATCH, total), total)
        if removed:
            for path in removed:
                stats.chunks_removed += await self._delete_path(db, path)
            await db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            stats.files_removed = len(removed)
        await db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_sync', ?)",
            (datetime.now(UTC).isoformat(timespec="seconds"),),
        )
        await db.commit()
        self._pending = await self._count_pending(db)
        return stats

    def _read_batch(self, batch: list[SourceFile]) -> list[tuple[SourceFile, str, list[Chunk]]]:
        """Read and chunk files (in a worker thread). Unreadable files index as empty."""
        out: list[tuple[SourceFile, str, list[Chunk]]] = []
        for item in batch:
            try:
                with open(self.workspace / item.rel, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES)
                text = data.decode("utf-8", errors="replace")
            except OSError:
                continue
            digest = hashlib.sha256(data).hexdigest()
            if item.source == "sessions":
                lines = transcript_lines(text) if is_dm_transcript(text) else []
            else:
                lines = markdown_lines(text)
            out.append((item, digest, chunk_lines(lines, self.chunk_chars, self.overlap_lines)))
        return out

    async def _apply(
        self,
        db: aiosqlite.Connection,
        parsed: list[tuple[SourceFile, str, list[Chunk]]],
        known: dict[str, tuple[str, int, int]],
        stats: SyncStats,
    ) -> None:
        todo = []
        for item, digest, chunks in parsed:
            if known.get(item.rel, ("",))[0] == digest:  # touched, not changed
                await db.execute(
                    "UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                    (item.mtime_ns, item.size, item.rel),
                )
            else:
                todo.append((item, digest, chunks))
        keys = {(item.rel, c.text): self._vector_key(item.rel, c.text)
                for item, _, cs in todo for c in cs}
        vectors = await self._vectors_for(db, list(keys.values()), stats)
        # Whatever the cache holds is stored at once: the chunk's vector, and its lines'
        # vectors when all of them are there (an index from before line vectors gets its
        # chunk vectors back at once and its lines in the background).
        items = {(item.rel, c.text): _line_items(c.text, c.numbers) if self.embedder else []
                 for item, _, cs in todo for c in cs}
        line_vectors = await self._cached_lines(
            db, [h for found in items.values() for _, h, _ in found])
        added: list[tuple[int, bytes]] = []
        for item, digest, chunks in todo:
            stats.chunks_removed += await self._delete_path(db, item.rel)
            day = daily_note_date(item.rel)
            for chunk in chunks:
                cursor = await db.execute(
                    "INSERT INTO chunks(path, source, start_line, end_line, hash, day, text, "
                    "lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (item.rel, item.source, chunk.start_line, chunk.end_line,
                     keys[(item.rel, chunk.text)],
                     day.isoformat() if day else None, chunk.text,
                     join_numbers(chunk.numbers)),
                )
                rowid = cursor.lastrowid
                await db.execute(
                    "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)",
                    (rowid, index_text(chunk.text)),
                )
                await db.execute(
                    "INSERT INTO chunks_tri(rowid, body) VALUES (?, ?)", (rowid, chunk.text)
                )
                vector = vectors.get(keys[(item.rel, chunk.text)])
                found = items[(item.rel, chunk.text)]
                if vector is not None:
                    await db.execute(
                        "INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", (rowid, vector)
                    )
                    added.append((int(rowid), vector))
                if self.embedder is not None and all(h in line_vectors for _, h, _ in found):
                    await self._insert_lines(db, int(rowid), found, line_vectors)
            await db.execute(
                "INSERT OR REPLACE INTO files(path, source, hash, mtime_ns, size, chunks) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (item.rel, item.source, digest, item.mtime_ns, item.size, len(chunks)),
            )
            stats.files_indexed += 1
            stats.chunks_added += len(chunks)
        await db.commit()
        if self._vectors is not None and added:
            self._vectors.add(added)

    def _embedding_text(self, rel: str, text: str) -> str:
        return embedding_text(rel, text) if self.context else text

    def _vector_key(self, rel: str, text: str) -> str:
        """The chunk's `hash` column: what its vector is computed from, the cache key."""
        return hashlib.sha256(self._embedding_text(rel, text).encode("utf-8")).hexdigest()

    async def _vectors_for(
        self, db: aiosqlite.Connection, keys: list[str], stats: SyncStats
    ) -> dict[str, bytes]:
        """Vectors by key that the embedding cache holds (nothing is embedded here)."""
        if self.embedder is None or not keys:
            return {}
        found = await self._cached(db, list(dict.fromkeys(keys)))
        stats.cached += len(found)
        return found

    async def _cached(self, db: aiosqlite.Connection, hashes: list[str]) -> dict[str, bytes]:
        space = _space(self.embedder)
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
            space, dim = _space(model), model.dim
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
        return _joined(await self._cached_line_parts(db, hashes))

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

    async def _delete_path(self, db: aiosqlite.Connection, path: str) -> int:
        rows = await db.execute_fetchall("SELECT id FROM chunks WHERE path = ?", (path,))
        ids = [(row[0],) for row in rows]
        if not ids:
            return 0
        await db.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ids)
        await db.executemany("DELETE FROM chunks_tri WHERE rowid = ?", ids)
        if self.embedder is not None:
            await db.executemany("DELETE FROM chunks_vec WHERE rowid = ?", ids)
            gone = await db.execute_fetchall(
                "SELECT numbers FROM chunk_lines WHERE chunk_id IN (SELECT id FROM chunks "
                "WHERE path = ?)", (path,))
            self._lines_changed += sum(len(split_numbers(row[0])) for row in gone)
            await db.executemany("DELETE FROM chunk_lines WHERE chunk_id = ?", ids)
            if self._line_space is not None:
                self._line_space.forget({row[0] for row in ids})
            if self._vectors is not None:
                self._vectors.remove(row[0] for row in ids)
        await db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        return len(ids)

    async def _count_pending(self, db: aiosqlite.Connection) -> int:
        if self.embedder is None:
            return 0
        rows = await db.execute_fetchall(
            f"SELECT count(*) FROM chunks WHERE {PENDING}")
        return int(rows[0][0])

    @property
    def pending(self) -> int | None:
        """Chunks without a vector as of the last sync or batch (None: not counted yet)."""
        return self._pending

    async def embed_pending(
        self, stats: SyncStats | None = None, progress: VectorProgress | None = None,
        *, batch_seconds: float | None = None,
    ) -> SyncStats:
        """Compute the vectors the index lacks, in batches, without blocking searches.

        The index lock is held only to read a window of pending chunks and to write their
        vectors; the model runs outside it, and before each batch the loop waits while a
        search wants the model. A chunk changed or deleted meanwhile is skipped (its id no
        longer holds that hash). An embedder error stops the loop and is remembered for the
        notes; the chunks stay keyword-only until the next attempt.

        `batch_seconds` bounds each batch's model time (the background does, so a search
        waits at most that long for the model); None embeds EMBED_BATCH chunks a call, which
        is faster (the local model streams its weights once per call).
        """
        stats = stats or SyncStats()
        if self.embedder is None:
            return stats
        async with self._embed_guard:
            await self._embed_loop(stats, progress, batch_seconds)
        return stats

    async def _embed_loop(self, stats: SyncStats, progress: VectorProgress | None,
                          batch_seconds: float | None) -> None:
        assert self.embedder is not None
        started = time.perf_counter()
        total = self._pending or 0
        done = 0
        per_char: float | None = None  # model seconds per character, measured
        # Swept by id, newest first, in windows: `below` is the last window's lowest id;
        # chunks added meanwhile (ids above where this sweep began) get a sweep of their own.
        floor, below, top = 0, None, 0
        self._embed_error = stats.embed_error = ""
        while True:
            async with self._lock:
                db = self._db
                if db is None:
                    return
                rows = await db.execute_fetchall(
                    f"SELECT id, hash, length(text) FROM chunks WHERE id > ? AND id < ? AND "
                    f"({PENDING}) ORDER BY id DESC LIMIT ?",
                    (floor, below if below is not None else 2**62, EMBED_WINDOW),
                )
                if not rows:
                    if below is None:
                        self._pending = 0
                        return
                    floor, below = top, None
                    continue
                if below is None:
                    top = int(rows[0][0])
                below = int(rows[-1][0])
                total = max(total, done + len(rows))
            # Shortest first within the window: similar lengths share a batch.
            window = sorted(rows, key=lambda r: (r[2], -r[0]))
            position = 0
            while position < len(window):
                while self._queries_waiting:  # a search wants the model: it goes first
                    await asyncio.sleep(0.005)
                size = EMBED_BATCH
                if per_char and batch_seconds:
                    budget, size = batch_seconds / per_char, 0
                    while (size < EMBED_BATCH and position + size < len(window)
                           and (size == 0 or budget >= window[position + size][2])):
                        budget -= window[position + size][2]
                        size += 1
                batch = window[position : position + size]
                position += len(batch)
                outcome = await self._embed_batch([int(r[0]) for r in batch], stats)
                if outcome is None:
                    return
                stored, took = outcome
                if took:  # seconds per character of chunk text (its lines included)
                    chars = sum(r[2] for r in batch) or 1
                    per_char = (took / chars if per_char is None
                                else 0.5 * (per_char + took / chars))
                done += stored
                if self._pending is not None:
                    self._pending = max(0, self._pending - stored)
                if progress:
                    progress(EmbedProgress(done, max(total, done),
                                           time.perf_counter() - started))

    async def _embed_batch(self, ids: list[int], stats: SyncStats
                           ) -> tuple[int, float] | None:
        """Vectors for these chunks and their lines: cached ones read, the rest embedded in
        one model call, all stored. (chunks stored, model seconds), or
        None when the index closed or the embedder failed (remembered for the notes)."""
        assert self.embedder is not None
        space = _space(self.embedder)
        async with self._lock:
            db = self._db
            if db is None:
                return None
            rows = await db.execute_fetchall(
                f"SELECT id, hash, path, text, lines FROM chunks WHERE id IN "
                f"({','.join('?' * len(ids))})", ids)
            todo = [(int(r[0]), r[1], self._embedding_text(r[2], r[3]),
                     _line_items(r[3], split_numbers(r[4]))) for r in rows]
            if not todo:
                return 0, 0.0
            chunk_vectors = {h: np.frombuffer(b, dtype=np.float32) for h, b in (
                await self._cached(db, list({h for _, h, _, _ in todo}))).items()}
            parts = await self._cached_line_parts(
                db, [h for *_, items in todo for _, h, _ in items])
        # Equal texts (a repeated line, a copied note) are embedded once.
        chunks = {h: t for _, h, t, _ in todo if h not in chunk_vectors}
        # Each line model embeds the lines its cache lacks; the embedder takes the chunks in
        # the same call.
        missing = [{h: t for *_, items in todo for _, h, t in items if h not in part}
                   for part in parts]
        took = 0.0
        began = time.perf_counter()
        failed: Exception | None = None
        done: list[dict[str, str]] = []  # per model, what it embedded
        for number, (model, lines) in enumerate(zip(self._line_models, missing, strict=True)):
            texts = [*(chunks.values() if number == 0 else ()), *lines.values()]
            if failed is not None or not texts:
                done.append({})
                continue
            try:
                matrix = np.asarray(
                    await asyncio.to_thread(model.embed_documents, texts), dtype=np.float32)
            except (EmbedderError, OSError, RuntimeError) as exc:
                failed = exc
                done.append({})
                continue
            if number == 0:
                chunk_vectors.update(zip(chunks, matrix[: len(chunks)], strict=True))
                matrix = matrix[len(chunks):]
            parts[number].update(zip(lines, matrix, strict=True))
            done.append(lines)
        if chunks or any(missing):
            took = time.perf_counter() - began
        # What was computed is kept even when a model failed: the embedder's chunk vectors
        # are stored although the line model broke, and the cache spares the retry.
        async with self._lock:
            db = self._db
            if db is None:
                return None
            await db.executemany(
                "INSERT OR REPLACE INTO cache.embeddings(space, hash, vector) VALUES (?, ?, ?)",
                [(space, h, chunk_vectors[h].tobytes()) for h in chunks if h in chunk_vectors])
            await db.executemany(
                "INSERT OR REPLACE INTO cache.line_embeddings(space, hash, vector) "
                "VALUES (?, ?, ?)",
                [(_space(model), h, pack_vectors(part[h][None]))
                 for model, part, lines in zip(self._line_models, parts, done, strict=True)
                 for h in lines])
            await self._store_vectors(
                db, [(i, chunk_vectors[h].tobytes(), items) for i, h, _, items in todo
                     if h in chunk_vectors],
                {i: h for i, h, _, _ in todo}, _joined(parts))
        if failed is not None:
            log.warning("embedding failed; those chunks stay keyword-only: %s", failed)
            stats.embed_error = self._embed_error = str(failed)
            self._embed_retry_at = time.monotonic() + EMBED_RETRY_SECONDS
            return None
        stats.embedded += len(chunks)
        stats.lines_embedded += len(set().union(*missing)) if missing else 0
        stats.cached += len(todo) - len(chunks)
        return len(todo), took

    async def _store_vectors(self, db: aiosqlite.Connection,
                             rows: list[tuple[int, bytes, list[tuple[int, str, str]]]],
                             hashes: dict[int, str],
                             line_vectors: dict[str, np.ndarray]) -> None:
        """Insert the vectors, the chunk's and its lines', that chunks still existing with the
        hash they were computed for do not have yet (lock held)."""
        if not rows:
            return
        ids = [i for i, _, _ in rows]
        marks = ",".join("?" * len(ids))
        current = {int(r[0]): r[1] for r in await db.execute_fetchall(
            f"SELECT id, hash FROM chunks WHERE id IN ({marks})", ids)}
        have = {int(r[0]) for r in await db.execute_fetchall(
            f"SELECT rowid FROM chunks_vec WHERE rowid IN ({marks})", ids)}
        have_lines = {int(r[0]) for r in await db.execute_fetchall(
            f"SELECT chunk_id FROM chunk_lines WHERE chunk_id IN ({marks})", ids)}
        valid = [(i, b, items) for i, b, items in rows
                 if current.get(i) is not None and current[i] == hashes[i]]
        added = [(i, b) for i, b, _ in valid if i not in have]
        if added:
            await db.executemany("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", added)
            if self._vectors is not None:
                self._vectors.add(added)
        for i, _, items in valid:
            if i not in have_lines and all(h in line_vectors for _, h, _ in items):
                await self._insert_lines(db, i, items, line_vectors)
        await db.commit()

    def _start_background(self) -> None:
        """Start computing missing vectors in a task, when this index does that (gateway)."""
        if not self.embed_in_background or self.embedder is None or not self._pending:
            return
        if self._embed_task is not None and not self._embed_task.done():
            return
        if time.monotonic() < self._embed_retry_at:
            return
        self._embed_task = asyncio.create_task(self._background_embed())

    async def _background_embed(self) -> None:
        try:
            stats = await self.embed_pending(batch_seconds=EMBED_BATCH_SECONDS)
            if stats.embedded:
                log.info("recall index %s: %d chunks embedded in the background",
                         self.workspace, stats.embedded)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background embedding for %s failed", self.workspace)
            self._embed_retry_at = time.monotonic() + EMBED_RETRY_SECONDS

    async def wait_for_vectors(self) -> None:
        """Wait for the background embedding under way, if any (tests, shutdown)."""
        task = self._embed_task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- search -----------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Sync if anything may have changed: always without a watcher, else when dirty."""
        if self._dirty or not self._synced_once or not self.watching:
            await self.sync(embed=False)
        self._start_background()

    async def search(
        self,
        query: str,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        min_score: float = 0.0,
        more: Sequence[str] = (),
    ) -> SearchResponse:
        """Search the index; `more` are other phrasings of the query, fused with it."""
        await self.refresh()
        self._queries_waiting += 1
        try:
            return await self._search_locked(query, max_results, min_score, list(more))
        finally:
            self._queries_waiting -= 1

    async def _search_locked(self, query: str, max_results: int, min_score: float,
                             more: list[str]) -> SearchResponse:
        async with self._lock:
            db = self._db
            assert db is not None
            qvec: np.ndarray | None = None
            others: list[tuple[str, np.ndarray | None]] = [(q, None) for q in more]
            note = ""
            if self.embedder is not None:
                try:
                    qvec = await self._query_vector(query)
                    others = [(q, await self._query_vector(q)) for q in more]
                except (EmbedderError, OSError, RuntimeError) as exc:
                    note = f"vector search unavailable ({exc}); showing keyword matches only"
            if self.embedder is None:
                note = "keyword-only mode: no embedder is configured (memory.embedder = none)"
            elif self._pending and not note:
                note = (f"{self._pending} chunk{'s have' if self._pending > 1 else ' has'} "
                        "no vector yet"
                        + (f" ({self._embed_error})" if self._embed_error else
                           " (being embedded)" if self.embed_in_background else "")
                        + "; keyword matches cover them")
            line_failures: list[str] = []

            async def line_query(text: str) -> np.ndarray | None:
                try:
                    return await self._line_query(text)
                except (EmbedderError, OSError, RuntimeError) as exc:
                    # The line leg still runs, on the embedder's part of each line
                    # (memory.lines.LineEnsemble scores with the parts the query has).
                    log.warning("line model failed on a query: %s", exc)
                    line_failures.append(str(exc))
                    return None

            try:
                vectors = await self._loaded_vectors(db) if qvec is not None else None
                lines = await self._fitted_lines(db) if qvec is not None else None
                response = await search_mod.hybrid_search(
                    db,
                    query,
                    qvec,
                    max_results=max_results,
                    min_score=min_score,
                    today=self._today(),
                    half_life_days=self.half_life_days,
                    vectors=vectors,
                    terms=self._terms,
                    more=others,
                    lines=lines,
                    line_query=line_query if self.line_model is not None else None,
                )
            except DB_ERRORS as exc:
                log.warning("recall index failed during search (%s); rebuilding", exc)
                self.mark_dirty()
                await self._rebuild()
                assert self._db is not None
                response = await search_mod.hybrid_search(
                    self._db, query, qvec, max_results=max_results, min_score=min_score,
                    today=self._today(), half_life_days=self.half_life_days, more=others,
                )
            if line_failures:
                note = "; ".join(x for x in (
                    note, f"the line model failed on this query ({line_failures[0]}); lines "
                          "scored by the embedder alone") if x)
            response.note = "; ".join(x for x in (response.note, note) if x)
            if qvec is None:
                response.mode = "keyword-only"
            response.pending = self._pending or 0
            return response

    async def _loaded_vectors(self, db: aiosqlite.Connection) -> VectorMatrix | None:
        """The in-memory copy of chunks_vec, read from it on first use (lock held)."""
        if self._vectors is None and self.embedder is not None:
            rows = await db.execute_fetchall("SELECT rowid, embedding FROM chunks_vec")
            matrix = VectorMatrix(self.embedder.dim, capacity=len(rows) + 1024)
            matrix.add((int(r[0]), r[1]) for r in rows)
            self._vectors = matrix
        return self._vectors

    async def _fitted_lines(self, db: aiosqlite.Connection) -> LineEnsemble:
        """The whitening of this index's line vectors, refitted when REFIT_FRACTION of them
        changed since the last fit (lock held)."""
        space = self._line_space
        if space is not None and self._lines_changed <= max(
                MIN_FIT_LINES, REFIT_FRACTION * space.fitted_lines):
            return space
        assert self.embedder is not None
        dim, widths = self.line_dim, [model.dim for model in self._line_models]
        rows = int((await db.execute_fetchall("SELECT count(*) FROM chunk_lines"))[0][0])
        # Every k-th chunk's lines (about ten a chunk): a sample the same on every run.
        step = max(1, rows * 10 // FIT_SAMPLE_LINES)
        sample = await db.execute_fetchall(
            "SELECT chunk_id, numbers, vectors FROM chunk_lines WHERE chunk_id % ? = 0 "
            "ORDER BY chunk_id", (step,))
        self._lines_changed = 0

        def fit() -> LineEnsemble:
            keys: list[tuple[int, int]] = []
            blocks = []
            for chunk_id, numbers, blob in sample:
                found = split_numbers(numbers)
                if found:
                    keys.extend((int(chunk_id), n) for n in found)
                    blocks.append(unpack_vectors(blob, len(found), dim))
            return LineEnsemble.fit(np.concatenate(blocks) if blocks
                                    else np.zeros((0, dim), dtype=np.float32), keys, widths)

        self._line_space = await asyncio.to_thread(fit)
        return self._line_space

    async def _query_vector(self, query: str) -> np.ndarray:
        """The embedder's vector of the query (a repeated query's comes from the LRU)."""
        assert self.embedder is not None
        return await self._query_vectors.embed(self.embedder, query)

    async def _line_query(self, query: str) -> np.ndarray | None:
        """The line model's vector of the query; None when it has no say on it.

        The line model knows English only: on other scripts its vote is noise (on
        bench/recall.py's Chinese questions it cost 1 of 12 top-1 hits)."""
        if self.line_model is None or not english_enough(query):
            return None
        return await self._line_queries.embed(self.line_model, query)

    # --- status, watch, close ---------------------------------------------------------------

    async def status(self) -> IndexStatus:
        async with self._lock:
            db = await self._ensure_open()
            files = (await db.execute_fetchall(
                "SELECT count(*) FROM files WHERE chunks > 0"))[0][0]
            chunks = (await db.execute_fetchall("SELECT count(*) FROM chunks"))[0][0]
            vectors = 0
            if self.embedder is not None:
                vectors = (await db.execute_fetchall("SELECT count(*) FROM chunks_vec"))[0][0]
            rows = await db.execute_fetchall("SELECT value FROM meta WHERE key = 'last_sync'")
            known = {r[0]: (r[1], r[2]) for r in await db.execute_fetchall(
                "SELECT path, mtime_ns, size FROM files")}
        found = await asyncio.to_thread(scan_sources, self.workspace, sessions=self.sessions)
        # Dirty: the files on disk differ from what the index last saw.
        dirty = {f.rel: (f.mtime_ns, f.size) for f in found} != known
        note = ""
        if self.embedder is None:
            mode = "keyword-only"
            note = "no embedder configured: search matches words only"
        elif vectors < chunks:
            mode = "hybrid" if vectors else "keyword-only"
            note = f"{chunks - vectors} chunks lack vectors"
            if self._embed_error:
                note += f" ({self._embed_error})"
        else:
            mode = "hybrid"
        return IndexStatus(
            path=str(self.path),
            files=files,
            chunks=chunks,
            vectors=vectors,
            embedder=self.embedder.name if self.embedder else "none",
            model=self.embedder.model if self.embedder else "",
            dimension=self.embedder.dim if self.embedder else 0,
            mode=mode,
            dirty=dirty,
            last_sync=rows[0][0] if rows else None,
            note=note,
            line_model=self.line_model.model if self.line_model else "",
        )

    def start_watching(self, interval: float = 1.0, debounce: float = 0.5) -> None:
        """Poll the sources' mtimes; on a change mark dirty and sync once things settle."""
        if self._watch_task is None:
            self.watching = True
            self._watch_task = asyncio.create_task(self._watch(interval, debounce))

    async def _watch(self, interval: float, debounce: float) -> None:
        previous: dict[str, tuple[int, int]] | None = None
        changed_at: float | None = None
        while True:
            try:
                found = await asyncio.to_thread(
                    scan_sources, self.workspace, sessions=self.sessions
                )
                snapshot = {f.rel: (f.mtime_ns, f.size) for f in found}
                now = time.monotonic()
                if previous is not None and snapshot != previous:
                    self.mark_dirty()
                    changed_at = now
                previous = snapshot
                if self._dirty and (changed_at is None or now - changed_at >= debounce):
                    await self.sync(embed=not self.embed_in_background)
                    changed_at = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("recall watcher for %s failed; retrying", self.workspace)
            await asyncio.sleep(interval if changed_at is None else min(interval, debounce))

    async def close(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
            self._watch_task = None
            self.watching = False
        if self._embed_task is not None:
            self._embed_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._embed_task
            self._embed_task = None
        async with self._lock:
            self._vectors = None
            if self._db is not None:
                await self._db.close()
                self._db = None


def _line_items(text: str, numbers: Sequence[int]) -> list[tuple[int, str, str]]:
    """(line number, cache key, text) of a chunk's lines that get a vector (memory.lines)."""
    return [(number, hashlib.sha256(line.encode("utf-8")).hexdigest(), line)
            for number, line in content_lines(text, list(numbers))]


def _sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Whole line rows: each hash every part holds, its vectors side by side."""
    if not parts:
        return {}
    return {h: np.concatenate([part[h] for part in parts]) if len(parts) > 1 else vector
            for h, vector in parts[0].items() if all(h in part for part in parts[1:])}


class _RecentVectors:
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
