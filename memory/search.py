"""Hybrid search: a vector leg and keyword legs, fused, aged, diversified.

Legs, each returning a candidate pool of `POOL` chunks:
- vector: KNN by cosine over the query embedding (a matrix product over the vectors held in
  memory, see `memory.vectors`; sqlite-vec's KNN when they are not loaded);
- words: FTS5 BM25 over the word index (content words ORed, identifiers as phrases, CJK as
  bigrams, see `memory.text`; words in most chunks left out, see `COMMON_WORD_FRACTION`);
- trigram: FTS5 BM25 over the trigram index (identifiers and CJK runs of 3+ characters as
  exact substrings).

Fusion is weighted reciprocal rank fusion (RRF): a chunk scores sum(w / (K + rank)) over the
legs that found it, scaled so that rank 1 in every leg is 1.0. Ranks, unlike raw scores, need no
calibration between BM25 and the local model's compressed cosines (unrelated texts score about
0.75 there), and a chunk both legs agree on rises to the top. The baseline it replaced
(0.7 x cosine + 0.3 x BM25 mapped by r/(1+r), AND queries, min score 0.35) is kept as
`openclaw_fusion` for the benchmark.

Dated daily notes fade with age by a factor that never drops below `DECAY_FLOOR`, so an old
exact match (found by several legs) still beats a recent vague one; MEMORY.md, USER.md and
undated notes never fade. Maximal marginal relevance then pushes near-duplicates down.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from memory.defaults import DEFAULT_HALF_LIFE_DAYS, DEFAULT_MAX_RESULTS
from memory.text import query_terms, trigram_query, word_query
from memory.vectors import VectorMatrix

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "SearchResponse",
    "SearchResult",
    "hybrid_search",
    "openclaw_fusion",
    "rrf_fusion",
]

MAX_RESULTS = 50
SNIPPET_CHARS = 700
POOL = 40
RRF_K = 20
LEG_WEIGHTS = {"vector": 1.0, "words": 0.5, "trigram": 0.5}
# A word found in more than this fraction of the chunks is left out of the OR query. FTS5's
# BM25 gives such a word an IDF of ~0 (log((N - n + 0.5) / (n + 0.5)) <= 0 is clamped to
# 1e-6), so it changes no ranking among chunks that match another term; it only makes FTS5
# walk its long posting list and pad the pool with chunks scoring ~0.
COMMON_WORD_FRACTION = 0.5
# Below this many chunks the word leg is fast anyway: the query is left as it is.
COMMON_WORD_MIN_CHUNKS = 1000
DECAY_FLOOR = 0.8
MMR_LAMBDA = 0.9


@dataclass(frozen=True)
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str  # "memory" | "sessions"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "source": self.source,
        }


@dataclass
class SearchResponse:
    results: list[SearchResult] = field(default_factory=list)
    mode: str = "hybrid"  # "hybrid" | "keyword-only"
    note: str = ""


Legs = dict[str, list[tuple[int, float]]]  # leg -> [(chunk id, raw score)], best first


class TermStats:
    """Document frequencies in the word index, looked up via fts5vocab and cached.

    One per index state: `MemoryIndex` starts a new one after every sync.
    """

    def __init__(self, fraction: float = COMMON_WORD_FRACTION) -> None:
        self.fraction = fraction
        self.chunks: int | None = None
        self.doc_freq: dict[str, int] = {}

    async def common(self, db: Any, words: list[str]) -> set[str]:
        """The words found in more than `fraction` of the chunks."""
        missing = [w for w in dict.fromkeys(words) if w not in self.doc_freq]
        if self.chunks is None or missing:
            await db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_vocab "
                "USING fts5vocab(main, chunks_fts, 'row')"
            )
        if self.chunks is None:
            self.chunks = int((await db.execute_fetchall("SELECT count(*) FROM chunks"))[0][0])
        if missing:
            rows = await db.execute_fetchall(
                " UNION ALL ".join(
                    ["SELECT term, doc FROM temp.chunks_fts_vocab WHERE term = ?"] * len(missing)
                ),
                missing,
            )
            found = {str(r[0]): int(r[1]) for r in rows}
            for word in missing:
                self.doc_freq[word] = found.get(word, 0)
            if len(self.doc_freq) > 10_000:
                self.doc_freq.clear()
        if self.chunks < COMMON_WORD_MIN_CHUNKS:
            return set()
        limit = self.fraction * self.chunks
        common = {w for w in words if self.doc_freq.get(w, 0) > limit}
        if not any(self.doc_freq.get(w, 0) for w in words if w not in common):
            return set()  # nothing else would match: the common words still find chunks
        return common


async def _fts(db: Any, table: str, match: str, pool: int) -> list[tuple[int, float]]:
    if not match:
        return []
    try:
        rows = await db.execute_fetchall(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
            "ORDER BY rank LIMIT ?",
            (match, pool),
        )
    except Exception as exc:  # a query FTS5 cannot parse: no keyword leg, not a failure
        if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
            return []
        raise
    return [(int(r[0]), -float(r[1])) for r in rows]


async def _vector(db: Any, qvec: np.ndarray, pool: int) -> list[tuple[int, float]]:
    rows = await db.execute_fetchall(
        "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?",
        (np.asarray(qvec, dtype=np.float32).tobytes(), pool),
    )
    return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


async def gather_legs(
    db: Any, query: str, qvec: np.ndarray | None, pool: int = POOL, *, and_words: bool = False,
    vectors: VectorMatrix | None = None, terms: TermStats | None = None,
) -> Legs:
    """Every leg's candidates. `and_words` builds the baseline's AND query instead of OR.

    With `vectors` (the index's vectors in memory) the vector leg is a matrix product, off
    the event loop; without, it is sqlite-vec's KNN. Both rank the same. With `terms`, words
    in more than a fraction of the chunks are left out of the word query.
    """
    drop: set[str] = set()
    if terms is not None and not and_words:
        words = query_terms(query)[0]
        if words:
            drop = await terms.common(db, words)
    match = word_query(query, drop)
    if and_words:
        match = match.replace(" OR ", " AND ")
    legs: Legs = {}
    if match:
        legs["words"] = await _fts(db, "chunks_fts", match, pool)
    trigram = trigram_query(query)
    if trigram:
        legs["trigram"] = await _fts(db, "chunks_tri", trigram, pool)
    if qvec is not None:
        if vectors is not None:
            legs["vector"] = await asyncio.to_thread(vectors.knn, qvec, pool)
        else:
            legs["vector"] = await _vector(db, qvec, pool)
    return legs


def rrf_fusion(legs: Legs, weights: dict[str, float] | None = None, k: int = RRF_K
               ) -> dict[int, float]:
    """Weighted reciprocal rank fusion, scaled to [0, 1] (1.0: first in every leg present)."""
    weights = weights or LEG_WEIGHTS
    scores: dict[int, float] = {}
    # Scaled by the legs that ran, found something or not: a chunk only one leg likes scores
    # lower than one every leg agrees on.
    top = sum(weights.get(name, 1.0) for name in legs) / (k + 1) or 1.0
    for name in legs:
        weight = weights.get(name, 1.0)
        for rank, (chunk_id, _) in enumerate(legs[name], start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (k + rank)
    return {chunk_id: score / top for chunk_id, score in scores.items()}


def openclaw_fusion(legs: Legs) -> dict[int, float]:
    """The baseline: 0.7 x cosine + 0.3 x r/(1+r) of BM25 (word leg only)."""
    scores: dict[int, float] = {}
    for chunk_id, cosine in legs.get("vector", []):
        scores[chunk_id] = 0.7 * max(cosine, 0.0)
    for chunk_id, relevance in legs.get("words", []):
        r = max(relevance, 0.0)
        scores[chunk_id] = scores.get(chunk_id, 0.0) + 0.3 * (r / (1.0 + r))
    return scores


def decay(day: str | None, today: date, half_life_days: float) -> float:
    """Age factor of a dated daily note: 1.0 when new, falling to DECAY_FLOOR, never below."""
    if not day or half_life_days <= 0:
        return 1.0
    try:
        age = (today - date.fromisoformat(day)).days
    except ValueError:
        return 1.0
    if age <= 0:
        return 1.0
    return DECAY_FLOOR + (1.0 - DECAY_FLOOR) * 0.5 ** (age / half_life_days)


_TOKENS = re.compile(r"\w+", re.UNICODE)


def _token_set(text: str) -> frozenset[str]:
    return frozenset(t.lower() for t in _TOKENS.findall(text))


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr(ranked: list[tuple[int, float]], texts: dict[int, str], limit: int,
        lam: float | None = None) -> list[tuple[int, float]]:
    """Pick `limit` of the ranked (id, score) pairs, trading relevance for novelty."""
    lam = MMR_LAMBDA if lam is None else lam
    tokens = {chunk_id: _token_set(texts[chunk_id]) for chunk_id, _ in ranked}
    chosen: list[tuple[int, float]] = []
    rest = list(ranked)
    while rest and len(chosen) < limit:
        best_index, best_value = 0, -1e9
        for index, (chunk_id, score) in enumerate(rest):
            overlap = max((_similarity(tokens[chunk_id], tokens[c]) for c, _ in chosen),
                          default=0.0)
            value = lam * score - (1.0 - lam) * overlap
            if value > best_value:
                best_index, best_value = index, value
        chosen.append(rest.pop(best_index))
    return chosen


def snippet(text: str, query: str, limit: int = SNIPPET_CHARS) -> str:
    """The chunk text, or a window of it around the first query term when it is too long."""
    if len(text) <= limit:
        return text
    words, bigrams, identifiers = query_terms(query)
    lowered = text.lower()
    positions = [lowered.find(t.lower()) for t in (*identifiers, *words, *bigrams)]
    hits = [p for p in positions if p >= 0]
    start = max(0, min(hits) - limit // 4) if hits else 0
    start = min(start, len(text) - limit)
    piece = text[start : start + limit]
    if start > 0:
        piece = "…" + piece[1:]
    if start + limit < len(text):
        piece = piece[:-1] + "…"
    return piece


async def fetch_chunks(db: Any, ids: list[int]) -> dict[int, tuple[Any, ...]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = await db.execute_fetchall(
        f"SELECT id, path, source, start_line, end_line, day, text FROM chunks "
        f"WHERE id IN ({marks})",
        ids,
    )
    return {int(row[0]): tuple(row) for row in rows}


async def hybrid_search(
    db: Any,
    query: str,
    qvec: np.ndarray | None,
    *,
    max_results: int = DEFAULT_MAX_RESULTS,
    min_score: float = 0.0,
    today: date,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    vectors: VectorMatrix | None = None,
    terms: TermStats | None = None,
) -> SearchResponse:
    limit = max(1, min(int(max_results), MAX_RESULTS))
    if not query.strip():
        return SearchResponse(note="empty query")
    legs = await gather_legs(db, query, qvec, max(POOL, 4 * limit), vectors=vectors,
                             terms=terms)
    fused = rrf_fusion(legs)
    rows = await fetch_chunks(db, list(fused))
    ranked = sorted(
        ((cid, score * decay(rows[cid][5], today, half_life_days))
         for cid, score in fused.items() if cid in rows),
        key=lambda item: -item[1],
    )[: 4 * limit]
    picked = mmr(ranked, {cid: rows[cid][6] for cid, _ in ranked}, limit)
    results = [
        SearchResult(
            path=rows[cid][1],
            start_line=int(rows[cid][3]),
            end_line=int(rows[cid][4]),
            score=score,
            snippet=snippet(rows[cid][6], query),
            source=rows[cid][2],
        )
        for cid, score in picked
        if score >= min_score
    ]
    note = ""
    if not results:
        note = "no matching memory" if not ranked else f"no result scored {min_score} or more"
    return SearchResponse(results, "hybrid" if qvec is not None else "keyword-only", note)
