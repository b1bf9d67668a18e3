"""Dates a question names become windows of daily-note dates (memory.dates)."""

from __future__ import annotations

from datetime import date, timedelta

from memory.dates import DAY_AFTER, DAY_BEFORE, MONTH_AFTER, query_windows


def test_a_named_day_in_any_common_spelling_looks_at_that_week():
    expected = [(date(2022, 11, 9 - DAY_BEFORE), date(2022, 11, 9 + DAY_AFTER))]
    for question in (
        "What dish did Nate make on 9 November, 2022?",
        "what happened on November 9, 2022",
        "on the 9th of November 2022",
        "on Nov. 9 2022",
        "notes from 2022-11-09",
    ):
        assert query_windows(question) == expected, question


def test_a_month_or_a_year_looks_at_all_of_it_and_a_little_after():
    assert query_windows("What did John host in May 2023?") == [
        (date(2023, 5, 1), date(2023, 5, 31) + timedelta(days=MONTH_AFTER))
    ]
    ((first, last),) = query_windows("a charity event in 2024")
    assert first == date(2024, 1, 1) and last > date(2024, 12, 31)


def test_no_date_or_an_impossible_one_names_nothing():
    assert query_windows("when did Caroline go to the support group?") == []
    assert query_windows("on May 3?") == []  # no year: which one would be a guess
    # No such day: the month it names is still a month.
    assert query_windows("on 31 February, 2023") == [
        (date(2023, 2, 1), date(2023, 2, 28) + timedelta(days=MONTH_AFTER))
    ]
    assert query_windows("the 5000 meter race") == []


async def test_a_question_naming_a_date_prefers_the_notes_written_around_it(tmp_path):
    from memory.index import RecallIndex
    from tests.fakes.embedder import FakeEmbedder

    memory = tmp_path / "ws" / "memory"
    memory.mkdir(parents=True)
    for day in ("2023-01-10", "2023-05-04", "2023-09-20"):
        (memory / f"{day}.md").write_text(
            f"## Conversation at {day}\n\n- Maria: We had dinner with my aunt and cousins.\n"
        )
    index = RecallIndex(tmp_path / "ws", FakeEmbedder(), today=lambda: date(2026, 1, 1))
    await index.sync()
    for question, wanted in (
        ("Who did Maria have dinner with on May 3, 2023?", "memory/2023-05-04.md"),
        ("Who did Maria have dinner with in September 2023?", "memory/2023-09-20.md"),
    ):
        response = await index.search(question, max_results=3)
        assert response.results[0].path == wanted, question
    await index.close()
