"""What a recall index keeps in memory beside its file, for searching it fast.

- the vectors of `chunks_vec` as one matrix for the vector leg (memory.vectors; about 1.5 KiB
  a chunk at 384 dimensions): loaded at the first search, kept in step with every write to
  `chunks_vec`; None until loaded (sqlite-vec's KNN is used then);
- the whitening of the line vectors (memory.lines), fitted at the first search and again once
  REFIT_FRACTION of the lines changed;
- the word leg's document frequencies (memory.search.TermStats), new after each sync.

The sync and the embedding queue tell the views what they wrote; a rebuild drops them all.
Every method runs with the index lock held.
"""

from __future__ import annotations

import asyncio

import aiosqlite
import numpy as np

from memory.embedding_cache import EmbeddingCache
from memory.lines import (
    FIT_SAMPLE_LINES,
    MIN_FIT_LINES,
    REFIT_FRACTION,
    LineEnsemble,
    split_numbers,
    unpack_vectors,
)
from memory.search import TermStats
from memory.vectors import VectorMatrix

__all__ = ["IndexViews"]


class IndexViews:
    """The in-memory views of one index, whose models `cache` holds."""

    def __init__(self, cache: EmbeddingCache) -> None:
        self._cache = cache
        self._vectors: VectorMatrix | None = None
        self._line_space: LineEnsemble | None = None
        self._lines_changed = 0  # line vectors written or deleted since the last fit
        self.terms = TermStats()

    @property
    def vectors(self) -> VectorMatrix | None:
        """The matrix of chunk vectors; None: not loaded in this process."""
        return self._vectors

    @property
    def line_space(self) -> LineEnsemble | None:
        """The fitted line whitening; None: not fitted in this process."""
        return self._line_space

    def reset(self) -> None:
        """The index is being rebuilt: nothing held describes the new file."""
        self._vectors = None
        self._line_space = None
        self.terms = TermStats()

    def drop_vectors(self) -> None:
        """The index is closing: free the matrix (a later search loads it again)."""
        self._vectors = None

    def new_terms(self) -> None:
        """A sync changed the word index: document frequencies are counted again."""
        self.terms = TermStats()

    def vectors_added(self, rows: list[tuple[int, bytes]]) -> None:
        """(chunk id, stored vector) rows just inserted into `chunks_vec`."""
        if self._vectors is not None and rows:
            self._vectors.add(rows)

    def lines_added(self, count: int) -> None:
        self._lines_changed += count

    def chunks_removed(self, ids: list[int], lines: int) -> None:
        """These chunks, with `lines` line vectors among them, were just deleted."""
        self._lines_changed += lines
        if self._line_space is not None:
            self._line_space.forget(set(ids))
        if self._vectors is not None:
            self._vectors.remove(ids)

    async def loaded_vectors(self, db: aiosqlite.Connection) -> VectorMatrix | None:
        """The in-memory copy of chunks_vec, read from it on first use."""
        embedder = self._cache.embedder
        if self._vectors is None and embedder is not None:
            rows = list(await db.execute_fetchall("SELECT rowid, embedding FROM chunks_vec"))
            matrix = VectorMatrix(embedder.dim, capacity=len(rows) + 1024)
            matrix.add((int(r[0]), r[1]) for r in rows)
            self._vectors = matrix
        return self._vectors

    async def fitted_lines(self, db: aiosqlite.Connection) -> LineEnsemble:
        """The whitening of this index's line vectors, refitted when REFIT_FRACTION of them
        changed since the last fit."""
        space = self._line_space
        if space is not None and self._lines_changed <= max(
            MIN_FIT_LINES, REFIT_FRACTION * space.fitted_lines
        ):
            return space
        assert self._cache.embedder is not None
        dim, widths = self._cache.line_dim, [model.dim for model in self._cache.line_models]
        counted = list(await db.execute_fetchall("SELECT count(*) FROM chunk_lines"))
        rows = int(counted[0][0])
        # Every k-th chunk's lines (about ten a chunk): a sample the same on every run.
        step = max(1, rows * 10 // FIT_SAMPLE_LINES)
        sample = await db.execute_fetchall(
            "SELECT chunk_id, numbers, vectors FROM chunk_lines WHERE chunk_id % ? = 0 "
            "ORDER BY chunk_id",
            (step,),
        )
        self._lines_changed = 0

        def fit() -> LineEnsemble:
            keys: list[tuple[int, int]] = []
            blocks = []
            for chunk_id, numbers, blob in sample:
                found = split_numbers(numbers)
                if found:
                    keys.extend((int(chunk_id), n) for n in found)
                    blocks.append(unpack_vectors(blob, len(found), dim))
            return LineEnsemble.fit(
                np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32),
                keys,
                widths,
            )

        self._line_space = await asyncio.to_thread(fit)
        return self._line_space
