"""The second line model: the real MiniLM files, the ensemble's scores, and an index with it."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest

from memory.embedders import EmbedderError, build_line_model
from memory.index import RecallIndex
from memory.lines import SECOND_MODEL_WEIGHT, LineEnsemble, LineSpace, unpack_vectors
from memory.minilm import MODEL_SHA256, MiniLMEmbedder, _checked, english_enough, model_files
from tests.fakes.embedder import FakeEmbedder

TODAY = date(2026, 11, 29)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_minilm_embeds_offline_and_puts_a_paraphrase_nearer_than_an_unrelated_line(minilm):
    lines = minilm.embed_documents(
        [
            "I'm hooked on Succession, I watched six episodes in one sitting.",
            "The plumber finally fixed the kitchen sink on Thursday.",
        ]
    )
    query = minilm.embed_query("Which TV show has she been binge-watching?")
    assert lines.shape == (2, 384) and query.shape == (384,)
    assert np.allclose(np.linalg.norm(lines, axis=1), 1.0, atol=1e-5)
    assert float(lines[0] @ query) > float(lines[1] @ query) + 0.1
    # Batched and single embeddings agree (padding must not leak into the mean).
    alone = minilm.embed_documents(["The plumber finally fixed the kitchen sink on Thursday."])
    assert float(alone[0] @ lines[1]) > 0.999
    assert minilm.embed_documents([]).shape == (0, 384)


def test_a_long_line_is_cut_not_refused(minilm):
    vector = minilm.embed_documents(["word " * 5000])
    assert vector.shape == (1, 384) and np.isfinite(vector).all()


def test_the_model_files_are_checked_against_their_digests(tmp_path: Path):
    model, tokenizer = model_files()
    assert model.is_file() and tokenizer.is_file()
    changed = tmp_path / "model.onnx"
    changed.write_bytes(model.read_bytes()[:-1] + b"\0")
    with pytest.raises(EmbedderError, match="not the expected one"):
        _checked(changed, MODEL_SHA256)
    with pytest.raises(EmbedderError, match="unreadable"):
        _checked(tmp_path / "missing.onnx", MODEL_SHA256)
    assert build_line_model("none") is None
    with pytest.raises(ValueError):
        build_line_model("bert")


def test_an_ensemble_of_one_model_is_that_models_space():
    rng = np.random.default_rng(5)
    lines = rng.normal(size=(80, 24)).astype(np.float32)
    query = rng.normal(size=24).astype(np.float32)
    keys = [(i // 4, i % 4) for i in range(80)]
    alone = LineSpace.fit(lines, keys).scores(lines, query, keys)
    assert np.allclose(LineEnsemble.fit(lines, keys).scores(lines, query, keys), alone)


def test_an_ensemble_adds_the_second_models_score_at_its_weight():
    rng = np.random.default_rng(6)
    first, second = rng.normal(size=(80, 24)), rng.normal(size=(80, 16))
    rows = np.hstack([first, second]).astype(np.float32)
    asked = rng.normal(size=40).astype(np.float32)
    keys = [(i, 1) for i in range(80)]
    ensemble = LineEnsemble.fit(rows, keys, [24, 16])
    expected = LineSpace.fit(first, keys).scores(
        first, asked[:24], keys
    ) + SECOND_MODEL_WEIGHT * LineSpace.fit(second, keys).scores(second, asked[24:], keys)
    assert np.allclose(ensemble.scores(rows, asked, keys), expected, atol=1e-5)
    with pytest.raises(ValueError):
        LineEnsemble.fit(rows, keys, [24, 24])


def _note(ws: Path, day: str, lines: list[str]) -> None:
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    (ws / "memory" / f"{day}.md").write_text("".join(f"- {x}\n" for x in lines))


LINES = [
    "Maya: I adopted a beagle called Biscuit.",
    "Sam: The plumber comes on Thursday.",
    "Maya: Biscuit chewed my running shoes.",
    "Sam: We booked flights to Lisbon.",
]


async def _two_model_index(tmp_path: Path) -> tuple[RecallIndex, FakeEmbedder, FakeEmbedder]:
    """A synced index of LINES with a fake embedder and a fake line model."""
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", LINES)
    first, second = FakeEmbedder(), FakeEmbedder(model="second", dim=32)
    index = RecallIndex(ws, first, today=lambda: TODAY, line_model=second)
    await index.sync()
    return index, first, second


async def test_an_index_with_a_line_model_stores_both_models_line_vectors(tmp_path: Path):
    index, _, second = await _two_model_index(tmp_path)
    assert index.cache.line_dim == 96 and second.documents_embedded == len(LINES)
    numbers, blob = (
        await index.store.db.execute_fetchall("SELECT numbers, vectors FROM chunk_lines")
    )[0]
    assert numbers == "1,2,3,4"
    rows = unpack_vectors(blob, len(LINES), 96)
    # Each part is the unit vector its own model gives the line.
    assert np.allclose(np.linalg.norm(rows[:, :64], axis=1), 1.0, atol=0.02)
    assert np.allclose(np.linalg.norm(rows[:, 64:], axis=1), 1.0, atol=0.02)
    assert float(rows[0, 64:] @ second._vector(LINES[0])) > 0.99
    spaces = {
        r[0]
        for r in await index.store.db.execute_fetchall(
            "SELECT DISTINCT space FROM cache.line_embeddings"
        )
    }
    assert spaces == {"fake:bag-v1:64", "fake:second:32"}
    response = await index.search("plumber thursday")
    assert response.results[0].line == 2 and response.mode == "hybrid"
    assert (await index.status()).line_model == "second"
    await index.close()


async def test_adding_a_line_model_later_embeds_only_its_lines(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", LINES)
    first = FakeEmbedder()
    index = RecallIndex(ws, first, today=lambda: TODAY)
    await index.sync()
    await index.close()
    before = first.documents_embedded
    second = FakeEmbedder(model="second", dim=32)
    index = RecallIndex(ws, first, today=lambda: TODAY, line_model=second)
    stats = await index.sync()  # another configuration: rebuilt, from the cache
    assert stats.rebuilt and first.documents_embedded == before
    assert second.documents_embedded == len(LINES) and stats.pending == 0
    assert (await index.search("beagle")).results[0].line == 1
    await index.close()


async def test_a_failing_line_model_keeps_the_chunk_vectors_and_says_why(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", LINES)
    second = FakeEmbedder(model="second", dim=32, fail=True)
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, line_model=second)
    stats = await index.sync()
    assert stats.embed_error == "fake endpoint is down" and stats.pending == 1
    # The embedder's work is kept: the chunk has its vector, only its lines wait.
    assert (await index.store.db.execute_fetchall("SELECT count(*) FROM chunks_vec"))[0][0] == 1
    assert (await index.store.db.execute_fetchall("SELECT count(*) FROM chunk_lines"))[0][0] == 0
    response = await index.search("beagle")  # the line model fails on the query too
    assert response.results and response.mode == "hybrid"
    assert "no vector yet (fake endpoint is down)" in response.note
    assert "lines scored by the embedder alone" in response.note
    second.fail = False
    stats = await index.sync()
    assert stats.pending == 0 and stats.embedded == 0  # only the lines were left to do
    assert (await index.search("beagle")).results[0].line == 1
    second.fail = True  # down again, at query time: e5's line vectors still name the line
    response = await index.search("beagle Biscuit")
    assert response.results[0].line == 1
    assert "line model failed on this query (fake endpoint is down)" in response.note
    await index.close()


def test_the_line_model_has_no_say_on_queries_in_other_scripts():
    assert english_enough("When did Maya move to Lisbon?")
    assert english_enough("Quand Marie a-t-elle déménagé ?")
    assert english_enough("2026-03-01")
    assert not english_enough("玛雅什么时候搬家的？")
    # An all-zero part of the query (what the index sends then) leaves the score to e5 alone.
    rng = np.random.default_rng(8)
    rows = rng.normal(size=(60, 40)).astype(np.float32)
    keys = [(i, 1) for i in range(60)]
    ensemble = LineEnsemble.fit(rows, keys, [24, 16])
    asked = np.concatenate([rng.normal(size=24), np.zeros(16)]).astype(np.float32)
    assert np.allclose(
        ensemble.scores(rows, asked, keys),
        LineSpace.fit(rows[:, :24], keys).scores(rows[:, :24], asked[:24], keys),
    )


async def test_a_chinese_query_is_not_sent_to_the_line_model(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", [*LINES, "Maya: 我下周去上海出差。"])
    second = FakeEmbedder(model="second", dim=32)
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, line_model=second)
    await index.sync()
    asked = second.queries_embedded
    response = await index.search("上海出差")
    assert second.queries_embedded == asked and response.results[0].line == 5
    await index.search("plumber")
    assert second.queries_embedded == asked + 1
    await index.close()


async def test_the_service_loads_the_line_model_and_goes_on_without_one_that_fails(
    tmp_path: Path, caplog
):
    from gateway.config.memory import MemorySettings, build_memory_service
    from memory.service import MemoryOptions, MemoryService

    assert MemorySettings().line_model == "minilm"
    assert MemorySettings(line_model=" None ").line_model == "none"
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", LINES)
    second = FakeEmbedder(model="second", dim=32)
    service = MemoryService(
        FakeEmbedder,
        MemoryOptions(watch=False),
        today=lambda: TODAY,
        line_model_factory=lambda: second,
    )
    await service.sync(ws)  # the vectors now (a search alone would leave them to the background)
    assert (await service.search(ws, "plumber")).results[0].line == 2
    assert (await service.status(ws)).line_model == "second"
    await service.close()

    def broken() -> None:
        raise EmbedderError("line model file is not the expected one")

    service = MemoryService(
        FakeEmbedder, MemoryOptions(watch=False), today=lambda: TODAY, line_model_factory=broken
    )
    await service.sync(ws)
    response = await service.search(ws, "beagle")
    assert response.results[0].line == 1 and response.mode == "hybrid"
    assert (await service.status(ws)).line_model == ""
    assert "no line model" in caplog.text
    await service.close()
    # The gateway's settings build a service with MiniLM as its line model.
    service = build_memory_service(MemorySettings(embedder="none"))
    assert service is not None and service._line_model_factory is not None
    await service.close()


def test_a_query_without_the_second_part_is_scored_by_the_first_model():
    rng = np.random.default_rng(9)
    rows = rng.normal(size=(60, 40)).astype(np.float32)
    keys = [(i, 1) for i in range(60)]
    ensemble = LineEnsemble.fit(rows, keys, [24, 16])
    asked = rng.normal(size=24).astype(np.float32)  # the line model failed: e5's part only
    assert np.allclose(
        ensemble.scores(rows, asked, keys),
        LineSpace.fit(rows[:, :24], keys).scores(rows[:, :24], asked, keys),
    )


def test_a_model_file_onnxruntime_cannot_load_is_a_clear_error(tmp_path: Path, monkeypatch):
    import hashlib

    import memory.minilm as minilm_module

    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"not an onnx model")
    tokenizer = model_files()[1]
    monkeypatch.setattr(minilm_module, "model_files", lambda: (garbage, tokenizer))
    monkeypatch.setattr(
        minilm_module, "MODEL_SHA256", hashlib.sha256(garbage.read_bytes()).hexdigest()
    )
    with pytest.raises(EmbedderError, match="line model failed to load"):
        MiniLMEmbedder()


async def test_a_repeated_query_is_embedded_once_by_each_model(tmp_path: Path):
    index, first, second = await _two_model_index(tmp_path)
    for _ in range(3):
        await index.search("when does the plumber come")
    assert (first.queries_embedded, second.queries_embedded) == (1, 1)
    for n in range(256):  # the oldest query falls out of the 256 kept
        await index.search_job.query_vector(f"query {n}")
    await index.search("when does the plumber come")
    assert (first.queries_embedded, second.queries_embedded) == (258, 1)
    await index.close()
