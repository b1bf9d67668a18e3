"""The search job of a recall index: query vectors, the in-memory vectors and line space,
and `memory.search.hybrid_search` under the index lock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import aiosqlite
import numpy as np

from memory import search as search_mod
from memory.defaults import (
    DEFAULT_MAX_RESULTS,
)
from memory.embedders import EmbedderError
from memory.index_core import DB_ERRORS, IndexCore
from memory.lines import (
    FIT_SAMPLE_LINES,
    MIN_FIT_LINES,
    REFIT_FRACTION,
    LineEnsemble,
    split_numbers,
    unpack_vectors,
)
from memory.minilm import english_enough
from memory.search import SearchResponse
from memory.vectors import VectorMatrix

log = logging.getLogger(__name__)


class SearchJob(IndexCore):
    """Answering searches from the index."""

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
        snippet_chars: int = search_mod.SNIPPET_CHARS,
    ) -> SearchResponse:
        """Search the index; `more` are other phrasings of the query, fused with it;
        `snippet_chars` caps what one result shows."""
        await self.refresh()
        self._queries_waiting += 1
        try:
            return await self._search_locked(query, max_results, min_score, list(more),
                                             snippet_chars)
        finally:
            self._queries_waiting -= 1

    async def _search_locked(self, query: str, max_results: int, min_score: float,
                             more: list[str], snippet_chars: int) -> SearchResponse:
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
                    snippet_chars=snippet_chars,
                )
            except DB_ERRORS as exc:
                log.warning("recall index failed during search (%s); rebuilding", exc)
                self.mark_dirty()
                await self._rebuild()
                assert self._db is not None
                response = await search_mod.hybrid_search(
                    self._db, query, qvec, max_results=max_results, min_score=min_score,
                    today=self._today(), half_life_days=self.half_life_days, more=others,
                    snippet_chars=snippet_chars,
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
            rows = list(await db.execute_fetchall("SELECT rowid, embedding FROM chunks_vec"))
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
        counted = list(await db.execute_fetchall("SELECT count(*) FROM chunk_lines"))
        rows = int(counted[0][0])
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
