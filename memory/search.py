"""Hybrid search: a vector leg and keyword legs, fused, aged, diversified.

Legs, each returning a candidate pool of `POOL` chunks:
- vector: KNN by cosine over the query embedding (a matrix product over the vectors held in
  memory, see `memory.vectors`; sqlite-vec's KNN when they are not loaded);
- words: FTS5 BM25 over the word index (content words ORed, identifiers as phrases, CJK as
  bigrams, see `memory.text`; a large index leaves out the query's most common words, see
  `WORD_ROW_BUDGET`);
- trigram: FTS5 BM25 over the trigram index (identifiers and CJK runs of 3+ characters as
  exact substrings);
- lines: the candidates of the legs above ranked by their best line, each line's vector
  scored against the query in the workspace's whitened line space (see `memory.lines`). It
  finds the one line that answers among ten about other things, and it names that line: the
  result's `line`, where its snippet is centred.

Fusion is weighted reciprocal rank fusion (RRF): a chunk scores sum(w / (K + rank)) over the
legs that found it, scaled so that rank 1 in every leg is 1.0. Ranks, unlike raw scores, need no
calibration between BM25 and the local model's compressed cosines (unrelated texts score about
0.75 there), and a chunk both legs agree on rises to the top. (The baseline it replaced,
0.7 x cosine + 0.3 x BM25 mapped by r/(1+r) over AND queries, lives on in bench/recall.py.)

Dated daily notes fade with age by a factor that never drops below `DECAY_FLOOR`, so an old
exact match (found by several legs) still beats a recent vague one; MEMORY.md, USER.md and
undated notes never fade. Maximal marginal relevance then pushes near-duplicates down.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from memory.dates import DateWindow, query_windows
from memory.defaults import DEFAULT_HALF_LIFE_DAYS, DEFAULT_MAX_RESULTS, MAX_RESULTS
from memory.lines import LineEnsemble, split_numbers, unpack_vectors
from memory.passages import passage
from memory.text import fts_phrase, query_terms, trigram_query, word_query
from memory.vectors import VectorMatrix, merge_knn

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "MAX_RESULTS",
    "SearchResponse",
    "SearchResult",
    "fts_leg",
    "hybrid_search",
    "rrf_fusion",
]

# What one result shows at most. bench/recall_locomo.py at the final weights (snip@5 / hit@1,
# mean characters a result shows): 700: 0.854/0.608 (629); 850: 0.874/0.639 (776); 1,000:
# 0.901/0.671 (925). Chunks as results at 700 showed 514 characters on average.
SNIPPET_CHARS = 850
POOL = 40
RRF_K = 20
# Chosen on real conversations (bench/recall_locomo.py, the LoCoMo development half, 760
# questions; snip@5 / hit@1 with dates and passages on, 1,000-character snippets while
# sweeping): lines 5.0 and words 0.5 (the weights the generated proxy had chosen) 0.837/0.578;
# words 1.0: 0.847/0.592; lines 3.0: 0.847/0.601; both: 0.868/0.617; lines 2.0 / 1.5 / 1.0 /
# 0.5 with words 1.0: 0.889/0.634, 0.899/0.649, 0.901/0.662, 0.904/0.661; lines 1.0 with
# words 1.5: 0.901/0.671; lines 8.0: 0.824/0.546. The line leg still picks each result's
# line (memory.passages) whatever its weight.
LEG_WEIGHTS = {"vector": 1.0, "words": 1.5, "trigram": 0.5, "lines": 1.0}
# The word leg's cost is FTS5 scoring every matching row with BM25 (about 1.3 us a row on
# our 2-core target, more right after the query embedding has emptied the caches; finding
# the rows alone is ten times cheaper), so a query's cost is the sum of its words' document
# frequencies. Words are kept rarest first while that sum stays within WORD_ROW_BUDGET, and
# a word in at most RARE_WORD_FRACTION of the chunks is always kept. What is left out is the
# query's most common words, whose BM25 weight is small (IDF = ln((N - n + 0.5) / (n + 0.5)):
# 0.85 for a word in 30% of the chunks against 4.6 for one in 1%); the vector leg still sees
# the whole question. Without a vector leg (keyword-only) the rarest word is always kept.
WORD_ROW_BUDGET = 2000
RARE_WORD_FRACTION = 0.05
# Below this many chunks the word leg is fast anyway: the query is left as it is.
COMMON_WORD_MIN_CHUNKS = 1000
# A large vector product is split over this many threads, each taking at least
# VECTOR_ROWS_PER_THREAD rows: it is memory bound, and two threads reading halves of the
# matrix finish 100k x 384 in 13 ms against 22 ms for one (measured on 2 cores).
VECTOR_THREADS = 2
VECTOR_ROWS_PER_THREAD = 25_000
# A question that names a date (memory.dates): the chunks of the notes dated around it join
# the line leg's candidates when there are at most DATE_CANDIDATES of them, and their fused
# score is multiplied by DATE_BOOST. At most DATE_SCAN_LIMIT of them are looked up.
# bench/recall_locomo.py (92 of its 760 questions name a year; snip@5): at the proxy's
# weights, chunks as results, no dates 0.745, DATE_BOOST 1.5 0.761; with passages 1.5 / 2.5
# 0.743 / 0.753; with 1,000-character passages 2.5 / 4.0 0.837 / 0.839, and at lines 2.0,
# words 1.0: 1.5 / 2.5 0.884 / 0.889.
DATE_BOOST = 2.5
DATE_CANDIDATES = 400
DATE_SCAN_LIMIT = 20_000
PASSAGES = True  # a result with a known best line shows the passage around it
# The first result shows up to FIRST_RESULT_SCALE x `snippet_chars` and the others share what
# is left of limit x `snippet_chars` (each keeping at least MIN_OTHER_SHARE of it), so a search
# shows as many characters as before but the result most likely to answer brings more of its
# conversation. bench/recall_locomo.py (LoCoMo dev, 5 results of 850 on average; snip@5 /
# hit@1; characters a search shows 3,878-3,903 throughout): scale 1.0 0.884/0.645, 1.25
# 0.891/0.674, 1.5 0.897/0.689, 1.7 0.899/0.707, 2.0 0.899/0.714, 2.5 0.893/0.733. Chosen by
# snip@5 (what the model reads), leave-one-conversation-out: 1.5-2.0 chosen on four
# conversations, 0.898/0.708 on the fifth (mean of five). hit@1 counts the first result's
# line range, which is wider now: its gain is partly that width (docs/recall.md, round 4).
FIRST_RESULT_SCALE = 1.7
MIN_OTHER_SHARE = 0.8
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
    line: int | None = None  # the line that matched best (line vectors), if known
    # Absolute evidence beside the rank-based `score` (which is relative: some chunk is
    # always first): the best cosine of the query with the chunk (vector leg) and of the
    # query with its best line (line leg), None when that leg did not find it. Auto-recall
    # decides by them whether a hit is worth showing unasked (gateway/pipeline/auto_recall.py).
    cosine: float | None = None
    line_score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "source": self.source,
            **({"line": self.line} if self.line is not None else {}),
        }


@dataclass
class SearchResponse:
    results: list[SearchResult] = field(default_factory=list)
    mode: str = "hybrid"  # "hybrid" | "keyword-only"
    note: str = ""
    pending: int = 0  # chunks of the index without a vector yet (found by keywords only)


Legs = dict[str, list[tuple[int, float]]]  # leg -> [(chunk id, raw score)], best first


class TermStats:
    """Document frequencies in the word index, counted by FTS5 itself and cached.

    Counted with a MATCH (no ranking: about a tenth of the cost of scoring the same rows), so
    the word goes through the index's own tokenizer: "lessons" counts the chunks the stemmed
    index files under "lesson". One per index state: memory.index_views starts a new one
    after every sync.
    """

    def __init__(
        self, budget: int = WORD_ROW_BUDGET, rare_fraction: float = RARE_WORD_FRACTION
    ) -> None:
        self.budget = budget
        self.rare_fraction = rare_fraction
        self.chunks: int | None = None
        self.doc_freq: dict[str, int] = {}

    async def leave_out(self, db: Any, words: list[str], *, keep_rarest: bool = True) -> set[str]:
        """The query words too common to pay for (see WORD_ROW_BUDGET)."""
        if self.chunks is None:
            self.chunks = int((await db.execute_fetchall("SELECT count(*) FROM chunks"))[0][0])
        if self.chunks < COMMON_WORD_MIN_CHUNKS:
            return set()
        missing = [w for w in dict.fromkeys(words) if w not in self.doc_freq]
        if missing:
            counts = (
                await db.execute_fetchall(
                    "SELECT "
                    + ", ".join(
                        ["(SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?)"]
                        * len(missing)
                    ),
                    [fts_phrase(w) for w in missing],
                )
            )[0]
            if len(self.doc_freq) > 10_000:
                self.doc_freq.clear()
            for word, count in zip(missing, counts, strict=True):
                self.doc_freq[word] = int(count)
        rare = self.rare_fraction * self.chunks
        ranked = sorted((self.doc_freq.get(w, 0), w) for w in dict.fromkeys(words))
        ranked = [(freq, w) for freq, w in ranked if freq > 0]  # matching nothing costs nothing
        rows, left_out = 0, set()
        for position, (freq, word) in enumerate(ranked):
            if (position == 0 and keep_rarest) or freq <= rare or rows + freq <= self.budget:
                rows += freq
            else:
                left_out.add(word)
        return left_out


async def fts_leg(db: Any, table: str, match: str, pool: int) -> list[tuple[int, float]]:
    """The best `pool` rows of an FTS5 table for a MATCH expression, as (rowid, -bm25)."""
    if not match:
        return []
    try:
        rows = await db.execute_fetchall(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
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


async def keyword_legs(
    db: Any,
    query: str,
    pool: int = POOL,
    *,
    terms: TermStats | None = None,
    alone: bool = True,
) -> Legs:
    """The word and trigram legs.

    With `terms`, the query's most common words are left out of the word query (see
    WORD_ROW_BUDGET); all of them only when not `alone` (a vector leg runs beside).
    """
    drop: set[str] = set()
    if terms is not None:
        words = query_terms(query)[0]
        if words:
            drop = await terms.leave_out(db, words, keep_rarest=alone)
    match = word_query(query, drop, keep_some=alone)
    legs: Legs = {}
    if match:
        legs["words"] = await fts_leg(db, "chunks_fts", match, pool)
    trigram = trigram_query(query)
    if trigram:
        legs["trigram"] = await fts_leg(db, "chunks_tri", trigram, pool)
    return legs


async def vector_leg(
    db: Any, qvec: np.ndarray, pool: int = POOL, vectors: VectorMatrix | None = None
) -> list[tuple[int, float]]:
    """KNN by cosine: a matrix product over `vectors` (the index's vectors in memory) on
    worker threads, or sqlite-vec's KNN without them. Both rank the same."""
    if vectors is None:
        return await _vector(db, qvec, pool)
    parts = max(1, min(VECTOR_THREADS, len(vectors) // VECTOR_ROWS_PER_THREAD))
    if parts == 1:
        return await asyncio.to_thread(vectors.knn, qvec, pool)
    answers = await asyncio.gather(
        *(asyncio.to_thread(vectors.knn, qvec, pool, part, parts) for part in range(parts))
    )
    return merge_knn(answers, pool)


async def line_leg(
    db: Any, candidates: list[int], qvec: np.ndarray, space: LineEnsemble
) -> tuple[list[tuple[int, float]], dict[int, int]]:
    """The candidates ranked by their best line's score in `space`, and that line by chunk.

    `qvec` is the query as every line model embeds it, side by side like the line rows."""
    if not candidates:
        return [], {}
    dim = sum(space.widths)
    rows = await db.execute_fetchall(
        f"SELECT chunk_id, numbers, vectors FROM chunk_lines WHERE chunk_id IN "
        f"({','.join('?' * len(candidates))})",
        candidates,
    )
    owners: list[int] = []
    numbers: list[int] = []
    blocks: list[np.ndarray] = []
    for chunk_id, stored, blob in rows:
        found = split_numbers(stored)
        if found:
            owners.extend([int(chunk_id)] * len(found))
            numbers.extend(found)
            blocks.append(unpack_vectors(blob, len(found), dim))
    if not blocks:
        return [], {}
    scores = space.scores(np.concatenate(blocks), qvec, list(zip(owners, numbers, strict=True)))
    best: dict[int, tuple[float, int]] = {}
    for position in np.argsort(-scores, kind="stable"):
        owner = owners[position]
        if owner not in best:
            best[owner] = (float(scores[position]), numbers[position])
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))
    return [(cid, score) for cid, (score, _) in ranked], {cid: n for cid, (_, n) in best.items()}


async def gather_legs(
    db: Any,
    query: str,
    qvec: np.ndarray | None,
    pool: int = POOL,
    *,
    vectors: VectorMatrix | None = None,
    terms: TermStats | None = None,
) -> Legs:
    """Every leg's candidates (see `keyword_legs` and `vector_leg`).

    The keyword legs run on the index's connection thread while the vector product runs on a
    worker thread: both release the GIL, so on two cores they overlap. (Running the keyword
    legs during the query embedding instead gains nothing: the embedder uses both cores.)
    """
    if qvec is None:
        return await keyword_legs(db, query, pool, terms=terms)
    legs, vector = await asyncio.gather(
        keyword_legs(db, query, pool, terms=terms, alone=False),
        vector_leg(db, qvec, pool, vectors),
    )
    legs["vector"] = vector
    return legs


def rrf_fusion(
    legs: Legs, weights: dict[str, float] | None = None, k: int = RRF_K
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
    return DECAY_FLOOR + (1.0 - DECAY_FLOOR) * float(0.5 ** (age / half_life_days))


_TOKENS = re.compile(r"\w+", re.UNICODE)


def _token_set(text: str) -> frozenset[str]:
    return frozenset(t.lower() for t in _TOKENS.findall(text))


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr(
    ranked: list[tuple[int, float]], texts: dict[int, str], limit: int, lam: float | None = None
) -> list[tuple[int, float]]:
    """Pick `limit` of the ranked (id, score) pairs, trading relevance for novelty."""
    lam = MMR_LAMBDA if lam is None else lam
    rest = [(chunk_id, score, _token_set(texts[chunk_id])) for chunk_id, score in ranked]
    # Each candidate's highest overlap with anything chosen so far, updated with the newest
    # pick only: limit x candidates comparisons instead of limit^2 x candidates.
    overlap = [0.0] * len(rest)
    chosen: list[tuple[int, float]] = []
    while rest and len(chosen) < limit:
        best = max(
            range(len(rest)), key=lambda i: (lam * rest[i][1] - (1.0 - lam) * overlap[i], -i)
        )
        chunk_id, score, tokens = rest.pop(best)
        overlap.pop(best)
        chosen.append((chunk_id, score))
        for i, (_, _, other) in enumerate(rest):
            overlap[i] = max(overlap[i], _similarity(tokens, other))
    return chosen


def result_chars(position: int, limit: int, chars: int) -> int:
    """What the result at `position` (0: first) of at most `limit` may show when results show
    `chars` on average (see FIRST_RESULT_SCALE)."""
    if limit <= 1:
        return chars
    others = max(MIN_OTHER_SHARE, (limit - FIRST_RESULT_SCALE) / (limit - 1))
    if position > 0:
        return int(chars * others)
    return int(chars * (limit - others * (limit - 1)))


def snippet(text: str, query: str, limit: int = SNIPPET_CHARS, focus: str = "") -> str:
    """The chunk text, or a window of it when it is too long: around `focus` (the line that
    matched best) when given, else around the first query term."""
    if len(text) <= limit:
        return text
    at = text.find(focus) if focus else -1
    if at >= 0:
        # The whole line with what comes before it (the question a reply answers); the +2
        # keeps its last character clear of the closing ellipsis.
        start = min(at - limit // 4, at + len(focus) + 2 - limit)
    else:
        words, bigrams, identifiers = query_terms(query)
        lowered = text.lower()
        positions = [lowered.find(t.lower()) for t in (*identifiers, *words, *bigrams)]
        hits = [p for p in positions if p >= 0]
        start = min(hits) - limit // 4 if hits else 0
    start = min(max(0, start), len(text) - limit)
    piece = text[start : start + limit]
    if start > 0:
        piece = "…" + piece[1:]
    if start + limit < len(text):
        piece = piece[:-1] + "…"
    return piece


async def dated_chunks(db: Any, windows: list[DateWindow]) -> set[int]:
    """The chunks of daily notes dated inside any of the windows (memory.dates)."""
    if not windows:
        return set()
    rows = await db.execute_fetchall(
        "SELECT id FROM chunks WHERE "
        + " OR ".join(["day BETWEEN ? AND ?"] * len(windows))
        + " LIMIT ?",
        [*(d.isoformat() for window in windows for d in window), DATE_SCAN_LIMIT],
    )
    return {int(row[0]) for row in rows}


async def fetch_chunks(db: Any, ids: list[int]) -> dict[int, tuple[Any, ...]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = await db.execute_fetchall(
        f"SELECT id, path, source, start_line, end_line, day, text, lines FROM chunks "
        f"WHERE id IN ({marks})",
        ids,
    )
    return {int(row[0]): tuple(row) for row in rows}


def _line_text(row: tuple[Any, ...], number: int | None) -> str:
    """The text of line `number` of a fetched chunk row ("" when unknown)."""
    if number is None:
        return ""
    numbers = split_numbers(row[7])
    pieces = str(row[6]).split("\n")
    return next((piece for n, piece in zip(numbers, pieces, strict=False) if n == number), "")


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
    more: Sequence[tuple[str, np.ndarray | None]] = (),
    lines: LineEnsemble | None = None,
    line_query: Callable[[str], Awaitable[np.ndarray | None]] | None = None,
    snippet_chars: int = SNIPPET_CHARS,
) -> SearchResponse:
    """Search for `query` (with `qvec` its embedding, None for keyword-only).

    `lines`: the index's whitened line spaces, for the line leg (None: no line leg).
    `line_query`: the line model's vector of a phrasing (None: no say on it), put after the
    embedder's for the line leg. It is computed while the other legs run, so the embedder's
    vector stays the chunk vectors' own. (Computed beside the embedder's query instead, or
    started before it: the same latency within this machine's noise, 30-35 ms p50 at 10k
    chunks; one model after the other, with nothing between them, was slower.)

    `snippet_chars`: what a result shows at most on average (auto-recall asks for less than
    a tool call shows: gateway/pipeline/auto_recall.py): the first result may show up to
    FIRST_RESULT_SCALE times it, the others a little less (`result_chars`).

    `more`: other phrasings of the same question with their embeddings. Each phrasing is
    fused on its own and the fused scores are averaged: a chunk that several phrasings find
    rises, one found by a single phrasing still counts.
    """
    limit = max(1, min(int(max_results), MAX_RESULTS))
    phrasings = [(q, v) for q, v in [(query, qvec), *more] if q.strip()]
    if not phrasings:
        return SearchResponse(note="empty query")
    fused: dict[int, float] = {}
    best_line: dict[int, tuple[float, int]] = {}  # chunk -> (line score, line number)
    cosines: dict[int, float] = {}  # chunk -> best cosine over the phrasings
    dated = await dated_chunks(db, query_windows(query))
    for text, vector in phrasings:
        scored_by_lines = lines is not None and vector is not None
        second = (
            asyncio.ensure_future(line_query(text))
            if scored_by_lines and line_query is not None
            else None
        )
        try:
            legs = await gather_legs(
                db, text, vector, max(POOL, 4 * limit), vectors=vectors, terms=terms
            )
        except BaseException:
            if second is not None:
                second.cancel()
            raise
        if scored_by_lines:
            assert lines is not None and vector is not None
            extra = await second if second is not None else None
            asked = vector if extra is None else np.concatenate([vector, extra])
            candidates = sorted(
                {cid for leg in legs.values() for cid, _ in leg}
                | (dated if len(dated) <= DATE_CANDIDATES else set())
            )
            legs["lines"], found = await line_leg(db, candidates, asked, lines)
            for cid, line_score in legs["lines"]:
                if cid not in best_line or line_score > best_line[cid][0]:
                    best_line[cid] = (line_score, found[cid])
        for cid, cosine in legs.get("vector", []):
            cosines[cid] = max(cosine, cosines.get(cid, -1.0))
        for chunk_id, value in rrf_fusion(legs).items():
            fused[chunk_id] = fused.get(chunk_id, 0.0) + value / len(phrasings)
    query = " ".join(q for q, _ in phrasings)  # the snippet looks for any phrasing's words
    keep = 4 * limit
    candidates = list(fused)
    if len(candidates) > keep:
        # Age only scales a score by a factor in [DECAY_FLOOR, 1], so a chunk scoring below
        # DECAY_FLOOR x the keep-th best can never climb into the best `keep`: not fetched.
        floor = DECAY_FLOOR * sorted(fused.values(), reverse=True)[keep - 1]
        floor /= DATE_BOOST if dated else 1.0
        candidates = [cid for cid in candidates if fused[cid] >= floor]
    rows = await fetch_chunks(db, candidates)
    ranked = sorted(
        (
            (
                cid,
                fused[cid]
                * decay(rows[cid][5], today, half_life_days)
                * (DATE_BOOST if cid in dated else 1.0),
            )
            for cid in candidates
            if cid in rows
        ),
        key=lambda item: -item[1],
    )[:keep]
    order = mmr(ranked, {cid: rows[cid][6] for cid, _ in ranked}, len(ranked))
    results: list[SearchResult] = []
    shown: dict[str, list[tuple[int, int]]] = {}  # path -> line ranges already in a result
    for cid, score in order:
        if len(results) >= limit or score < min_score:
            break
        row = rows[cid]
        line = best_line[cid][1] if cid in best_line else None
        chars = result_chars(len(results), limit, snippet_chars)
        around = await passage(db, row[1], line, chars) if line is not None and PASSAGES else None
        if around is None:
            first, last = int(row[3]), int(row[4])
            text = snippet(row[6], query, chars, focus=_line_text(row, line))
        else:
            first, last, text = around
        if any(a <= first and last <= b for a, b in shown.get(row[1], [])):
            continue  # everything this one shows is already in front of the model
        shown.setdefault(row[1], []).append((first, last))
        results.append(
            SearchResult(
                path=row[1],
                start_line=first,
                end_line=last,
                score=score,
                snippet=text,
                source=row[2],
                line=line,
                cosine=cosines.get(cid),
                line_score=best_line[cid][0] if cid in best_line else None,
            )
        )
    note = ""
    if not results:
        note = "no matching memory" if not ranked else f"no result scored {min_score} or more"
    return SearchResponse(results, "hybrid" if qvec is not None else "keyword-only", note)
