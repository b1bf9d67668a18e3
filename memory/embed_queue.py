"""The embedding queue of a recall index: the vectors its chunks and lines still lack.

Searching never waits for it: it takes the index lock only to read a window of pending
chunks and to write their vectors, never while the model runs, and yields to a search that
wants the model between batches. In the gateway it runs as a background task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import aiosqlite
import numpy as np

from memory.embedders import EmbedderError
from memory.embedding_cache import EmbeddingCache, joined, line_items
from memory.index_stats import EmbedProgress, SyncStats, VectorProgress
from memory.index_store import IndexStore
from memory.index_views import IndexViews
from memory.lines import join_numbers, pack_vectors, split_numbers
from memory.tasks import stop

__all__ = ["PENDING", "EmbedQueue"]

log = logging.getLogger(__name__)

EMBED_BATCH = 32  # most chunks embedded in one call
# A background batch aims at this many seconds of model time, so a search that needs the model
# for its query waits at most about that long (the local model takes ~0.2 s for one
# 600-character chunk on 2 cores, an endpoint far less).
EMBED_BATCH_SECONDS = 0.5
EMBED_WINDOW = 512  # pending chunks read at a time, embedded shortest first
EMBED_RETRY_SECONDS = 60.0  # after an embedding error, the background waits this long
# A chunk still needing vectors: its own, or its lines' (memory.lines).
PENDING = "id NOT IN (SELECT rowid FROM chunks_vec) OR id NOT IN (SELECT chunk_id FROM chunk_lines)"


class EmbedQueue:
    """Computing and storing the vectors the index lacks (and storing, for the sync, the line
    rows the cache already held: `insert_lines`). With `background` (the gateway) a sync that
    does not embed starts this in a task; else only `embed_pending` runs it."""

    def __init__(
        self,
        store: IndexStore,
        cache: EmbeddingCache,
        views: IndexViews,
        *,
        background: bool,
        workspace: Path,
    ) -> None:
        self._store = store
        self._cache = cache
        self._views = views
        self.background = background
        self._workspace = workspace  # named in the logs
        self._pending: int | None = None  # chunks without a vector, None: not counted yet
        self._error = ""  # the last embedding error, cleared when a new attempt starts
        self._guard = asyncio.Lock()  # one embedding loop at a time
        self._task: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._queries_waiting = 0  # searches wanting the model: embedding yields to them

    @property
    def pending(self) -> int | None:
        """Chunks still without their vectors; None before the first count."""
        return self._pending

    @property
    def error(self) -> str:
        """Why the last embedding attempt failed, "" when it did not."""
        return self._error

    async def recount(self, db: aiosqlite.Connection) -> None:
        """Count the chunks without their vectors (lock held), after a sync wrote chunks."""
        if self._cache.embedder is None:
            self._pending = 0
            return
        rows = list(await db.execute_fetchall(f"SELECT count(*) FROM chunks WHERE {PENDING}"))
        self._pending = int(rows[0][0])

    @contextlib.contextmanager
    def query_waiting(self) -> Iterator[None]:
        """While a search wants the model, the embedding loop waits before its next batch."""
        self._queries_waiting += 1
        try:
            yield
        finally:
            self._queries_waiting -= 1

    async def embed_pending(
        self,
        stats: SyncStats | None = None,
        progress: VectorProgress | None = None,
        *,
        batch_seconds: float | None = None,
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
        if self._cache.embedder is None:
            return stats
        async with self._guard:
            await self._embed_loop(stats, progress, batch_seconds)
        return stats

    async def _embed_loop(
        self, stats: SyncStats, progress: VectorProgress | None, batch_seconds: float | None
    ) -> None:
        assert self._cache.embedder is not None
        started = time.perf_counter()
        total = self._pending or 0
        done = 0
        per_char: float | None = None  # model seconds per character, measured
        # Swept by id, newest first, in windows: `below` is the last window's lowest id;
        # chunks added meanwhile (ids above where this sweep began) get a sweep of their own.
        floor, below, top = 0, None, 0
        self._error = stats.embed_error = ""
        while True:
            async with self._store.lock:
                db = self._store.db
                if db is None:
                    return
                rows = list(
                    await db.execute_fetchall(
                        f"SELECT id, hash, length(text) FROM chunks WHERE id > ? AND id < ? AND "
                        f"({PENDING}) ORDER BY id DESC LIMIT ?",
                        (floor, below if below is not None else 2**62, EMBED_WINDOW),
                    )
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
                    while (
                        size < EMBED_BATCH
                        and position + size < len(window)
                        and (size == 0 or budget >= window[position + size][2])
                    ):
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
                    per_char = took / chars if per_char is None else 0.5 * (per_char + took / chars)
                done += stored
                if self._pending is not None:
                    self._pending = max(0, self._pending - stored)
                if progress:
                    progress(EmbedProgress(done, max(total, done), time.perf_counter() - started))

    async def _embed_batch(self, ids: list[int], stats: SyncStats) -> tuple[int, float] | None:
        """Vectors for these chunks and their lines: cached ones read, the rest embedded in
        one model call, all stored. (chunks stored, model seconds), or
        None when the index closed or the embedder failed (remembered for the notes)."""
        cache = self._cache
        assert cache.embedder is not None
        async with self._store.lock:
            db = self._store.db
            if db is None:
                return None
            rows = await db.execute_fetchall(
                f"SELECT id, hash, path, text, lines FROM chunks WHERE id IN "
                f"({','.join('?' * len(ids))})",
                ids,
            )
            todo = [
                (
                    int(r[0]),
                    r[1],
                    cache.embedding_text(r[2], r[3]),
                    line_items(r[3], split_numbers(r[4])),
                )
                for r in rows
            ]
            if not todo:
                return 0, 0.0
            chunk_vectors = {
                h: np.frombuffer(b, dtype=np.float32)
                for h, b in (
                    await cache.chunk_vectors(db, list({h for _, h, _, _ in todo}))
                ).items()
            }
            parts = await cache.line_parts(db, [h for *_, items in todo for _, h, _ in items])
        # Equal texts (a repeated line, a copied note) are embedded once.
        chunks = {h: t for _, h, t, _ in todo if h not in chunk_vectors}
        # Each line model embeds the lines its cache lacks; the embedder takes the chunks in
        # the same call.
        missing = [
            {h: t for *_, items in todo for _, h, t in items if h not in part} for part in parts
        ]
        took = 0.0
        began = time.perf_counter()
        failed: Exception | None = None
        done: list[dict[str, str]] = []  # per model, what it embedded
        for number, (model, lines) in enumerate(zip(cache.line_models, missing, strict=True)):
            texts = [*(chunks.values() if number == 0 else ()), *lines.values()]
            if failed is not None or not texts:
                done.append({})
                continue
            try:
                matrix = np.asarray(
                    await asyncio.to_thread(model.embed_documents, texts), dtype=np.float32
                )
            except (EmbedderError, OSError, RuntimeError) as exc:
                failed = exc
                done.append({})
                continue
            if number == 0:
                chunk_vectors.update(zip(chunks, matrix[: len(chunks)], strict=True))
                matrix = matrix[len(chunks) :]
            parts[number].update(zip(lines, matrix, strict=True))
            done.append(lines)
        if chunks or any(missing):
            took = time.perf_counter() - began
        # What was computed is kept even when a model failed: the embedder's chunk vectors
        # are stored although the line model broke, and the cache spares the retry.
        async with self._store.lock:
            db = self._store.db
            if db is None:
                return None
            await cache.keep(
                db,
                [(h, chunk_vectors[h].tobytes()) for h in chunks if h in chunk_vectors],
                [{h: part[h] for h in lines} for part, lines in zip(parts, done, strict=True)],
            )
            await self._store_vectors(
                db,
                [
                    (i, chunk_vectors[h].tobytes(), items)
                    for i, h, _, items in todo
                    if h in chunk_vectors
                ],
                {i: h for i, h, _, _ in todo},
                joined(parts),
            )
        if failed is not None:
            log.warning("embedding failed; those chunks stay keyword-only: %s", failed)
            stats.embed_error = self._error = str(failed)
            self._retry_at = time.monotonic() + EMBED_RETRY_SECONDS
            return None
        stats.embedded += len(chunks)
        stats.lines_embedded += len(set().union(*missing)) if missing else 0
        stats.cached += len(todo) - len(chunks)
        return len(todo), took

    async def _store_vectors(
        self,
        db: aiosqlite.Connection,
        rows: list[tuple[int, bytes, list[tuple[int, str, str]]]],
        hashes: dict[int, str],
        line_vectors: dict[str, np.ndarray],
    ) -> None:
        """Insert the vectors, the chunk's and its lines', that chunks still existing with the
        hash they were computed for do not have yet (lock held)."""
        if not rows:
            return
        ids = [i for i, _, _ in rows]
        marks = ",".join("?" * len(ids))
        current = {
            int(r[0]): r[1]
            for r in await db.execute_fetchall(
                f"SELECT id, hash FROM chunks WHERE id IN ({marks})", ids
            )
        }
        have = {
            int(r[0])
            for r in await db.execute_fetchall(
                f"SELECT rowid FROM chunks_vec WHERE rowid IN ({marks})", ids
            )
        }
        have_lines = {
            int(r[0])
            for r in await db.execute_fetchall(
                f"SELECT chunk_id FROM chunk_lines WHERE chunk_id IN ({marks})", ids
            )
        }
        valid = [
            (i, b, items)
            for i, b, items in rows
            if current.get(i) is not None and current[i] == hashes[i]
        ]
        added = [(i, b) for i, b, _ in valid if i not in have]
        if added:
            await db.executemany("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", added)
            self._views.vectors_added(added)
        for i, _, items in valid:
            if i not in have_lines and all(h in line_vectors for _, h, _ in items):
                await self.insert_lines(db, i, items, line_vectors)
        await db.commit()

    async def insert_lines(
        self,
        db: aiosqlite.Connection,
        chunk_id: int,
        items: list[tuple[int, str, str]],
        vectors: dict[str, np.ndarray],
    ) -> None:
        """The chunk's row of line vectors (lock held; every item's vector is in `vectors`)."""
        assert self._cache.embedder is not None
        matrix = (
            np.stack([vectors[h] for _, h, _ in items])
            if items
            else np.zeros((0, self._cache.line_dim), dtype=np.float32)
        )
        await db.execute(
            "INSERT OR REPLACE INTO chunk_lines(chunk_id, numbers, vectors) VALUES (?, ?, ?)",
            (chunk_id, join_numbers([n for n, _, _ in items]), pack_vectors(matrix)),
        )
        self._views.lines_added(len(items))

    def start_background(self) -> None:
        """Start computing missing vectors in a task, when this index does that (gateway)."""
        if not self.background or self._cache.embedder is None or not self._pending:
            return
        if self._task is not None and not self._task.done():
            return
        if time.monotonic() < self._retry_at:
            return
        self._task = asyncio.create_task(self._background_embed())

    async def _background_embed(self) -> None:
        try:
            stats = await self.embed_pending(batch_seconds=EMBED_BATCH_SECONDS)
            if stats.embedded:
                log.info(
                    "recall index %s: %d chunks embedded in the background",
                    self._workspace,
                    stats.embedded,
                )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background embedding for %s failed", self._workspace)
            self._retry_at = time.monotonic() + EMBED_RETRY_SECONDS

    async def wait(self) -> None:
        """Wait for the background embedding under way, if any (tests, shutdown)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop the background embedding (what it stored stays stored)."""
        await stop(self._task)
        self._task = None
