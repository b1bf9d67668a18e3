"""Line vectors: which line of a chunk answers the query, measured in a whitened space.

A chunk's own vector finds the right neighbourhood, but in a conversation the answer is one
line among ten about other things, and the chunk's vector is their blur. So every line with
some content gets a vector of its own too (a line costs less to embed than it adds to its
chunk: attention grows with length), and a search scores the lines of its candidate chunks
against the query: the `lines` leg of the fusion, and the line the snippet is centred on.

Raw cosines between short lines are dominated by what all lines share: the local model gives
"Wait, seriously? Tell me more." a higher cosine to almost any question than the line that
answers it (measured: the answer line was in the top 5 lines for 22% of the proxy's
questions). The fix is standard and unsupervised: subtract the workspace's mean line vector
and whiten with the top principal directions of its lines (their covariance, shrunk toward
the identity so small directions are not blown up; WHITEN_DIMS kept). Fitted from the
workspace's own line vectors, no question is involved; the same answer line then ranks in the
top 5 for 71% (bench/recall_long.py, README "Recall").

Storage: one row per chunk in `chunk_lines`, the line numbers and their vectors as int8 with
a scale per line (388 bytes a line at 384 dimensions, a quarter of float32). Line vectors are
cached by text hash in the embedding cache's `line_embeddings` table, so an edited note
re-embeds only the lines that changed.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "LineEnsemble",
    "LineSpace",
    "content_lines",
    "join_numbers",
    "pack_vectors",
    "split_numbers",
    "unpack_vectors",
]

# Kept principal directions, and the shrinkage: each direction is divided by
# sqrt(variance + SHRINK x mean variance). Chosen on bench/recall_long.py (line rank of the
# answer line, 150 questions): 48 dims 69% / 64 dims 71% / 96 dims 69% top-5; shrink 3x 69% /
# 7x 71% / 15x 66%. ABTT (remove the top 4 directions, no scaling) 62%; mean removal only 45%.
WHITEN_DIMS = 64
SHRINK = 7.0
# Fewer line vectors than this: the covariance says nothing yet; plain cosine.
MIN_FIT_LINES = 32
# Lines sampled to fit the space (every k-th chunk row); refitted after this fraction changed.
FIT_SAMPLE_LINES = 40_000
REFIT_FRACTION = 0.1
MIN_LINE_CHARS = 3  # letters or digits a line needs to be worth a vector
# Hubness: even whitened, a line like "Did you win?" sits close to many lines and so to many
# questions. Each line's score is lowered by HUB_WEIGHT x the mean of its HUB_K highest
# similarities to a reference sample of the workspace's lines (itself excluded, copies of it
# included: a line said twenty times is a hub). Cross-domain similarity local scaling, with
# the query side left out (one query). Measured on bench/recall_long.py, answer line in the top
# 5 lines: 73% without, 83% at k=5 / weight 0.5 (k 10 / 20: 82 / 80%; weight 0.25 / 1.0:
# 81 / 81%); the whole search, top-1 / top-5: 44/75 without, 49/87 with (k 3-5, weight
# 0.4-0.6: 49-51 / 85-88). The reference is at most HUB_REFERENCE lines, evenly spread over
# the fit sample; a line's value is cached until the next fit.
HUB_K = 5
HUB_WEIGHT = 0.5
HUB_REFERENCE = 2048
# With a second line model (memory.minilm), a line's score is e5's plus this times the second
# model's, each in its own whitened space with its own hubness. bench/recall_long.py, top-1 /
# top-5 with the line leg at 3.0: weight 0.5 59/93, 1.0 55/92, 1.5 52/90 (e5 alone 49/87);
# the second model as a leg of its own in the fusion instead: 57-59 / 90-92.
SECOND_MODEL_WEIGHT = 0.5

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_WORD_CHARS = re.compile(r"\w", re.UNICODE)


def content_lines(text: str, numbers: list[int]) -> list[tuple[int, str]]:
    """(line number, text to embed) for the chunk's lines worth a vector, in order.

    `numbers` are the file line numbers of `text.split("\\n")`. A list marker is dropped
    (every bullet has one; it carries nothing). Lines with fewer than MIN_LINE_CHARS word
    characters ("---", "ok") get no vector.
    """
    out: list[tuple[int, str]] = []
    for number, raw in zip(numbers, text.split("\n"), strict=False):
        line = _BULLET.sub("", raw).strip()
        if len(_WORD_CHARS.findall(line)) >= MIN_LINE_CHARS:
            out.append((number, line))
    return out


def join_numbers(numbers: list[int] | tuple[int, ...]) -> str:
    """Line numbers as stored in the index ("3,4,7")."""
    return ",".join(str(n) for n in numbers)


def split_numbers(stored: str | None) -> list[int]:
    return [int(x) for x in (stored or "").split(",") if x]


def pack_vectors(vectors: np.ndarray) -> bytes:
    """Rows as int8 with a float32 scale each: [scales (4 x n)][int8 (dim x n)]."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.size == 0:
        return b""
    scales = np.maximum(np.abs(vectors).max(axis=1), 1e-12) / 127.0
    quantized = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    packed: bytes = scales.astype(np.float32).tobytes() + quantized.tobytes()
    return packed


def unpack_vectors(blob: bytes, rows: int, dim: int) -> np.ndarray:
    if rows == 0 or not blob:
        return np.zeros((0, dim), dtype=np.float32)
    scales = np.frombuffer(blob, dtype=np.float32, count=rows)
    quantized = np.frombuffer(blob, dtype=np.int8, offset=4 * rows, count=rows * dim)
    return quantized.reshape(rows, dim).astype(np.float32) * scales[:, None]


def _normalize(x: np.ndarray) -> np.ndarray:
    normalized: np.ndarray = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return normalized


LineKey = tuple[int, int]  # (chunk id, line number)


@dataclass
class LineSpace:
    """The whitening fitted on one index's line vectors (identity until enough lines), with
    the reference lines that measure each line's hubness."""

    mean: np.ndarray | None = None
    transform: np.ndarray | None = None  # dim x WHITEN_DIMS
    fitted_lines: int = 0
    reference: np.ndarray | None = None  # whitened, normalized rows
    reference_columns: dict[LineKey, int] = field(default_factory=dict)
    hubs: dict[LineKey, float] = field(default_factory=dict)  # computed on demand

    @classmethod
    def fit(cls, vectors: np.ndarray, keys: list[LineKey] | None = None) -> LineSpace:
        vectors = np.asarray(vectors, dtype=np.float64)
        if len(vectors) < MIN_FIT_LINES:
            return cls(fitted_lines=len(vectors))
        mean = vectors.mean(axis=0)
        centered = vectors - mean
        covariance = centered.T @ centered / len(centered)
        variances, directions = np.linalg.eigh(covariance)  # ascending
        order = np.argsort(variances)[::-1][:WHITEN_DIMS]
        shrink = SHRINK * max(float(variances.mean()), 1e-12)
        transform = directions[:, order] / np.sqrt(np.maximum(variances[order], 0.0) + shrink)
        space = cls(mean.astype(np.float32), transform.astype(np.float32), len(vectors))
        picked = np.linspace(0, len(vectors) - 1, min(HUB_REFERENCE, len(vectors))).astype(int)
        space.reference = space.project(vectors[picked])
        if keys is not None:
            space.reference_columns = {keys[row]: column for column, row in enumerate(picked)}
        return space

    def hubness(self, projected: np.ndarray, keys: list[LineKey]) -> np.ndarray:
        """Each line's mean similarity to its HUB_K nearest reference lines (not itself)."""
        if self.reference is None or len(self.reference) <= HUB_K:
            return np.zeros(len(keys), dtype=np.float32)
        todo = [i for i, key in enumerate(keys) if key not in self.hubs]
        if todo:
            similarity = projected[todo] @ self.reference.T
            for row, i in enumerate(todo):
                column = self.reference_columns.get(keys[i])
                if column is not None:
                    similarity[row, column] = -1.0
            nearest = np.partition(similarity, -HUB_K, axis=1)[:, -HUB_K:]
            for i, value in zip(todo, nearest.mean(axis=1), strict=True):
                self.hubs[keys[i]] = float(value)
        return np.asarray([self.hubs[key] for key in keys], dtype=np.float32)

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Rows mapped into the whitened space, normalized (cosine = dot product)."""
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if self.mean is None or self.transform is None:
            return _normalize(vectors)
        return _normalize((vectors - self.mean) @ self.transform)

    def forget(self, chunk_ids: set[int]) -> None:
        """Drop what is remembered about these chunks' lines (deleted; ids may be reused)."""
        self.hubs = {key: value for key, value in self.hubs.items() if key[0] not in chunk_ids}
        self.reference_columns = {
            key: column for key, column in self.reference_columns.items() if key[0] not in chunk_ids
        }

    def scores(
        self, lines: np.ndarray, query: np.ndarray, keys: list[LineKey] | None = None
    ) -> np.ndarray:
        """Cosine to the query in the whitened space; with `keys`, less each line's hubness."""
        if len(lines) == 0:
            return np.zeros(0, dtype=np.float32)
        projected = self.project(lines)
        scores: np.ndarray = projected @ self.project(query)[0]
        if keys is not None:
            scores = scores - HUB_WEIGHT * self.hubness(projected, keys)
        return scores


@dataclass
class LineEnsemble:
    """Line vectors of several models side by side in one row (e5's first, then the second
    model's), each part scored in its own `LineSpace`; a line's score is their weighted sum.

    With one model it is exactly that model's `LineSpace`.
    """

    spaces: list[LineSpace]
    widths: list[int]
    weights: list[float]

    @classmethod
    def fit(
        cls, vectors: np.ndarray, keys: list[LineKey] | None = None, widths: list[int] | None = None
    ) -> LineEnsemble:
        vectors = np.asarray(vectors, dtype=np.float32)
        widths = widths or [vectors.shape[1]]
        if sum(widths) != vectors.shape[1]:
            raise ValueError(f"line rows have {vectors.shape[1]} columns, models {widths}")
        weights = [1.0] + [SECOND_MODEL_WEIGHT] * (len(widths) - 1)
        return cls(
            [LineSpace.fit(part, keys) for part in _split(vectors, widths)], list(widths), weights
        )

    @property
    def fitted_lines(self) -> int:
        return self.spaces[0].fitted_lines

    def forget(self, chunk_ids: set[int]) -> None:
        for space in self.spaces:
            space.forget(chunk_ids)

    def scores(
        self, lines: np.ndarray, query: np.ndarray, keys: list[LineKey] | None = None
    ) -> np.ndarray:
        """Each line's weighted sum of its models' whitened, hubness-corrected cosines."""
        lines = np.atleast_2d(np.asarray(lines, dtype=np.float32))
        if len(lines) == 0:
            return np.zeros(0, dtype=np.float32)
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        total = np.zeros(len(lines), dtype=np.float32)
        for space, weight, part, asked in zip(
            self.spaces,
            self.weights,
            _split(lines, self.widths),
            _split(query[None], self.widths),
            strict=True,
        ):
            # A part missing (the line model failed on the query, or has no say on it) or
            # all zeros: that model has no opinion on this query.
            if asked.size and asked.any():
                total += weight * space.scores(part, asked[0], keys)
        return total


def _split(matrix: np.ndarray, widths: list[int]) -> list[np.ndarray]:
    """The column blocks of `matrix` of these widths, left to right."""
    edges = np.cumsum([0, *widths])
    return [matrix[:, int(a) : int(b)] for a, b in itertools.pairwise(edges)]
