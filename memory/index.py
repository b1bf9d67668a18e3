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

The code is split by job: `memory.index_core` (the shared state, opening, rebuilding, the
embedding cache), `memory.index_sync` (files into the index, the watcher),
`memory.embed_queue` (the missing vectors) and `memory.index_search`; this module joins them
and adds status and close.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from memory.defaults import DEFAULT_CHUNK_CHARS
from memory.embed_queue import EmbedQueue
from memory.index_core import EmbedProgress, IndexStatus, SyncStats
from memory.index_search import SearchJob
from memory.index_sync import SyncJob
from memory.sources import scan_sources

if TYPE_CHECKING:
    import aiosqlite

__all__ = ["DEFAULT_CHUNK_CHARS", "EmbedProgress", "IndexStatus", "MemoryIndex", "SyncStats"]


class MemoryIndex(SyncJob, EmbedQueue, SearchJob):
    """One workspace's index: sync (memory.index_sync), the embedding queue
    (memory.embed_queue) and search (memory.index_search) over one shared state and storage
    (memory.index_core). Safe to use from one event loop; operations are serialized."""

    async def status(self) -> IndexStatus:
        async with self._lock:
            db = await self._ensure_open()
            files = await _count(db, "SELECT count(*) FROM files WHERE chunks > 0")
            chunks = await _count(db, "SELECT count(*) FROM chunks")
            vectors = 0
            if self.embedder is not None:
                vectors = await _count(db, "SELECT count(*) FROM chunks_vec")
            rows = list(await db.execute_fetchall(
                "SELECT value FROM meta WHERE key = 'last_sync'"))
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


async def _count(db: aiosqlite.Connection, sql: str) -> int:
    """The one number a `SELECT count(*)` returns."""
    rows = list(await db.execute_fetchall(sql))
    return int(rows[0][0])
