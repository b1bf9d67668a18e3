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

import aiosqlite
import numpy as np

from memory.embedders import EmbedderError
from memory.index_core import (
    EMBED_BATCH,
    EMBED_BATCH_SECONDS,
    EMBED_RETRY_SECONDS,
    EMBED_WINDOW,
    PENDING,
    EmbedProgress,
    IndexCore,
    SyncStats,
    VectorProgress,
    joined,
    line_items,
    space_key,
)
from memory.lines import (
    pack_vectors,
    split_numbers,
)

log = logging.getLogger(__name__)


class EmbedQueue(IndexCore):
    """Computing and storing the vectors the index lacks."""

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
                rows = list(await db.execute_fetchall(
                    f"SELECT id, hash, length(text) FROM chunks WHERE id > ? AND id < ? AND "
                    f"({PENDING}) ORDER BY id DESC LIMIT ?",
                    (floor, below if below is not None else 2**62, EMBED_WINDOW),
                ))
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
        space = space_key(self.embedder)
        async with self._lock:
            db = self._db
            if db is None:
                return None
            rows = await db.execute_fetchall(
                f"SELECT id, hash, path, text, lines FROM chunks WHERE id IN "
                f"({','.join('?' * len(ids))})", ids)
            todo = [(int(r[0]), r[1], self._embedding_text(r[2], r[3]),
                     line_items(r[3], split_numbers(r[4]))) for r in rows]
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
                [(space_key(model), h, pack_vectors(part[h][None]))
                 for model, part, lines in zip(self._line_models, parts, done, strict=True)
                 for h in lines])
            await self._store_vectors(
                db, [(i, chunk_vectors[h].tobytes(), items) for i, h, _, items in todo
                     if h in chunk_vectors],
                {i: h for i, h, _, _ in todo}, joined(parts))
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
