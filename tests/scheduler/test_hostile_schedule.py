"""A hostile schedule file (a hand edit, a restored backup) is one person's reported problem:
it never stops the scheduler's start, its loop, or another person's reminders, and it is
logged once per version of the file, not once per pass."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from scheduler import ScheduleFileError, list_jobs, render_list
from scheduler.jobs import MAX_FILE_BYTES, parse_file, read_jobs, schedule_path
from scheduler.state import load_state, state_path
from tests.scheduler.test_service import BERLIN, START, Rig

OVERFLOWING = (
    "in 99999999999999 days",
    "in 999999999 days",
    "every 99999999999999999 hours",
    "9999-12-31T23:59-14:00",
    "0001-01-01T00:00+14:00",
)
DEEP = '{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path / "workspaces")


def _file(*jobs: dict) -> str:
    return json.dumps({"version": 1, "next_id": len(jobs) + 1, "jobs": list(jobs)})


@pytest.mark.parametrize("when", OVERFLOWING)
def test_a_when_out_of_range_is_a_problem_of_that_job(when: str) -> None:
    parsed = parse_file(
        _file(
            {"id": 1, "text": "boom", "when": when},
            {"id": 2, "text": "fine", "when": "every day at 9"},
        ),
        BERLIN,
        START,
    )
    assert [job.id for job in parsed.jobs] == [2]
    assert len(parsed.problems) == 1 and "job 1" in parsed.problems[0]
    assert "out of range" in parsed.problems[0]


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        '{"jobs": [], "next_id": ' + "9" * 5000 + "}",
        '{"jobs": [{"id": 1, "text": "\\ud800", "when": "in 1 hour"}]}',
    ],
)
def test_a_file_that_cannot_be_parsed_is_a_schedule_file_error(text: str) -> None:
    with pytest.raises(ScheduleFileError):
        parse_file(text, BERLIN, START)


@pytest.mark.parametrize(
    "entry",
    [
        {"id": 1, "text": "x", "when": "every day at 9", "created": "9999-12-31T23:59:59-14:00"},
        {"id": 1, "text": "x", "when": "every day at 9", "created": ["[" * 10]},
        {"id": 1, "text": "x" * 100_000, "when": "in 1 hour"},
        {"id": 1, "text": "x", "when": "in 1 hour" + " " * 10_000 + "!"},
        {"id": 1, "kind": [1, [2, [3]]], "text": "x", "when": "in 1 hour"},
    ],
)
def test_odd_entries_are_reported_not_raised(entry: dict) -> None:
    parsed = parse_file(_file(entry), BERLIN, START)
    assert parsed.jobs == [] and len(parsed.problems) == 1
    assert len(parsed.problems[0]) < 400  # one line for the owner, not the file echoed


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    ws = tmp_path / "ana"
    ws.mkdir()
    with open(schedule_path(ws), "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(ScheduleFileError, match="at most"):
        read_jobs(ws, BERLIN)


def test_a_hostile_state_journal_is_skipped_line_by_line(tmp_path: Path) -> None:
    ws = tmp_path / "ana"
    ws.mkdir()
    lines = [
        "[" * 50_000,
        '{"e": "skip", "job": 1e999, "last_due": "2026-01-01T00:00:00+00:00"}',
        '{"e": "next", "job": 2, "next_due": "9999-12-31T23:59:59-14:00", "basis": 1}',
        '{"e": "job", "job": "' + "9" * 5000 + '"}',
        '{"e": "skip", "job": 3, "last_due": "2026-01-01T00:00:00+00:00"}',
    ]
    state_path(ws).write_text("\n".join(lines) + "\n")
    state = load_state(ws)
    assert state.jobs[3].outcome == "skipped" and state.needs_compaction


async def test_start_with_hostile_files_serves_everyone_else(rig: Rig, caplog) -> None:
    """On main: `start()` raised OverflowError (RecursionError for the deep file), so
    `clawgate run` exited and nobody got a reminder."""
    rig.zones["cem"] = BERLIN
    (rig.root / "cem").mkdir(mode=0o700)
    rig.add("ben", "in 30 minutes", "water the plants")
    schedule_path(rig.root / "ana").write_text(
        _file(
            {"id": 1, "text": "boom", "when": "in 99999999999999 days"},
            {"id": 2, "text": "stretch", "when": "in 1 hour", "created": START.isoformat()},
        )
    )
    schedule_path(rig.root / "cem").write_text(DEEP)
    await rig.start()
    await rig.advance(hours=2)
    assert sorted(rig.host.texts()) == ["stretch", "water the plants"]
    scheduler = rig.scheduler
    assert scheduler is not None
    assert "out of range" in scheduler.problems("ana")[0]
    assert "nested more than" in scheduler.problems("cem")[0]
    # What the owner sees with /reminders (and `clawgate schedule list`).
    views, problems = list_jobs(rig.root / "ana", BERLIN)
    shown = render_list(views, problems, BERLIN, rig.time.now())
    assert "! not running: job 1:" in shown and "out of range" in shown
    with pytest.raises(ScheduleFileError):
        list_jobs(rig.root / "cem", BERLIN)
    await rig.stop()


async def test_a_broken_file_appearing_later_is_logged_once_and_the_loop_stays_calm(
    rig: Rig, caplog
) -> None:
    """On main: every pass after the hand edit raised, the pass did not count as a scan, and
    the loop went round without sleeping, logging a traceback each time (about 3,000 in
    10 s in the red-team run). Here: one warning per version of the file, and ben's
    reminders keep coming."""
    rig.add("ben", "every hour", "posture check")
    await rig.start(rescan_seconds=30, max_wait=30)
    scheduler = rig.scheduler
    assert scheduler is not None
    passes = 0
    discover = scheduler.discover

    def counting_discover():  # type: ignore[no-untyped-def]
        nonlocal passes
        passes += 1
        return discover()

    scheduler.discover = counting_discover
    caplog.set_level(logging.INFO, logger="scheduler")
    caplog.clear()
    schedule_path(rig.root / "ana").write_text(
        _file({"id": 1, "text": "boom", "when": "in 99999999999999 days"})
    )
    await rig.advance(hours=3)
    assert rig.host.texts().count("posture check") == 3
    broken = [r for r in caplog.records if "out of range" in r.getMessage()]
    assert len(broken) == 1, [r.getMessage() for r in caplog.records][:5]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert passes <= 3 * 3600 / 30 + 2  # one rescan per 30 s of (virtual) time, no more
    # The person fixes the file: read again, reported again only if it is still wrong.
    schedule_path(rig.root / "ana").write_text(DEEP)
    await rig.advance(minutes=5)
    assert [r for r in caplog.records if "nested more than" in r.getMessage()]
    assert "nested more than" in scheduler.problems("ana")[0]
    await rig.stop()
