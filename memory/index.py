"""The recall index of one workspace: a derived SQLite file, rebuildable from the files.

`<workspace>/.recall/index.sqlite` holds the chunks, an FTS5 word index, an FTS5 trigram
index and a sqlite-vec `vec0` table (cosine). `<workspace>/.recall/embeddings.sqlite` is the
embedding cache, keyed by (embedder, model, dimension) and chunk hash, kept apart so a rebuild
never re-embeds a chunk it has seen.

Sync is incremental: files are compared by mtime and size, then by content hash; only new
chunks are embedded. A change of embedder, dimension, chunking or tokenizer rebuilds the index
into a new file that replaces the old one when complete (a crash leaves the old one). A corrupt
or missing index is rebuilt the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import numpy as np

from memory import search as search_mod
from memory.atomic import create_private_file, make_private_dirs
from memory.chunking import Chunk, chunk_lines, markdown_lines, transcript_lines
from memory.defaults import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_MAX_RESULTS,
    DEFAULT_OVERLAP_LINES,
)
from memory.embedders import Embedder, EmbedderError
from memory.layout import RECALL_DIR
from memory.search import SearchResponse
from memory.sources import SourceFile, daily_note_date, is_dm_transcript, scan_sources
from memory.sqlite import connect_with_vec, sqlite_module
from memory.text import TOKENIZER_VERSION, index_text
from memory.vectors import VectorMatrix

__all__ = ["DEFAULT_CHUNK_CHARS", "IndexStatus", "MemoryIndex", "SyncStats"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
INDEX_DIR = RECALL_DIR  # memory.layout
INDEX_FILE = "index.sqlite"
CACHE_FILE = "embeddings.sqlite"
EMBED_BATCH = 32
FILE_BATCH = 64
MAX_FILE_BYTES = 8 * 1024 * 1024

Progress = Callable[[int, int], None]
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
    embedded: int = 0  # vectors computed (cache misses)
    cached: int = 0  # vectors reused from the cache
    rebuilt: bool = False
    seconds: float = 0.0
    embed_error: str = ""


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
    ) -> None:
        self.workspace = Path(workspace)
        self.embedder = embedder
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
        self._vectors_ok = embedder is not None
        self._embed_error = ""
        self._query_cache: dict[str, np.ndarray] = {}
        # The vectors of chunks_vec in memory for the vector leg (about 1.5 KiB a chunk at 384
        # dimensions): loaded at the first search, updated by every write to chunks_vec,
        # dropped when the index is rebuilt or closed. None: not loaded (vec0 KNN is used).
        self._vectors: VectorMatrix | None = None
        self._terms = search_mod.TermStats()  # word document frequencies, new after each sync
        self._watch_task: asyncio.Task[None] | None = None
        self.watching = False

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
                day TEXT, text TEXT NOT NULL);
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

    async def sync(self, *, force: bool = False, progress: Progress | None = None) -> SyncStats:
        """Bring the index up to date with the files; `force` rebuilds it from scratch."""
        async with self._lock:
            return await self._sync_locked(force=force, progress=progress)

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
        await self._backfill_vectors(db, stats)
        await db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_sync', ?)",
            (datetime.now(UTC).isoformat(timespec="seconds"),),
        )
        await db.commit()
        self._vectors_ok = self.embedder is not None and not stats.embed_error
        self._embed_error = stats.embed_error
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
        vectors = await self._vectors_for(db, [c for _, _, cs in todo for c in cs], stats)
        added: list[tuple[int, bytes]] = []
        for item, digest, chunks in todo:
            stats.chunks_removed += await self._delete_path(db, item.rel)
            day = daily_note_date(item.rel)
            for chunk in chunks:
                cursor = await db.execute(
                    "INSERT INTO chunks(path, source, start_line, end_line, hash, day, text) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (item.rel, item.source, chunk.start_line, chunk.end_line, chunk.hash,
                     day.isoformat() if day else None, chunk.text),
                )
                rowid = cursor.lastrowid
                await db.execute(
                    "INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)",
                    (rowid, index_text(chunk.text)),
                )
                await db.execute(
                    "INSERT INTO chunks_tri(rowid, body) VALUES (?, ?)", (rowid, chunk.text)
                )
                vector = vectors.get(chunk.hash)
                if vector is not None:
                    await db.execute(
                        "INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", (rowid, vector)
                    )
                    added.append((int(rowid), vector))
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

    async def _vectors_for(
        self, db: aiosqlite.Connection, chunks: list[Chunk], stats: SyncStats
    ) -> dict[str, bytes]:
        """Vectors by chunk hash: from the cache, else embedded (off the loop) and cached."""
        if self.embedder is None or not chunks:
            return {}
        space = _space(self.embedder)
        wanted: dict[str, str] = {}
        for chunk in chunks:
            wanted.setdefault(chunk.hash, chunk.text)
        found: dict[str, bytes] = {}
        hashes = list(wanted)
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await db.execute_fetchall(
                f"SELECT hash, vector FROM cache.embeddings WHERE space = ? AND hash IN ({marks})",
                (space, *part),
            )
            found.update((row[0], row[1]) for row in rows)
        stats.cached += len(found)
        missing = [h for h in hashes if h not in found]
        if stats.embed_error:
            return found
        for start in range(0, len(missing), EMBED_BATCH):
            part = missing[start : start + EMBED_BATCH]
            try:
                matrix = await asyncio.to_thread(
                    self.embedder.embed_documents, [wanted[h] for h in part]
                )
            except (EmbedderError, OSError, RuntimeError) as exc:
                log.warning("embedding failed, indexing keyword-only for now: %s", exc)
                stats.embed_error = str(exc)
                return found
            rows = [(space, h, np.asarray(v, dtype=np.float32).tobytes())
                    for h, v in zip(part, matrix, strict=True)]
            await db.executemany(
                "INSERT OR REPLACE INTO cache.embeddings(space, hash, vector) VALUES (?, ?, ?)",
                rows,
            )
            found.update((h, blob) for _, h, blob in rows)
            stats.embedded += len(part)
        return found

    async def _delete_path(self, db: aiosqlite.Connection, path: str) -> int:
        rows = await db.execute_fetchall("SELECT id FROM chunks WHERE path = ?", (path,))
        ids = [(row[0],) for row in rows]
        if not ids:
            return 0
        await db.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ids)
        await db.executemany("DELETE FROM chunks_tri WHERE rowid = ?", ids)
        if self.embedder is not None:
            await db.executemany("DELETE FROM chunks_vec WHERE rowid = ?", ids)
            if self._vectors is not None:
                self._vectors.remove(row[0] for row in ids)
        await db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        return len(ids)

    async def _backfill_vectors(self, db: aiosqlite.Connection, stats: SyncStats) -> None:
        """Embed chunks stored without a vector (the embedder was down when they were added)."""
        if self.embedder is None or stats.embed_error:
            return
        rows = await db.execute_fetchall(
            "SELECT id, hash, text FROM chunks WHERE id NOT IN (SELECT rowid FROM chunks_vec)"
        )
        if not rows:
            return
        chunks = [Chunk(0, 0, row[2]) for row in rows]
        vectors = await self._vectors_for(db, chunks, stats)
        added = [(int(row[0]), vectors[row[1]]) for row in rows if row[1] in vectors]
        await db.executemany("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", added)
        if self._vectors is not None:
            self._vectors.add(added)

    # --- search -----------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Sync if anything may have changed: always without a watcher, else when dirty."""
        if self._dirty or not self._synced_once or not self.watching:
            await self.sync()

    async def search(
        self,
        query: str,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        min_score: float = 0.0,
    ) -> SearchResponse:
        await self.refresh()
        async with self._lock:
            db = self._db
            assert db is not None
            qvec: np.ndarray | None = None
            note = ""
            if self.embedder is not None:
                try:
                    qvec = await self._query_vector(query)
                except (EmbedderError, OSError, RuntimeError) as exc:
                    note = f"vector search unavailable ({exc}); showing keyword matches only"
            if self.embedder is None:
                note = "keyword-only mode: no embedder is configured (memory.embedder = none)"
            elif self._embed_error and not note:
                note = (f"some chunks have no vectors yet ({self._embed_error}); "
                        "keyword matches cover them")
            try:
                vectors = await self._loaded_vectors(db) if qvec is not None else None
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
                )
            except DB_ERRORS as exc:
                log.warning("recall index failed during search (%s); rebuilding", exc)
                self.mark_dirty()
                await self._rebuild()
                assert self._db is not None
                response = await search_mod.hybrid_search(
                    self._db, query, qvec, max_results=max_results, min_score=min_score,
                    today=self._today(), half_life_days=self.half_life_days,
                )
            response.note = "; ".join(x for x in (response.note, note) if x)
            if qvec is None:
                response.mode = "keyword-only"
            return response

    async def _loaded_vectors(self, db: aiosqlite.Connection) -> VectorMatrix | None:
        """The in-memory copy of chunks_vec, read from it on first use (lock held)."""
        if self._vectors is None and self.embedder is not None:
            rows = await db.execute_fetchall("SELECT rowid, embedding FROM chunks_vec")
            matrix = VectorMatrix(self.embedder.dim, capacity=len(rows) + 1024)
            matrix.add((int(r[0]), r[1]) for r in rows)
            self._vectors = matrix
        return self._vectors

    async def _query_vector(self, query: str) -> np.ndarray:
        assert self.embedder is not None
        cached = self._query_cache.get(query)
        if cached is not None:
            return cached
        vector = await asyncio.to_thread(self.embedder.embed_query, query)
        if len(self._query_cache) >= 256:
            self._query_cache.pop(next(iter(self._query_cache)))
        self._query_cache[query] = vector
        return vector

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
                    await self.sync()
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
        async with self._lock:
            self._vectors = None
            if self._db is not None:
                await self._db.close()
                self._db = None


def _sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
