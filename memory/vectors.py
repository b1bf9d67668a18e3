"""An index's vectors held in memory, for exact cosine KNN by one matrix-vector product.

sqlite-vec's `chunks_vec` stays the storage of record (and the fallback when no matrix is
loaded); this is a copy of it, normalized, loaded lazily at the first search
(memory.index_views) and kept in step with every write to `chunks_vec`. Ranking is the same
as vec0's cosine KNN: cosine = dot product of normalized vectors, best first, ties broken by
rowid.

Memory cost: 4 bytes per dimension per chunk, about 1.5 KiB a chunk at 384 dimensions (the
local model), so 15 MiB at 10k chunks and 150 MiB at 100k (plus up to 2x while growing).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["VectorMatrix", "merge_knn", "one_blas_thread"]

_blas_limited = False


def one_blas_thread() -> None:
    """Run numpy's BLAS on one thread, for the whole process, once.

    The KNN product is memory-bound: a second thread barely speeds it up. But OpenBLAS's
    worker threads busy-wait after every call, and on a two-core machine they then take a core
    from the query embedder's OpenMP team, which needs both: measured, memory_search at 10k
    chunks went from p50 54 / p95 127 ms to 29 / 39 ms with this cap.
    """
    global _blas_limited
    if _blas_limited:
        return
    _blas_limited = True
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a declared dependency; without it, only slower
        return
    threadpool_limits(limits=1, user_api="blas")


def _normalized(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # an all-zero vector stays zero: cosine 0 to everything
    normalized: np.ndarray = (rows / norms).astype(np.float32, copy=False)
    return normalized


class VectorMatrix:
    """Rowids and their normalized float32 vectors; add, remove and KNN by cosine."""

    def __init__(self, dim: int, capacity: int = 1024) -> None:
        one_blas_thread()
        self.dim = dim
        self._matrix = np.zeros((max(1, capacity), dim), dtype=np.float32)
        self._ids = np.zeros(max(1, capacity), dtype=np.int64)
        self._position: dict[int, int] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._position

    def _reserve(self, count: int) -> None:
        if count <= len(self._ids):
            return
        size = max(count, 2 * len(self._ids))
        matrix = np.zeros((size, self.dim), dtype=np.float32)
        matrix[: self._count] = self._matrix[: self._count]
        ids = np.zeros(size, dtype=np.int64)
        ids[: self._count] = self._ids[: self._count]
        self._matrix, self._ids = matrix, ids

    def add(self, rows: Iterable[tuple[int, bytes | np.ndarray]]) -> None:
        """Insert (rowid, vector) pairs, vectors as float32 blobs or arrays; replaces a rowid."""
        rows = list(rows)
        if not rows:
            return
        vectors = _normalized(
            np.stack(
                [
                    np.frombuffer(v, dtype=np.float32)
                    if isinstance(v, bytes | bytearray | memoryview)
                    else np.asarray(v, dtype=np.float32)
                    for _, v in rows
                ]
            ).reshape(len(rows), self.dim)
        )
        self._reserve(self._count + len(rows))
        for (rowid, _), vector in zip(rows, vectors, strict=True):
            rowid = int(rowid)
            at = self._position.get(rowid)
            if at is None:
                at = self._count
                self._count += 1
                self._ids[at] = rowid
                self._position[rowid] = at
            self._matrix[at] = vector

    def remove(self, rowids: Iterable[int]) -> None:
        """Drop rowids (unknown ones are ignored); the last row fills each hole."""
        for rowid in rowids:
            at = self._position.pop(int(rowid), None)
            if at is None:
                continue
            last = self._count - 1
            if at != last:
                moved = int(self._ids[last])
                self._matrix[at] = self._matrix[last]
                self._ids[at] = moved
                self._position[moved] = at
            self._count = last

    def knn(
        self, query: np.ndarray, k: int, part: int = 0, parts: int = 1
    ) -> list[tuple[int, float]]:
        """The k nearest rowids by cosine, best first, as (rowid, cosine).

        With `parts` > 1, only slice `part` of `parts` of the rows: the product is memory
        bound, so slices on separate threads (numpy releases the GIL) read the matrix at
        once; `merge_knn` then joins their answers into the whole one.
        """
        if self._count == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        size = -(-self._count // parts)
        start, stop = part * size, min(self._count, (part + 1) * size)
        if start >= stop:
            return []
        scores = self._matrix[start:stop] @ q
        ids = self._ids[start:stop]
        count = stop - start
        top = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
        order = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(scores[i])) for i in order]


def merge_knn(answers: Iterable[list[tuple[int, float]]], k: int) -> list[tuple[int, float]]:
    """The k best of several slices' answers, in `knn`'s order (cosine down, then rowid)."""
    return sorted(
        (pair for answer in answers for pair in answer), key=lambda pair: (-pair[1], pair[0])
    )[:k]
