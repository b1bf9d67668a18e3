"""The search job of a recall index: query vectors and `memory.search.hybrid_search` under
the index lock, over the in-memory views (memory.index_views), with the notes that say what
the answer lacks (vectors still pending, a model that failed)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import date

import numpy as np

from memory import search as search_mod
from memory.embed_queue import EmbedQueue
from memory.embedders import Embedder, EmbedderError
from memory.embedding_cache import EmbeddingCache
from memory.index_store import DB_ERRORS, IndexStore
from memory.index_sync import SyncJob
from memory.index_views import IndexViews
from memory.minilm import english_enough
from memory.search import SearchResponse

__all__ = ["RecentVectors", "SearchJob"]

log = logging.getLogger(__name__)


class SearchJob:
    """Answering searches from the index. Daily notes fade with `half_life_days` counted
    from `today()`; a database error during a search rebuilds the index (`sync`)."""

    def __init__(
        self,
        store: IndexStore,
        cache: EmbeddingCache,
        views: IndexViews,
        queue: EmbedQueue,
        sync: SyncJob,
        *,
        half_life_days: float,
        today: Callable[[], date],
    ) -> None:
        self._store = store
        self._cache = cache
        self._views = views
        self._queue = queue
        self._sync = sync
        self._half_life_days = half_life_days
        self._today = today
        self._query_vectors = RecentVectors()  # the embedder's, by query text
        self._line_queries = RecentVectors()  # the line model's

    async def search(
        self, query: str, *, max_results: int, min_score: float, more: list[str], snippet_chars: int
    ) -> SearchResponse:
        """`more` are other phrasings of the query, fused with it; `snippet_chars` caps what
        one result shows. The caller has brought the index up to date (memory.index)."""
        with self._queue.query_waiting():
            return await self._search_locked(query, max_results, min_score, more, snippet_chars)

    async def _search_locked(
        self, query: str, max_results: int, min_score: float, more: list[str], snippet_chars: int
    ) -> SearchResponse:
        cache, queue = self._cache, self._queue
        async with self._store.lock:
            db = self._store.db
            assert db is not None
            qvec: np.ndarray | None = None
            others: list[tuple[str, np.ndarray | None]] = [(q, None) for q in more]
            note = ""
            if cache.embedder is not None:
                try:
                    qvec = await self.query_vector(query)
                    others = [(q, await self.query_vector(q)) for q in more]
                except (EmbedderError, OSError, RuntimeError) as exc:
                    note = f"vector search unavailable ({exc}); showing keyword matches only"
            pending = queue.pending
            if cache.embedder is None:
                note = "keyword-only mode: no embedder is configured (memory.embedder = none)"
            elif pending and not note:
                note = (
                    f"{pending} chunk{'s have' if pending > 1 else ' has'} "
                    "no vector yet"
                    + (
                        f" ({queue.error})"
                        if queue.error
                        else " (being embedded)"
                        if queue.background
                        else ""
                    )
                    + "; keyword matches cover them"
                )
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
                views = self._views
                vectors = await views.loaded_vectors(db) if qvec is not None else None
                lines = await views.fitted_lines(db) if qvec is not None else None
                response = await search_mod.hybrid_search(
                    db,
                    query,
                    qvec,
                    max_results=max_results,
                    min_score=min_score,
                    today=self._today(),
                    half_life_days=self._half_life_days,
                    vectors=vectors,
                    terms=views.terms,
                    more=others,
                    lines=lines,
                    line_query=line_query if cache.line_model is not None else None,
                    snippet_chars=snippet_chars,
                )
            except DB_ERRORS as exc:
                log.warning("recall index failed during search (%s); rebuilding", exc)
                self._sync.mark_dirty()
                await self._sync.rebuild_locked()
                assert self._store.db is not None
                response = await search_mod.hybrid_search(
                    self._store.db,
                    query,
                    qvec,
                    max_results=max_results,
                    min_score=min_score,
                    today=self._today(),
                    half_life_days=self._half_life_days,
                    more=others,
                    snippet_chars=snippet_chars,
                )
            if line_failures:
                note = "; ".join(
                    x
                    for x in (
                        note,
                        f"the line model failed on this query ({line_failures[0]}); lines "
                        "scored by the embedder alone",
                    )
                    if x
                )
            response.note = "; ".join(x for x in (response.note, note) if x)
            if qvec is None:
                response.mode = "keyword-only"
            response.pending = queue.pending or 0
            return response

    async def query_vector(self, query: str) -> np.ndarray:
        """The embedder's vector of the query (a repeated query's comes from the LRU)."""
        assert self._cache.embedder is not None
        return await self._query_vectors.embed(self._cache.embedder, query)

    async def _line_query(self, query: str) -> np.ndarray | None:
        """The line model's vector of the query; None when it has no say on it.

        The line model knows English only: on other scripts its vote is noise (on
        bench/recall.py's Chinese questions it cost 1 of 12 top-1 hits)."""
        line_model = self._cache.line_model
        if line_model is None or not english_enough(query):
            return None
        return await self._line_queries.embed(line_model, query)


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
            vector = np.asarray(await asyncio.to_thread(model.embed_query, query), dtype=np.float32)
            if len(self._items) >= self.size:
                self._items.pop(next(iter(self._items)))
        self._items[query] = vector  # at the end: the most recently used
        return vector
