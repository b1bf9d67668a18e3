"""The sync job of a recall index: files into chunks, keyword indexes and cached vectors.

Incremental: files are compared by mtime and size, then by content hash; a changed file's
chunks are replaced. Whatever vectors the embedding cache holds are stored at once; the rest
are left to the embedding queue (`memory.embed_queue`). A missing, unreadable or differently
built index is rebuilt into a new file (memory.index_store). The watcher polls the sources and
syncs when they settle.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite

from memory.chunking import Chunk, chunk_lines, markdown_lines, transcript_lines
from memory.embed_queue import EmbedQueue
from memory.embedding_cache import EmbeddingCache, line_items
from memory.index_stats import Progress, SyncStats, VectorProgress
from memory.index_store import DB_ERRORS, IndexStore
from memory.index_views import IndexViews
from memory.lines import join_numbers, split_numbers
from memory.sources import SourceFile, daily_note_date, is_dm_transcript, scan_sources
from memory.tasks import stop
from memory.text import index_text

__all__ = ["IndexWatcher", "SyncJob"]

log = logging.getLogger(__name__)

FILE_BATCH = 64  # files read and chunked in one worker-thread call
MAX_FILE_BYTES = 8 * 1024 * 1024


class SyncJob:
    """Bringing the index up to date with the files of `workspace` (its DM transcripts too
    with `sessions`), chunked at `chunk_chars` with `overlap_lines`."""

    def __init__(
        self,
        workspace: Path,
        store: IndexStore,
        cache: EmbeddingCache,
        views: IndexViews,
        queue: EmbedQueue,
        *,
        chunk_chars: int,
        overlap_lines: int,
        sessions: bool,
    ) -> None:
        self.workspace = workspace
        self._store = store
        self._cache = cache
        self._views = views
        self._queue = queue
        self._chunk_chars = chunk_chars
        self._overlap_lines = overlap_lines
        self._sessions = sessions
        self._dirty = True  # unknown until the first sync in this process
        self._synced_once = False

    @property
    def dirty(self) -> bool:
        """The files may differ from the index (a change seen, or no sync yet)."""
        return self._dirty

    @property
    def synced_once(self) -> bool:
        return self._synced_once

    def mark_dirty(self) -> None:
        self._dirty = True

    async def scan(self) -> list[SourceFile]:
        """The files the index covers, as they are on disk now."""
        return await asyncio.to_thread(scan_sources, self.workspace, sessions=self._sessions)

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
        async with self._store.lock:
            stats = await self._sync_locked(force=force, progress=progress)
        if embed:
            started = time.perf_counter()
            await self._queue.embed_pending(stats, vector_progress)
            stats.seconds += time.perf_counter() - started
        else:
            self._queue.start_background()
        stats.pending = self._queue.pending or 0
        return stats

    async def open_locked(self) -> aiosqlite.Connection:
        """The open connection; a missing or unusable index is rebuilt first (lock held)."""
        db = self._store.db
        if db is None:
            await self._store.make_dir()
            db = await self._store.open()
        if db is None:
            await self.rebuild_locked()
            self._synced_once = True
            self._dirty = False
            db = self._store.db
        assert db is not None
        return db

    async def rebuild_locked(self, progress: Progress | None = None) -> SyncStats:
        """Build a fresh index from the files beside the old one, then swap it into place
        (lock held)."""
        self._views.reset()
        stats = await self._store.replace(lambda db: self._sync_into(db, progress))
        stats.rebuilt = True
        return stats

    async def _sync_locked(self, *, force: bool, progress: Progress | None) -> SyncStats:
        started = time.perf_counter()
        await self._store.make_dir()
        db = None if force else await self._store.open()
        if db is None:
            stats = await self.rebuild_locked(progress)
        else:
            try:
                stats = await self._sync_into(db, progress)
            except DB_ERRORS as exc:
                log.warning("recall index failed during sync (%s); rebuilding", exc)
                stats = await self.rebuild_locked(progress)
        stats.seconds = time.perf_counter() - started
        self._views.new_terms()
        self._dirty = False
        self._synced_once = True
        return stats

    async def _sync_into(
        self,
        db: aiosqlite.Connection,
        progress: Progress | None,
    ) -> SyncStats:
        stats = SyncStats()
        found = await self.scan()
        stats.files_seen = len(found)
        known = {
            row[0]: (row[1], row[2], row[3])
            for row in await db.execute_fetchall("SELECT path, hash, mtime_ns, size FROM files")
        }
        changed = [
            f for f in found if known.get(f.rel, (None, None, None))[1:] != (f.mtime_ns, f.size)
        ]
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
        await self._queue.recount(db)
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
            out.append((item, digest, chunk_lines(lines, self._chunk_chars, self._overlap_lines)))
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
        keys = {
            (item.rel, c.text): self._cache.chunk_key(item.rel, c.text)
            for item, _, cs in todo
            for c in cs
        }
        vectors = await self._vectors_for(db, list(keys.values()), stats)
        # Whatever the cache holds is stored at once: the chunk's vector, and its lines'
        # vectors when all of them are there (an index from before line vectors gets its
        # chunk vectors back at once and its lines in the background).
        items = {
            (item.rel, c.text): line_items(c.text, c.numbers) if self._cache.embedder else []
            for item, _, cs in todo
            for c in cs
        }
        line_vectors = await self._cache.line_rows(
            db, [h for found in items.values() for _, h, _ in found]
        )
        added: list[tuple[int, bytes]] = []
        for item, digest, chunks in todo:
            stats.chunks_removed += await self._delete_path(db, item.rel)
            day = daily_note_date(item.rel)
            for chunk in chunks:
                cursor = await db.execute(
                    "INSERT INTO chunks(path, source, start_line, end_line, hash, day, text, "
                    "lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        item.rel,
                        item.source,
                        chunk.start_line,
                        chunk.end_line,
                        keys[(item.rel, chunk.text)],
                        day.isoformat() if day else None,
                        chunk.text,
                        join_numbers(chunk.numbers),
                    ),
                )
                rowid = cursor.lastrowid
                assert rowid is not None  # an INSERT always sets it
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
                if self._cache.embedder is not None and all(h in line_vectors for _, h, _ in found):
                    await self._queue.insert_lines(db, int(rowid), found, line_vectors)
            await db.execute(
                "INSERT OR REPLACE INTO files(path, source, hash, mtime_ns, size, chunks) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (item.rel, item.source, digest, item.mtime_ns, item.size, len(chunks)),
            )
            stats.files_indexed += 1
            stats.chunks_added += len(chunks)
        await db.commit()
        self._views.vectors_added(added)

    async def _vectors_for(
        self, db: aiosqlite.Connection, keys: list[str], stats: SyncStats
    ) -> dict[str, bytes]:
        """Vectors by key that the embedding cache holds (nothing is embedded here)."""
        if self._cache.embedder is None or not keys:
            return {}
        found = await self._cache.chunk_vectors(db, list(dict.fromkeys(keys)))
        stats.cached += len(found)
        return found

    async def _delete_path(self, db: aiosqlite.Connection, path: str) -> int:
        rows = await db.execute_fetchall("SELECT id FROM chunks WHERE path = ?", (path,))
        ids = [(row[0],) for row in rows]
        if not ids:
            return 0
        await db.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ids)
        await db.executemany("DELETE FROM chunks_tri WHERE rowid = ?", ids)
        if self._cache.embedder is not None:
            await db.executemany("DELETE FROM chunks_vec WHERE rowid = ?", ids)
            gone = await db.execute_fetchall(
                "SELECT numbers FROM chunk_lines WHERE chunk_id IN (SELECT id FROM chunks "
                "WHERE path = ?)",
                (path,),
            )
            await db.executemany("DELETE FROM chunk_lines WHERE chunk_id = ?", ids)
            self._views.chunks_removed(
                [row[0] for row in ids], sum(len(split_numbers(row[0])) for row in gone)
            )
        await db.execute("DELETE FROM chunks WHERE path = ?", (path,))
        return len(ids)


class IndexWatcher:
    """Polls the sources' mtimes; on a change marks the index dirty and syncs once things
    settle, embedding too unless the embedding queue runs in the background (`embed`)."""

    def __init__(self, sync: SyncJob, *, embed: bool) -> None:
        self._sync = sync
        self._embed = embed
        self._task: asyncio.Task[None] | None = None

    @property
    def watching(self) -> bool:
        """True once started: the watcher, not each search, decides when to sync."""
        return self._task is not None

    def start(self, interval: float = 1.0, debounce: float = 0.5) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(interval, debounce))

    async def close(self) -> None:
        await stop(self._task)
        self._task = None

    async def _watch(self, interval: float, debounce: float) -> None:
        sync = self._sync
        previous: dict[str, tuple[int, int]] | None = None
        changed_at: float | None = None
        while True:
            try:
                found = await sync.scan()
                snapshot = {f.rel: (f.mtime_ns, f.size) for f in found}
                now = time.monotonic()
                if previous is not None and snapshot != previous:
                    sync.mark_dirty()
                    changed_at = now
                previous = snapshot
                if sync.dirty and (changed_at is None or now - changed_at >= debounce):
                    await sync.sync(embed=self._embed)
                    changed_at = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("recall watcher for %s failed; retrying", sync.workspace)
            await asyncio.sleep(interval if changed_at is None else min(interval, debounce))
