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

`RecallIndex` is a facade over parts with one job each, built here and handed what they need:
`IndexStore` (memory.index_store: the files, the connection, the lock, the schema),
`EmbeddingCache` (memory.embedding_cache: the models and the vectors they computed),
`IndexViews` (memory.index_views: what is kept in memory for searching), `EmbedQueue`
(memory.embed_queue: the missing vectors), `SyncJob` and `IndexWatcher` (memory.index_sync:
files into the index, noticing changes) and `SearchJob` (memory.index_search). What is left
here: when a search syncs first, the status, and closing in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import search as search_mod
from memory.context import CONTEXT_VERSION
from memory.defaults import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_MAX_RESULTS,
    DEFAULT_OVERLAP_LINES,
)
from memory.embed_queue import EmbedQueue
from memory.embedders import Embedder
from memory.embedding_cache import EmbeddingCache, space_key
from memory.index_search import SearchJob
from memory.index_stats import EmbedProgress, IndexStatus, Progress, SyncStats, VectorProgress
from memory.index_store import INDEX_DIR, SCHEMA_VERSION, IndexStore
from memory.index_sync import IndexWatcher, SyncJob
from memory.index_views import IndexViews
from memory.search import SearchResponse
from memory.text import TOKENIZER_VERSION

if TYPE_CHECKING:
    import aiosqlite

__all__ = ["DEFAULT_CHUNK_CHARS", "EmbedProgress", "IndexStatus", "RecallIndex", "SyncStats"]


class RecallIndex:
    """One workspace's recall index. Safe to use from one event loop; operations are
    serialized by the store's lock.

    `today` dates the fading of daily notes; `embed_in_background` (the gateway) leaves the
    missing vectors to a background task instead of the caller of `sync`; `context` embeds
    each chunk with its note's date and speakers in front (memory.context: off by default,
    measured within noise, and turning it on re-embeds every chunk); `line_model` is a
    second model for line vectors only (memory.minilm), scored beside the embedder's."""

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
        self.cache = EmbeddingCache(embedder, line_model, context=context)
        self.store = IndexStore(
            self.workspace / INDEX_DIR,
            identity(
                self.cache, chunk_chars=chunk_chars, overlap_lines=overlap_lines, sessions=sessions
            ),
            embedder.dim if embedder else 0,
        )
        self.views = IndexViews(self.cache)
        self.queue = EmbedQueue(
            self.store,
            self.cache,
            self.views,
            background=embed_in_background,
            workspace=self.workspace,
        )
        self.sync_job = SyncJob(
            self.workspace,
            self.store,
            self.cache,
            self.views,
            self.queue,
            chunk_chars=chunk_chars,
            overlap_lines=overlap_lines,
            sessions=sessions,
        )
        self.watcher = IndexWatcher(self.sync_job, embed=not embed_in_background)
        self.search_job = SearchJob(
            self.store,
            self.cache,
            self.views,
            self.queue,
            self.sync_job,
            half_life_days=half_life_days,
            today=today or (lambda: datetime.now().date()),
        )

    @property
    def embedder(self) -> Embedder | None:
        return self.cache.embedder

    @property
    def line_model(self) -> Embedder | None:
        return self.cache.line_model

    @property
    def path(self) -> Path:
        """The index file (it may not exist yet)."""
        return self.store.path

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
        in the background when `embed_in_background`)."""
        return await self.sync_job.sync(
            force=force, progress=progress, embed=embed, vector_progress=vector_progress
        )

    async def embed_pending(self, progress: VectorProgress | None = None) -> SyncStats:
        """Compute every vector the index lacks now (memory.embed_queue)."""
        return await self.queue.embed_pending(progress=progress)

    async def wait_for_vectors(self) -> None:
        """Wait for the background embedding under way, if any (tests, shutdown)."""
        await self.queue.wait()

    def start_watching(self, interval: float = 1.0, debounce: float = 0.5) -> None:
        """Poll the sources' mtimes; on a change mark dirty and sync once things settle.
        From then on a search syncs only when the watcher saw a change."""
        self.watcher.start(interval, debounce)

    async def refresh(self) -> None:
        """Sync if anything may have changed: always without a watcher, else when dirty."""
        job = self.sync_job
        if job.dirty or not job.synced_once or not self.watcher.watching:
            await job.sync(embed=False)
        self.queue.start_background()

    async def search(
        self,
        query: str,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        min_score: float = 0.0,
        more: Sequence[str] = (),
        snippet_chars: int = search_mod.SNIPPET_CHARS,
    ) -> SearchResponse:
        """Search the index; `more` are other phrasings of the query, fused with it;
        `snippet_chars` caps what one result shows."""
        await self.refresh()
        return await self.search_job.search(
            query,
            max_results=max_results,
            min_score=min_score,
            more=list(more),
            snippet_chars=snippet_chars,
        )

    async def status(self) -> IndexStatus:
        embedder = self.cache.embedder
        async with self.store.lock:
            db = await self.sync_job.open_locked()
            files = await _count(db, "SELECT count(*) FROM files WHERE chunks > 0")
            chunks = await _count(db, "SELECT count(*) FROM chunks")
            vectors = 0
            if embedder is not None:
                vectors = await _count(db, "SELECT count(*) FROM chunks_vec")
            rows = list(await db.execute_fetchall("SELECT value FROM meta WHERE key = 'last_sync'"))
            known = {
                r[0]: (r[1], r[2])
                for r in await db.execute_fetchall("SELECT path, mtime_ns, size FROM files")
            }
        found = await self.sync_job.scan()
        # Dirty: the files on disk differ from what the index last saw.
        dirty = {f.rel: (f.mtime_ns, f.size) for f in found} != known
        note = ""
        if embedder is None:
            mode = "keyword-only"
            note = "no embedder configured: search matches words only"
        elif vectors < chunks:
            mode = "hybrid" if vectors else "keyword-only"
            note = f"{chunks - vectors} chunks lack vectors"
            if self.queue.error:
                note += f" ({self.queue.error})"
        else:
            mode = "hybrid"
        return IndexStatus(
            path=str(self.path),
            files=files,
            chunks=chunks,
            vectors=vectors,
            embedder=embedder.name if embedder else "none",
            model=embedder.model if embedder else "",
            dimension=embedder.dim if embedder else 0,
            mode=mode,
            dirty=dirty,
            last_sync=rows[0][0] if rows else None,
            note=note,
            line_model=self.line_model.model if self.line_model else "",
        )

    async def close(self) -> None:
        """Stop the watcher and the background embedding, then close the file."""
        await self.watcher.close()
        await self.queue.close()
        async with self.store.lock:
            self.views.drop_vectors()
            await self.store.close()


def identity(
    cache: EmbeddingCache, *, chunk_chars: int, overlap_lines: int, sessions: bool
) -> dict[str, Any]:
    """Everything that, when changed, makes the stored index invalid (memory.index_store)."""
    return {
        "schema": SCHEMA_VERSION,
        "space": space_key(cache.embedder),
        "chunk_chars": chunk_chars,
        "overlap_lines": overlap_lines,
        "tokenizer": TOKENIZER_VERSION,
        "sessions": sessions,
        **({"lines": space_key(cache.line_model)} if cache.line_model else {}),
        # Only when on: an index built without it keeps its stored configuration.
        **({"context": CONTEXT_VERSION} if cache.context else {}),
    }


async def _count(db: aiosqlite.Connection, sql: str) -> int:
    """The one number a `SELECT count(*)` returns."""
    rows = list(await db.execute_fetchall(sql))
    return int(rows[0][0])
