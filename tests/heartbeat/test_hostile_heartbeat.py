"""A hostile HEARTBEAT.md or heartbeat state file is a reported problem, never a failed beat.

On main an interval like `99999999999999999999w` raised OverflowError out of the parser (every
beat of that workspace ended in "internal error"), a state file with a naive time made the
alert check raise TypeError, and a deeply nested one was not caught at all."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from gateway.clock import FixedClock
from heartbeat import load_state, parse_checklist
from heartbeat.checklist import MAX_CHECKLIST_BYTES, load_checklist
from heartbeat.store import STATE_FILE, HeartbeatState
from tests.heartbeat.test_logic import NOW, ScriptedHost, _beat


@pytest.mark.parametrize(
    "interval", ["99999999999999999999w", "9" * 400 + "s", "1" + "0" * 30 + "d", "5000000w"]
)
def test_an_interval_out_of_range_is_a_problem_of_that_task(interval: str) -> None:
    checklist = parse_checklist(
        f"tasks:\n- name: a\n  interval: {interval}\n  prompt: A\n"
        "- name: b\n  interval: 1h\n  prompt: B\n"
    )
    assert [task.name for task in checklist.tasks] == ["b"]
    assert len(checklist.problems) == 1 and "task 1 (a)" in checklist.problems[0]


def test_a_huge_or_binary_checklist_is_read_up_to_its_cap(tmp_path) -> None:
    (tmp_path / "HEARTBEAT.md").write_bytes(b"- check\n" + b"\xff\x00" * MAX_CHECKLIST_BYTES)
    checklist = load_checklist(tmp_path)
    assert checklist is not None and "only the start is read" in checklist.problems[0]
    assert "- check" in checklist.body


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        json.dumps({"tokens_today": 10**30, "last_beat_at": "9999-12-31T23:59:59-14:00"}),
        '{"tokens_today": ' + "9" * 5000 + "}",
        json.dumps({"alerts": {"x": "2026-03-02T10:00:00"}, "task_runs": {"a": 5, "b": [1]}}),
        json.dumps(["not", "an", "object"]),
        '{"last_status": "\\ud800"}',
    ],
)
def test_a_hostile_state_file_never_raises(tmp_path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    state = load_state(tmp_path)
    assert isinstance(state, HeartbeatState)
    assert all(at.tzinfo is not None for at in state.alerts.values())
    assert state.tokens_today < 10**15


async def test_a_naive_alert_time_in_the_state_does_not_break_the_beat(tmp_path) -> None:
    (tmp_path / "HEARTBEAT.md").write_text("- tell me if anything is urgent\n")
    (tmp_path / STATE_FILE).write_text(
        json.dumps(
            {"alerts": {"0" * 32: "2026-03-02T09:00:00"}, "task_runs": {"x": "2026-03-01T00:00"}}
        )
    )
    host = ScriptedHost(["The roof is leaking!"])
    outcome = await _beat(tmp_path, host, FixedClock(NOW)).beat()
    assert outcome.status == "alert", outcome


async def test_checklist_problems_are_logged_once_per_version(tmp_path, caplog) -> None:
    (tmp_path / "HEARTBEAT.md").write_text(
        "- check\ntasks:\n- name: a\n  interval: 99999999999999999999w\n  prompt: A\n"
    )
    clock = FixedClock(NOW)
    beat = _beat(tmp_path, ScriptedHost([]), clock)
    caplog.set_level(logging.WARNING, logger="heartbeat")
    for _ in range(3):
        outcome = await beat.beat()
        assert outcome.status == "ok", outcome
        clock.advance(timedelta(hours=1))
    assert len([r for r in caplog.records if "task 1 (a)" in r.getMessage()]) == 1
