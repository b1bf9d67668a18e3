"""Line vectors: which lines get one, their storage, the whitened space, the line leg."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np

from memory.index import RecallIndex
from memory.lines import MIN_FIT_LINES, LineSpace, content_lines, pack_vectors, unpack_vectors
from memory.search import SNIPPET_CHARS, snippet
from tests.fakes.embedder import FakeEmbedder

TODAY = date(2026, 11, 29)


def test_content_lines_drop_markers_and_empty_lines_and_keep_numbers():
    text = "# 2026-03-01\n- Maya: I adopted a beagle.\n---\n- ok\n3. Call the vet at nine"
    assert content_lines(text, [1, 2, 4, 5, 7]) == [
        (1, "# 2026-03-01"),
        (2, "Maya: I adopted a beagle."),
        (7, "Call the vet at nine"),
    ]


def test_packed_vectors_keep_their_direction():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(20, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    back = unpack_vectors(pack_vectors(vectors), 20, 384)
    cosines = np.sum(vectors * back, axis=1) / np.linalg.norm(back, axis=1)
    assert cosines.min() > 0.999
    assert len(pack_vectors(vectors)) == 20 * (384 + 4)  # a quarter of float32, plus scales
    assert unpack_vectors(b"", 0, 384).shape == (0, 384)


def _lines_with_a_shared_direction() -> tuple[np.ndarray, np.ndarray, int]:
    """Lines that all lean on one direction (what every chat line shares), small talk that is
    almost only that direction, and one line about a topic; a question on that topic."""
    rng = np.random.default_rng(3)
    dim = 48
    shared = np.zeros(dim, dtype=np.float32)
    shared[0] = 1.0
    topics = np.eye(dim, dtype=np.float32)[1:]
    lines = [shared + 0.05 * rng.normal(size=dim) for _ in range(40)]  # small talk
    lines += [shared + 0.6 * topics[i % 40] + 0.05 * rng.normal(size=dim) for i in range(60)]
    answer = len(lines) - 1  # the one line about topic 45
    lines[answer] = shared + 0.6 * topics[45] + 0.05 * rng.normal(size=dim)
    query = 2.0 * shared + 0.5 * topics[45] + 0.05 * rng.normal(size=dim)
    matrix = np.stack(lines).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix, (query / np.linalg.norm(query)).astype(np.float32), answer


def test_whitening_lets_the_topic_line_beat_small_talk():
    lines, query, answer = _lines_with_a_shared_direction()
    raw = lines @ query
    assert int(np.argmax(raw)) != answer  # plain cosine: small talk wins
    space = LineSpace.fit(lines)
    assert space.fitted_lines == len(lines)
    assert int(np.argmax(space.scores(lines, query))) == answer


def test_too_few_lines_leave_plain_cosine():
    lines, query, _ = _lines_with_a_shared_direction()
    few = lines[: MIN_FIT_LINES - 1]
    space = LineSpace.fit(few)
    assert space.transform is None
    np.testing.assert_allclose(space.scores(few, query), few @ query, rtol=1e-5)


def test_snippet_of_a_long_chunk_is_centred_on_the_matching_line():
    filler = "\n".join(f"- small talk line number {i} about nothing much" for i in range(40))
    answer = "- The spare key is under the blue flowerpot by the shed."
    text = f"{filler}\n{answer}\n{filler}"
    piece = snippet(text, "where is the key", focus=answer)
    assert answer in piece and len(piece) <= SNIPPET_CHARS
    at_end = snippet(f"{filler}\n{answer}", "unrelated words", focus=answer)
    assert answer in at_end  # whole, not cut by the closing ellipsis


def _note(ws: Path, day: str, lines: list[str]) -> None:
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    (ws / "memory" / f"{day}.md").write_text("".join(f"- {line}\n" for line in lines))


SMALL_TALK = [
    "Hey, how was your week?",
    "Busy but good, you?",
    "Same as always honestly.",
    "Did you watch the game?",
    "No, I fell asleep early.",
    "Classic.",
]


async def test_search_names_the_matching_line(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(
        ws,
        "2026-03-01",
        [*SMALL_TALK, "Maya: the spare key is under the blue flowerpot.", *SMALL_TALK],
    )
    _note(ws, "2026-03-08", [*SMALL_TALK, "Maya: the plumber comes on Thursday at nine."])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, chunk_chars=2000)
    stats = await index.sync()
    assert stats.lines_embedded > 0
    response = await index.search("where is the spare key", max_results=3)
    best = response.results[0]
    assert best.path == "memory/2026-03-01.md" and best.line == 7
    assert "blue flowerpot" in best.snippet
    assert best.as_dict()["line"] == 7
    rows = await index.store.db.execute_fetchall("SELECT count(*) FROM chunk_lines")
    status = await index.status()
    assert rows[0][0] == status.chunks == status.vectors  # lines stored with their chunk
    await index.close()


async def test_an_edit_embeds_only_the_new_line_and_a_deletion_drops_the_lines(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", [*SMALL_TALK, "Maya: the spare key is under the blue flowerpot."])
    embedder = FakeEmbedder()
    index = RecallIndex(ws, embedder, today=lambda: TODAY, chunk_chars=2000)
    await index.sync()
    _note(
        ws,
        "2026-03-01",
        [
            *SMALL_TALK,
            "Maya: the spare key is under the blue flowerpot.",
            "Maya: and the wifi password is on the fridge.",
        ],
    )
    stats = await index.sync()
    assert (stats.embedded, stats.lines_embedded) == (1, 1)  # the chunk, and only its new line
    (ws / "memory" / "2026-03-01.md").unlink()
    await index.sync()
    rows = await index.store.db.execute_fetchall("SELECT count(*) FROM chunk_lines")
    assert rows[0][0] == 0
    await index.close()


async def test_keyword_only_index_has_no_line_leg(tmp_path: Path):
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", [*SMALL_TALK, "Maya: the spare key is under the blue flowerpot."])
    index = RecallIndex(ws, None, today=lambda: TODAY)
    await index.sync()
    response = await index.search("spare key flowerpot")
    assert response.results and response.results[0].line is None
    assert "line" not in response.results[0].as_dict()
    await index.close()


async def test_a_rebuild_restores_chunk_vectors_at_once_and_embeds_lines_after(tmp_path: Path):
    # An index from before line vectors: the cache holds chunk vectors only.
    ws = tmp_path / "ws"
    _note(ws, "2026-03-01", [*SMALL_TALK, "Maya: the spare key is under the blue flowerpot."])
    _note(ws, "2026-03-08", [*SMALL_TALK, "Maya: the plumber comes on Thursday at nine."])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    await index.store.db.execute("DELETE FROM cache.line_embeddings")
    await index.store.db.commit()
    stats = await index.sync(force=True, embed=False)
    status = await index.status()
    assert status.vectors == status.chunks > 0  # back from the cache, searchable by vector
    assert stats.pending == status.chunks  # their lines are still to come
    more = await index.embed_pending()
    assert more.embedded == 0 and more.lines_embedded > 0
    assert (await index.search("anything")).pending == 0
    rows = await index.store.db.execute_fetchall("SELECT count(*) FROM chunk_lines")
    assert rows[0][0] == status.chunks
    await index.close()


def test_a_line_said_many_times_is_a_hub_and_a_line_is_not_its_own_neighbour():
    rng = np.random.default_rng(5)
    dim = 32
    said_often = rng.normal(size=dim)
    lines = [said_often + 0.01 * rng.normal(size=dim) for _ in range(12)]
    lines += [rng.normal(size=dim) for _ in range(60)]
    matrix = np.stack(lines).astype(np.float32)
    keys = [(i // 10, i) for i in range(len(matrix))]
    space = LineSpace.fit(matrix, keys)
    projected = space.project(matrix)
    hubs = space.hubness(projected, keys)
    assert hubs[:12].min() > 0.9  # close to its copies
    assert hubs[12:].max() < 0.6  # a unique line is not counted against itself
    # A question closer to the often-said line, but not by as much as that line's hubness.
    query = 2.0 * said_often / np.linalg.norm(said_often) + matrix[40] / np.linalg.norm(matrix[40])
    plain = space.scores(matrix, query)
    scaled = space.scores(matrix, query, keys)
    assert int(np.argmax(plain)) < 12 and int(np.argmax(scaled)) == 40


async def test_the_line_space_is_refitted_when_enough_lines_change(tmp_path: Path):
    ws = tmp_path / "ws"
    for day in range(1, 11):
        _note(ws, f"2026-03-{day:02d}", [f"{line} ({day})" for line in SMALL_TALK])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    await index.search("how was the game")
    first = index.views.line_space
    assert first is not None and first.fitted_lines == 60 and first.spaces[0].hubs
    _note(ws, "2026-03-11", ["Maya: the plumber comes on Thursday at nine."])  # 1 line of 61
    await index.sync()
    await index.search("when does the plumber come")
    assert index.views.line_space is first  # under a tenth changed: same fit
    gone = [f"memory/2026-03-{day:02d}.md" for day in range(1, 7)]  # 36 lines of 61
    ids = {
        row[0]
        for row in await index.store.db.execute_fetchall(
            f"SELECT id FROM chunks WHERE path IN ({','.join('?' * len(gone))})", gone
        )
    }
    assert ids & {key[0] for key in first.spaces[0].hubs}
    for path in gone:
        (ws / path).unlink()
    await index.sync()
    assert not ids & {key[0] for key in first.spaces[0].hubs}  # deleted chunks are forgotten
    await index.search("when does the plumber come")
    assert index.views.line_space is not first and index.views.line_space.fitted_lines == 25
    await index.close()
