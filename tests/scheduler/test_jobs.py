"""The job list file: canonical entries, private files, safe hand edits, no lost updates."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from scheduler import (
    ScheduleError,
    ScheduleFileError,
    cancel,
    confirmation,
    create,
    list_jobs,
    read_jobs,
    render_list,
)
from scheduler.jobs import schedule_path

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # Monday 10:00 in Berlin


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ana"
    path.mkdir(mode=0o700)
    return path


def test_a_created_job_is_stored_resolved_and_confirmed_in_words_and_iso(ws: Path) -> None:
    job, first = create(ws, BERLIN, "tomorrow at 9", "send the invoice", "message", NOW)
    assert job.id == 1
    data = json.loads(schedule_path(ws).read_text())
    assert data["jobs"] == [
        {
            "id": 1,
            "kind": "message",
            "text": "send the invoice",
            "when": "2026-12-01T09:00:00+01:00",
            "created": "2026-11-30T09:00:00+00:00",
        }
    ]
    assert first == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    text = confirmation(job, first, BERLIN, NOW)
    assert "Tue 1 Dec 2026 at 09:00 (Europe/Berlin), in 23 hours" in text
    assert "2026-12-01T09:00:00+01:00" in text and "#1" in text
    assert schedule_path(ws).stat().st_mode & 0o777 == 0o600


def test_ids_are_never_reused(ws: Path) -> None:
    for text in ("a", "b", "c"):
        create(ws, BERLIN, "every day at 9", text, "message", NOW)
    assert cancel(ws, BERLIN, 3) is not None
    job, _ = create(ws, BERLIN, "every day at 9", "d", "message", NOW)
    assert job.id == 4
    assert cancel(ws, BERLIN, 3) is None


def test_listing_shows_ids_next_runs_and_problems(ws: Path) -> None:
    create(ws, BERLIN, "every weekday at 08:30", "stand-up", "message", NOW)
    create(ws, BERLIN, "in 2 hours", "check the oven", "message", NOW)
    create(ws, BERLIN, "every friday at 17:00", "week review", "agent", NOW)
    views, problems = list_jobs(ws, BERLIN)
    text = render_list(views, problems, BERLIN, NOW)
    assert text.splitlines() == [
        "1. [reminder] stand-up - next: Tue 1 Dec 2026 at 08:30 (Europe/Berlin), in 22 hours "
        "(every weekday at 08:30)",
        "2. [reminder] check the oven - next: Mon 30 Nov 2026 at 12:00 (Europe/Berlin), in 2 hours",
        "3. [task] week review - next: Fri 4 Dec 2026 at 17:00 (Europe/Berlin), in 4 days "
        "(every friday at 17:00)",
    ]
    assert render_list([], [], BERLIN, NOW) == "No reminders or scheduled tasks."


@pytest.mark.parametrize(
    ("when", "text", "kind", "reason"),
    [
        ("yesterday at 9", "x", "message", "not a day"),
        ("2026-11-29 10:00", "x", "message", "in the past"),
        ("tomorrow at 9", "   ", "message", "empty"),
        ("tomorrow at 9", "x" * 2001, "message", "at most 2000"),
        ("tomorrow at 9", "x", "shell", "kind"),
    ],
)
def test_bad_jobs_are_refused_and_nothing_is_written(
    ws: Path, when: str, text: str, kind: str, reason: str
) -> None:
    with pytest.raises(ScheduleError, match=reason):
        create(ws, BERLIN, when, text, kind, NOW)  # type: ignore[arg-type]
    assert not schedule_path(ws).exists()


def test_the_job_limit(ws: Path) -> None:
    for n in range(3):
        create(ws, BERLIN, "every day at 9", f"n{n}", "message", NOW, max_jobs=3)
    with pytest.raises(ScheduleError, match="limit is 3"):
        create(ws, BERLIN, "every day at 9", "one more", "message", NOW, max_jobs=3)


def test_a_bad_hand_edit_skips_one_job_and_survives_rewrites(ws: Path) -> None:
    create(ws, BERLIN, "every day at 9", "good", "message", NOW)
    path = schedule_path(ws)
    data = json.loads(path.read_text())
    broken = {"id": 2, "text": "typo", "when": "evrey day at 9", "note": "mine"}
    data["jobs"] += [
        broken,
        {"id": 1, "text": "dup", "when": "at 10"},
        {"id": 3, "text": "hand", "when": "every 3 hours"},
    ]
    path.write_text(json.dumps(data))
    parsed = read_jobs(ws, BERLIN)
    assert [job.id for job in parsed.jobs] == [1, 3]
    assert any("job 2" in p for p in parsed.problems)
    assert any("used twice" in p for p in parsed.problems)
    hand = parsed.get(3)
    assert hand is not None  # no `created`: the file's time stands in, then gets written
    job, _ = create(ws, BERLIN, "every day at 10", "new", "message", NOW)
    assert job.id == 4
    entries = json.loads(path.read_text())["jobs"]
    assert broken in entries  # kept exactly as the person wrote it
    assert next(e for e in entries if e["id"] == 3)["created"] == hand.created.isoformat()


def test_a_file_that_is_not_json_is_never_overwritten(ws: Path) -> None:
    path = schedule_path(ws)
    path.write_text('{"jobs": [ {"id": 1,, } ]}')
    with pytest.raises(ScheduleFileError, match="line 1 column"):
        create(ws, BERLIN, "tomorrow at 9", "x", "message", NOW)
    with pytest.raises(ScheduleFileError):
        cancel(ws, BERLIN, 1)
    assert path.read_text() == '{"jobs": [ {"id": 1,, } ]}'


def test_concurrent_writers_lose_no_job(ws: Path) -> None:
    """The tools in the gateway and `clawgate schedule add` may write at the same time."""
    errors: list[BaseException] = []

    def add(n: int) -> None:
        try:
            create(ws, BERLIN, "every day at 9", f"job {n}", "message", NOW)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    jobs = read_jobs(ws, BERLIN).jobs
    assert sorted(job.id for job in jobs) == list(range(1, 17))
    assert sorted(job.text for job in jobs) == sorted(f"job {n}" for n in range(16))


def test_the_state_journal_replays_to_what_memory_held_and_survives_a_torn_line(ws: Path) -> None:
    from scheduler.files import commit
    from scheduler.state import ScheduleState, load_state, state_path

    live = ScheduleState()
    due = datetime(2026, 12, 1, 8, tzinfo=UTC)
    live.planned(1, due, 42)
    live.claim("k1", 1, due, "agent", "review", "(late: due 09:00)")
    live.set_result("k1", "all good")
    live.retried("k1", 1, "ConnectionError: down")
    live.claim("k2", 2, due, "message", "hello", "")
    live.done("k2", "fired")
    live.skipped(3, due)
    live.forget(3)
    commit([(state_path(ws), "\n".join(live.unwritten) + "\n")], [])
    again = load_state(ws)
    assert again.jobs == live.jobs and again.pending == live.pending
    assert again.pending["k1"].result == "all good" and again.pending["k1"].attempts == 1
    assert again.jobs[2].runs == 1 and 3 not in again.jobs
    assert not again.needs_compaction
    # A kill in the middle of an append leaves half a line: it is dropped, nothing else.
    with open(state_path(ws), "a") as journal:
        journal.write('{"e": "done", "key": "k1", "outc')
    torn = load_state(ws)
    assert torn.pending == live.pending and torn.needs_compaction
    # Compaction writes the same state in one line per job and run.
    commit([], [(state_path(ws), torn.snapshot())])
    compacted = load_state(ws)
    assert compacted.jobs == live.jobs and compacted.pending == live.pending
    assert state_path(ws).stat().st_mode & 0o777 == 0o600
