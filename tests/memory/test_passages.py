"""A result with a known best line shows the passage around it (memory.passages)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from memory.index import RecallIndex
from memory.search import FIRST_RESULT_SCALE, SNIPPET_CHARS, result_chars
from tests.fakes.embedder import FakeEmbedder

TODAY = date(2026, 11, 29)
TALK = [
    f"Sam: small talk number {i}, nothing much to report about anything today." for i in range(30)
]


def _note(ws: Path, lines: list[str]) -> list[str]:
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    body = ["## Conversation at 1:56 pm on 8 May, 2023", "", *(f"- {x}" for x in lines)]
    (ws / "memory" / "2023-05-08.md").write_text("\n".join(body) + "\n")
    return body


async def test_the_passage_holds_the_best_line_and_its_neighbours_across_chunks(tmp_path: Path):
    ws = tmp_path / "ws"
    question = "Kim: What did you paint for the church?"
    answer = "Jo: A stained glass window with a lighthouse on it."
    body = _note(ws, [*TALK[:9], question, answer, *TALK[9:20]])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, chunk_chars=300)
    await index.sync()
    response = await index.search("stained glass window lighthouse", max_results=3)
    best = response.results[0]
    wanted = body.index(f"- {answer}") + 1
    assert best.line == wanted
    assert best.start_line < wanted < best.end_line  # lines on both sides
    assert f"- {answer}" in best.snippet and f"- {question}" in best.snippet
    assert len(best.snippet) <= result_chars(0, 3, SNIPPET_CHARS)
    # The snippet is exactly the file's lines the result points at.
    assert best.snippet.split("\n") == [
        x for x in body[best.start_line - 1 : best.end_line] if x.strip()
    ]
    # Every result shows lines the results before it do not.
    for at, result in enumerate(response.results):
        assert not any(
            r.start_line <= result.start_line and result.end_line <= r.end_line
            for r in response.results[:at]
        )
    await index.close()


async def test_a_line_too_long_for_a_passage_falls_back_to_its_chunk_window(tmp_path: Path):
    ws = tmp_path / "ws"
    long_line = "Jo: " + " ".join(["the lighthouse window glows at night"] * 40)
    _note(ws, [*TALK[:3], long_line, *TALK[3:6]])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY)
    await index.sync()
    best = (await index.search("lighthouse window glows", max_results=1)).results[0]
    assert "lighthouse window glows" in best.snippet and len(best.snippet) <= SNIPPET_CHARS
    await index.close()


async def test_the_line_after_the_best_one_comes_first_when_only_one_neighbour_fits(
    tmp_path: Path,
):
    """What follows a line in a conversation is its answer or continuation: with room for one
    neighbour, the passage takes the line after the best line, not the line before."""
    ws = tmp_path / "ws"
    asked = "Kim: Which lighthouse did you paint on the stained glass window?"
    reply = "Jo: The old one at the harbour mouth, painted red and white, of course."
    body = _note(ws, [*TALK[:5], asked, reply, *TALK[5:10]])
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, chunk_chars=300)
    await index.sync()
    before = f"- {TALK[4]}"
    room = len(f"- {asked}") + 1 + len(f"- {reply}") + 1  # one neighbour, never two
    assert room < len(f"- {asked}") + 2 + len(f"- {reply}") + len(before)
    try:
        response = await index.search(
            "lighthouse stained glass window", max_results=1, snippet_chars=room
        )
    finally:
        await index.close()  # before asserting: an open index keeps the test process alive
    best = response.results[0]
    assert best.line == body.index(f"- {asked}") + 1
    assert best.snippet == f"- {asked}\n- {reply}"
    assert (best.start_line, best.end_line) == (best.line, best.line + 1)


def test_the_first_result_gets_more_room_and_a_search_shows_no_more_in_all():
    """The first of five results may show FIRST_RESULT_SCALE x the mean budget; the others
    share the rest, never below 80% of it (with few results the first gives way)."""
    assert result_chars(0, 5, 850) == int(850 * FIRST_RESULT_SCALE)
    assert 0.8 * 850 <= result_chars(1, 5, 850) == result_chars(4, 5, 850) < 850
    for limit in (1, 2, 3, 5, 10, 50):
        total = sum(result_chars(at, limit, 850) for at in range(limit))
        assert total <= limit * 850
        assert result_chars(0, limit, 850) >= 850
        assert all(result_chars(at, limit, 850) >= int(0.8 * 850) for at in range(limit))
    assert result_chars(0, 1, 850) == 850  # alone, a result shows what was asked


async def test_a_search_gives_its_first_result_the_wider_passage(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for day in range(1, 7):
        body = [f"## Conversation at 1:56 pm on {day} May, 2023", ""]
        body += [f"- {x}" for x in TALK[:12]]
        body += [f"- Jo: the lighthouse window number {day} glows red at night by the harbour."]
        body += [f"- {x}" for x in TALK[12:24]]
        (ws / "memory" / f"2023-05-0{day}.md").write_text("\n".join(body) + "\n")
    index = RecallIndex(ws, FakeEmbedder(), today=lambda: TODAY, chunk_chars=300)
    try:
        await index.sync()
        response = await index.search("lighthouse window glows red harbour", max_results=5)
    finally:
        await index.close()
    results = response.results
    assert len(results) == 5 and all(r.line is not None for r in results)
    assert SNIPPET_CHARS < len(results[0].snippet) <= result_chars(0, 5, SNIPPET_CHARS)
    assert all(len(r.snippet) <= result_chars(1, 5, SNIPPET_CHARS) for r in results[1:])
    assert sum(len(r.snippet) for r in results) <= 5 * SNIPPET_CHARS
