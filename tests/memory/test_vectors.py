"""The in-memory vector matrix: same ranking as sqlite-vec's cosine KNN, kept in step."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest

from memory.index import RecallIndex
from memory.sqlite import connect_with_vec
from memory.vectors import VectorMatrix
from tests.fakes.embedder import FakeEmbedder
from tests.memory.test_index import _workspace

TODAY = date(2026, 11, 29)


def _vec0(dim: int, rows: list[tuple[int, np.ndarray]]):
    db = connect_with_vec()
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}] distance_metric=cosine)")
    db.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
        [(i, v.astype(np.float32).tobytes()) for i, v in rows],
    )
    return db


def _vec0_knn(db, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    rows = db.execute(
        "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ?",
        (query.astype(np.float32).tobytes(), k),
    ).fetchall()
    return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


@pytest.mark.parametrize("k", [1, 10, 40, 600])
def test_knn_ranks_like_vec0_on_random_data(k):
    rng = np.random.default_rng(3)
    dim = 48
    # Unnormalized, non-contiguous rowids: the matrix normalizes, vec0 computes cosine.
    rows = [(int(i) * 7 + 5, rng.standard_normal(dim) * rng.uniform(0.1, 10)) for i in range(500)]
    db = _vec0(dim, rows)
    matrix = VectorMatrix(dim, capacity=16)  # grows
    matrix.add([(i, v.astype(np.float32).tobytes()) for i, v in rows[:250]])
    matrix.add([(i, v) for i, v in rows[250:]])
    assert len(matrix) == 500
    for _ in range(20):
        query = rng.standard_normal(dim)
        ours, theirs = matrix.knn(query, k), _vec0_knn(db, query, k)
        assert [i for i, _ in ours] == [i for i, _ in theirs]
        assert np.allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5)
    db.close()


def test_removes_and_replacements_stay_like_vec0():
    rng = np.random.default_rng(4)
    dim = 16
    rows = {i: rng.standard_normal(dim) for i in range(1, 301)}
    matrix = VectorMatrix(dim)
    matrix.add(rows.items())
    gone = [int(i) for i in rng.choice(list(rows), 120, replace=False)]
    matrix.remove([*gone, 9999])  # an unknown rowid is ignored
    for i in gone:
        del rows[i]
    replaced = list(rows)[:10]
    for i in replaced:
        rows[i] = rng.standard_normal(dim)
    matrix.add((i, rows[i]) for i in replaced)
    assert len(matrix) == len(rows) and all(i in matrix for i in rows)
    db = _vec0(dim, list(rows.items()))
    for _ in range(10):
        query = rng.standard_normal(dim)
        assert [i for i, _ in matrix.knn(query, 25)] == [i for i, _ in _vec0_knn(db, query, 25)]
    db.close()
    assert VectorMatrix(dim).knn(rng.standard_normal(dim), 5) == []


async def _matrix_matches_vec0(index: RecallIndex) -> None:
    assert index.views.vectors is not None and index.store.db is not None
    rows = await index.store.db.execute_fetchall("SELECT rowid, embedding FROM chunks_vec")
    assert len(index.views.vectors) == len(rows)
    stored = {int(r[0]): np.frombuffer(r[1], dtype=np.float32) for r in rows}
    query = np.random.default_rng(5).standard_normal(index.embedder.dim)
    expected = sorted(
        stored, key=lambda i: (-float(stored[i] @ query / np.linalg.norm(stored[i])), i)
    )
    assert [i for i, _ in index.views.vectors.knn(query, len(stored))] == expected


async def test_index_keeps_the_matrix_in_step_with_every_write(tmp_path: Path):
    ws = _workspace(tmp_path)
    embedder = FakeEmbedder()
    index = RecallIndex(ws, embedder, today=lambda: TODAY)
    await index.sync()
    assert index.views.vectors is None  # loaded lazily, at the first search
    first = await index.search("where does Marta live")
    assert index.views.vectors is not None
    await _matrix_matches_vec0(index)
    # Edit, add, delete files: incremental sync updates the loaded matrix.
    (ws / "memory" / "2026-01-10.md").write_text("# 2026-01-10\n- The cello lesson moved.\n")
    (ws / "memory" / "2026-11-21.md").write_text("# 2026-11-21\n- Bought a green kettle.\n")
    (ws / "USER.md").unlink()
    matrix = index.views.vectors
    await index.sync()
    assert index.views.vectors is matrix
    await _matrix_matches_vec0(index)
    assert (await index.search("green kettle")).results[0].path == "memory/2026-11-21.md"
    # The same vector leg as sqlite-vec's KNN (the fake embedder ties a lot: compare scores).
    from memory import search as S

    for query in ("where does Marta live", "cello lesson", "数据库迁移", "oat milk coffee"):
        qvec = await index.search_job.query_vector(query)
        db = index.store.db
        ours = (await S.gather_legs(db, query, qvec, 40, vectors=index.views.vectors))["vector"]
        theirs = (await S.gather_legs(db, query, qvec, 40))["vector"]
        assert np.allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5)
        assert {i for i, s in ours if s > ours[-1][1] + 1e-5} <= {i for i, _ in theirs}
    assert first.results
    # A rebuild drops it; the next search loads it again.
    await index.sync(force=True)
    assert index.views.vectors is None
    await index.search("kettle")
    await _matrix_matches_vec0(index)
    await index.close()
    assert index.views.vectors is None


async def test_backfilled_vectors_reach_the_matrix(tmp_path: Path):
    ws = _workspace(tmp_path)
    embedder = FakeEmbedder()
    index = RecallIndex(ws, embedder, today=lambda: TODAY)
    await index.sync()
    await index.search("anything at all")
    embedder.fail = True
    (ws / "memory" / "2026-11-22.md").write_text("# 2026-11-22\n- The plumber comes Tuesday.\n")
    await index.sync()
    await _matrix_matches_vec0(index)
    embedder.fail = False
    await index.sync()  # backfill
    await _matrix_matches_vec0(index)
    assert (await index.search("plumber Tuesday")).results[0].path == "memory/2026-11-22.md"
    await index.close()


def test_word_query_drops_common_words_but_never_identifiers_or_everything():
    from memory.text import word_query

    assert word_query("deploy the cello", {"deploy"}) == '"cello"'
    assert word_query("deploy", {"deploy"}) == '"deploy"'  # never every term
    assert word_query("deploy id-17-3", {"deploy", "id", "17", "3"}) == '"id 17 3"'


async def test_term_stats_leave_out_the_most_common_words_over_budget(tmp_path: Path, monkeypatch):
    from memory import search as search_module
    from memory.search import TermStats, gather_legs

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(10):
        extra = " cello" if i == 3 else ""
        extra += " piano" if i < 4 else ""
        (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(f"# day\n- coffee note {i}{extra}\n")
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    db = index.store.db
    words = ["coffee", "piano", "cello", "absent"]
    assert await TermStats(budget=2).leave_out(db, words) == set()  # small index
    monkeypatch.setattr(search_module, "COMMON_WORD_MIN_CHUNKS", 5)
    # Rarest first: cello (1 row) fits, piano (4) would pass the budget of 2, coffee (10) too.
    stats = TermStats(budget=2, rare_fraction=0.0)
    assert await stats.leave_out(db, words) == {"piano", "coffee"}
    assert stats.chunks == 10 and stats.doc_freq["cello"] == 1
    assert await TermStats(budget=5, rare_fraction=0.0).leave_out(db, words) == {"coffee"}
    # A word in at most rare_fraction of the chunks is kept whatever the budget.
    assert await TermStats(budget=2, rare_fraction=0.4).leave_out(db, words) == {"coffee"}
    # The rarest word that matches anything is always kept, however common.
    assert await stats.leave_out(db, ["coffee", "absent"]) == set()
    legs = await gather_legs(db, "coffee cello", None, 40, terms=stats)
    assert len(legs["words"]) == 1  # only the cello chunk: coffee was left out
    assert len((await gather_legs(db, "coffee cello", None, 40))["words"]) == 10
    hits = await index.search("coffee cello")
    assert "cello" in hits.results[0].snippet
    await index.close()


def _mmr_by_definition(ranked, texts, limit, lam):
    """MMR as written in the literature: every step compares with everything chosen."""
    from memory.search import _similarity, _token_set

    tokens = {cid: _token_set(texts[cid]) for cid, _ in ranked}
    chosen, rest = [], list(ranked)
    while rest and len(chosen) < limit:
        values = [
            lam * score
            - (1 - lam) * max((_similarity(tokens[cid], tokens[c]) for c, _ in chosen), default=0.0)
            for cid, score in rest
        ]
        chosen.append(rest.pop(values.index(max(values))))
    return chosen


def test_incremental_mmr_picks_what_the_definition_picks():
    import random

    from memory.search import mmr

    rng = random.Random(7)
    vocabulary = [
        "boiler",
        "vulcan",
        "invoice",
        "cello",
        "piano",
        "deploy",
        "server",
        "backup",
        "coffee",
        "flight",
    ]
    for _ in range(200):
        count = rng.randint(1, 30)
        texts = {
            cid: " ".join(rng.choices(vocabulary, k=rng.randint(1, 8))) for cid in range(count)
        }
        ranked = sorted(((cid, round(rng.random(), 2)) for cid in texts), key=lambda x: -x[1])
        limit, lam = rng.randint(1, 8), rng.choice([0.5, 0.7, 0.9])
        assert mmr(ranked, texts, limit, lam) == _mmr_by_definition(ranked, texts, limit, lam)


@pytest.mark.parametrize("k", [1, 7, 40])
def test_knn_split_over_slices_merges_to_the_whole_answer(k):
    from memory.vectors import merge_knn

    rng = np.random.default_rng(5)
    matrix = VectorMatrix(16)
    matrix.add([(i * 3 + 1, rng.standard_normal(16)) for i in range(301)])
    matrix.add([(9999, matrix._matrix[0] * 2)])  # a tie with rowid 1: broken by rowid
    query = rng.standard_normal(16)
    whole = matrix.knn(query, k)
    for parts in (2, 3, 7):
        sliced = merge_knn([matrix.knn(query, k, part, parts) for part in range(parts)], k)
        _same_ranking(sliced, whole)


def _same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    # BLAS may sum a slice in another order than the whole matrix: scores agree to float32
    # rounding, the ranking exactly.
    assert [i for i, _ in got] == [i for i, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


async def test_vector_leg_on_threads_ranks_like_one_product(tmp_path: Path, monkeypatch):
    from memory import search as search_module

    index = RecallIndex(_workspace(tmp_path), FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    vectors = await index.views.loaded_vectors(index.store.db)
    query = FakeEmbedder().embed_query("deploy migration lock")
    one = await search_module.vector_leg(index.store.db, query, 5, vectors)
    monkeypatch.setattr(search_module, "VECTOR_ROWS_PER_THREAD", 1)
    _same_ranking(await search_module.vector_leg(index.store.db, query, 5, vectors), one)
    await index.close()


async def test_with_vectors_only_common_words_leave_the_word_leg_to_the_vector_leg(
    tmp_path: Path, monkeypatch
):
    from memory import search as search_module
    from memory.search import TermStats, gather_legs

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(10):
        (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(f"# day\n- coffee note {i}\n")
    monkeypatch.setattr(search_module, "COMMON_WORD_MIN_CHUNKS", 5)
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    stats = TermStats(budget=2, rare_fraction=0.0)
    query = FakeEmbedder().embed_query("coffee")
    legs = await gather_legs(index.store.db, "coffee", query, 40, terms=stats)
    assert "words" not in legs and len(legs["vector"]) == 10  # too common to pay for
    alone = await gather_legs(index.store.db, "coffee", None, 40, terms=stats)
    assert len(alone["words"]) == 10  # keyword-only keeps the rarest word: never empty
    await index.close()


async def test_word_index_stems_english(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-02-01.md").write_text("# 2026-02-01\n- Booked a cello lesson.\n")
    (ws / "memory" / "2026-02-02.md").write_text("# 2026-02-02\n- Bought oat milk.\n")
    index = RecallIndex(ws, None, today=lambda: TODAY)  # keyword-only: words alone decide
    results = (await index.search("lessons booking")).results  # neither word as written
    assert [r.path for r in results] == ["memory/2026-02-01.md"]
    await index.close()
