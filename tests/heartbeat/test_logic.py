"""Heartbeat logic without a gateway: checklists, acknowledgements, hours, state, timers."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gateway.clock import FixedClock
from heartbeat import (
    ActiveHours,
    BeatOutcome,
    DmTarget,
    Heartbeat,
    HeartbeatPolicy,
    HeartbeatService,
    HeartbeatTimer,
    LightTurn,
    check_reply,
    is_effectively_empty,
    load_state,
    parse_checklist,
    parse_clock,
    save_state,
    scrub_token,
)
from heartbeat.checklist import format_interval, parse_interval
from heartbeat.store import STATE_FILE, HeartbeatState

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TEMPLATE = (
    Path(__file__).parents[2] / "gateway" / "workspace" / "templates" / "HEARTBEAT.md"
).read_text()


# -- checklist -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        TEMPLATE,
        "# HEARTBEAT.md\n\n## Checks\n",
        "<!-- a\nmulti-line\ncomment -->",
        "# List\n- \n* \n1. \n- [ ]\n- [x]\n---\n",
        "## A\n<!-- - do the thing -->\n  \n",
    ],
)
def test_effectively_empty_checklists(text):
    assert is_effectively_empty(text)
    assert parse_checklist(text).empty


@pytest.mark.parametrize(
    "text",
    [
        "- check the daily note",
        "Remind me of bills.",
        "# Checks\n1. water plants",
        "- [ ] call mum",
        "<!-- c -->ping me if the note says URGENT",
    ],
)
def test_non_empty_checklists(text):
    assert not is_effectively_empty(text)


def test_tasks_block_intervals_and_due_tasks():
    text = """# HEARTBEAT.md
- Check today's note for anything due.

tasks:
- name: inbox
  interval: 2h
  prompt: Check memory/inbox.md for anything older
    than a day.
- name: plants
  every: 3d
  prompt: "Remind me to water the plants."
- name: broken
  interval: sometimes
  prompt: nope
- prompt: no name here
  interval: 1h

## After
- one more line
"""
    checklist = parse_checklist(text)
    assert [(t.name, t.every) for t in checklist.tasks] == [
        ("inbox", timedelta(hours=2)),
        ("plants", timedelta(days=3)),
    ]
    assert checklist.tasks[0].prompt == "Check memory/inbox.md for anything older than a day."
    assert len(checklist.problems) == 2
    assert "- one more line" in checklist.body and "tasks:" not in checklist.body
    runs = {"inbox": NOW - timedelta(hours=1), "plants": NOW - timedelta(days=4)}
    due = checklist.due(runs, NOW)
    assert [t.name for t in due] == ["plants"]
    rendered = checklist.render(due)
    assert "water the plants" in rendered and "inbox" not in rendered
    assert "Check today's note" in rendered


def test_tasks_only_checklist_is_not_empty_but_body_is():
    checklist = parse_checklist(
        "# HB\n<!-- note -->\ntasks:\n- name: a\n  interval: 1h\n  prompt: do a\n"
    )
    assert not checklist.empty and checklist.body_empty
    assert checklist.due({"a": NOW - timedelta(minutes=5)}, NOW) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("1h30m", timedelta(minutes=90)),
        ("90s", timedelta(90) / 86400 * 1),
        ("2d", timedelta(days=2)),
        ("1w", timedelta(weeks=1)),
        ("0", None),
        ("off", None),
        (" 45 M ", timedelta(minutes=45)),
    ],
)
def test_parse_interval(text, expected):
    assert parse_interval(text) == expected


@pytest.mark.parametrize("text", ["", "30", "5x", "m", "1h-2m", "-5m"])
def test_parse_interval_rejects(text):
    with pytest.raises(ValueError):
        parse_interval(text)


@pytest.mark.timeout(30)  # it took minutes (quadratic in the digits); now a millisecond
def test_a_long_run_of_digits_is_refused_at_once():
    """Found by test_parsers_are_total under load: a HEARTBEAT.md interval of 40,000 digits
    took 139 s to refuse, blocking the event loop that reads the checklist."""
    with pytest.raises(ValueError, match="invalid interval"):
        parse_interval("9" * 100_000 + " noon")


def test_format_interval():
    assert [format_interval(timedelta(minutes=m)) for m in (30, 60, 90, 1440)] == [
        "30m",
        "1h",
        "90m",
        "1d",
    ]


# -- acknowledgements -----------------------------------------------------------------------

ACK_VARIANTS = [
    "HEARTBEAT_OK",
    "HEARTBEAT_OK.",
    "HEARTBEAT_OK!",
    "**HEARTBEAT_OK**",
    "*HEARTBEAT_OK*",
    "_HEARTBEAT_OK_",
    "__HEARTBEAT_OK__",
    "`HEARTBEAT_OK`",
    "~~HEARTBEAT_OK~~",
    "HEARTBEAT\\_OK",
    "heartbeat_ok",
    "  HEARTBEAT_OK  \n",
    "**HEARTBEAT_OK**.",
    "HEARTBEAT_OK - nothing needs attention.",
    "All quiet, nothing due today. HEARTBEAT_OK",
    "Checked the note: nothing due.\n\n**HEARTBEAT_OK**",
    "HEARTBEAT_OK: " + "x" * 300,
    "",
    "   ",
]


@pytest.mark.parametrize("reply", ACK_VARIANTS)
def test_acknowledgement_variants_are_dropped(reply):
    assert check_reply(reply) == check_reply(reply)  # pure
    assert check_reply(reply).acknowledged


def test_long_text_around_the_token_is_an_alert_without_the_token():
    body = "Your passport expires next week. " * 10  # 330 characters
    for reply in (f"HEARTBEAT_OK\n\n{body}", f"{body}\n**HEARTBEAT_OK**"):
        check = check_reply(reply)
        assert not check.acknowledged
        assert "HEARTBEAT" not in check.text and check.text.startswith("Your passport")


def test_real_alert_and_token_in_the_middle():
    assert check_reply("Rent is due today.") == check_reply("Rent is due today.")
    assert check_reply("Rent is due today.").text == "Rent is due today."
    check = check_reply(
        "Rent is due HEARTBEAT_OK today, pay it before noon please.", max_other_chars=10
    )
    assert not check.acknowledged and "HEARTBEAT" not in check.text


def test_ack_limit_is_configurable():
    assert check_reply("HEARTBEAT_OK " + "y" * 50, max_other_chars=40).acknowledged is False
    assert check_reply("HEARTBEAT_OK " + "y" * 300).acknowledged


def test_scrub_token_leaves_other_text_alone():
    assert scrub_token("Hello there") == "Hello there"
    assert scrub_token("Done. **HEARTBEAT_OK**") == "Done."
    assert scrub_token("HEARTBEAT_OK") == ""


# -- active hours ---------------------------------------------------------------------------


def test_active_hours_same_day_window():
    hours = ActiveHours(time(8), time(22), UTC)
    assert hours.contains(NOW.replace(hour=8))
    assert not hours.contains(NOW.replace(hour=22))
    assert not hours.contains(NOW.replace(hour=3))


def test_active_hours_across_midnight():
    night_owl = ActiveHours(time(18), time(2), UTC)
    assert night_owl.contains(NOW.replace(hour=23, minute=59))
    assert night_owl.contains(NOW.replace(hour=1, minute=30))
    assert not night_owl.contains(NOW.replace(hour=2))
    assert not night_owl.contains(NOW.replace(hour=12))


def test_active_hours_in_the_persons_zone():
    tokyo = ActiveHours(time(8), time(22), ZoneInfo("Asia/Tokyo"))
    # 10:00 UTC is 19:00 in Tokyo (active); 14:00 UTC is 23:00 there (quiet).
    assert tokyo.contains(NOW)
    assert not tokyo.contains(NOW.replace(hour=14))
    # 23:30 UTC on Sunday is 08:30 Monday in Tokyo.
    assert tokyo.contains(datetime(2026, 3, 1, 23, 30, tzinfo=UTC))
    assert tokyo.local_date(datetime(2026, 3, 1, 23, 30, tzinfo=UTC)).isoformat() == "2026-03-02"
    la = ActiveHours(time(22), time(7), ZoneInfo("America/Los_Angeles"))
    assert la.contains(NOW)  # 02:00 in Los Angeles: inside the 22:00-07:00 window
    assert not la.contains(NOW.replace(hour=20))  # 12:00 there


def test_parse_clock_and_all_day():
    assert parse_clock("24:00") == time(0)
    assert ActiveHours(parse_clock("00:00"), parse_clock("24:00")).always
    assert ActiveHours(time(8), parse_clock("24:00"), UTC).contains(NOW.replace(hour=23))
    # One reader for the active hours and the scheduler (heartbeat/timeofday.py).
    assert parse_clock("8") == time(8) and parse_clock("10pm") == time(22)
    assert parse_clock("noon") == time(12) and parse_clock("9.30") == time(9, 30)
    for bad in ("25:00", "24:30", "08:60", "13pm", "x", "8 o'clock tomorrow"):
        with pytest.raises(ValueError):
            parse_clock(bad)


# -- state ----------------------------------------------------------------------------------


def test_state_round_trip_and_damaged_file(tmp_path):
    state = HeartbeatState(
        last_beat_at=NOW, last_status="ok", tokens_today=12, token_day="2026-03-02"
    )
    state.remember_alert("Rent is due", NOW, timedelta(hours=24))
    state.task_runs["inbox"] = NOW
    save_state(tmp_path, state)
    again = load_state(tmp_path)
    assert again == state
    assert again.delivered_recently(
        "  rent IS   due ", NOW + timedelta(hours=23), timedelta(hours=24)
    )
    assert not again.delivered_recently(
        "Rent is due", NOW + timedelta(hours=24), timedelta(hours=24)
    )
    (tmp_path / STATE_FILE).write_text("{not json")
    assert load_state(tmp_path) == HeartbeatState()


# -- a beat with a scripted host --------------------------------------------------------------


class ScriptedHost:
    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.turns: list[str] = []
        self.delivered: list[tuple[DmTarget, str, bool]] = []
        self.busy = False
        self.target: DmTarget | None = DmTarget("fakechat", "ana")

    def dm_busy(self, person_id: str) -> bool:
        return self.busy

    async def dm_target(self, person_id: str) -> DmTarget | None:
        return self.target

    async def light_turn(self, workspace, person_id, checklist, prompt) -> LightTurn:
        self.turns.append(checklist)
        return LightTurn(self.replies.pop(0) if self.replies else "HEARTBEAT_OK", 100, 10)

    async def deliver(self, workspace, person_id, target, text, *, alert) -> None:
        self.delivered.append((target, text, alert))


def _beat(tmp_path, host, clock, **policy) -> Heartbeat:
    policy.setdefault("active_hours", ActiveHours())
    return Heartbeat(tmp_path, "ana", host, HeartbeatPolicy(**policy), clock)


async def test_only_due_tasks_reach_the_model(tmp_path):
    (tmp_path / "HEARTBEAT.md").write_text(
        "tasks:\n- name: fast\n  interval: 1h\n  prompt: FAST\n"
        "- name: slow\n  interval: 1d\n  prompt: SLOW\n"
    )
    clock = FixedClock(NOW)
    host = ScriptedHost([])
    beat = _beat(tmp_path, host, clock)
    assert (await beat.beat()).status == "ok"
    assert "FAST" in host.turns[0] and "SLOW" in host.turns[0]
    clock.advance(timedelta(minutes=30))
    assert (await beat.beat()).reason == "no task is due"
    clock.advance(timedelta(minutes=30))
    await beat.beat()
    assert "FAST" in host.turns[1] and "SLOW" not in host.turns[1]
    assert len(host.turns) == 2


# -- timers ---------------------------------------------------------------------------------


class FakeSleep:
    """Advances the clock instead of sleeping; blocks for good after `limit` sleeps."""

    def __init__(self, clock: FixedClock, limit: int = 1_000) -> None:
        self.clock = clock
        self.limit = limit
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        if len(self.delays) >= self.limit:
            await asyncio.Event().wait()
        self.delays.append(seconds)
        self.clock.advance(timedelta(seconds=seconds))


async def test_timer_spreads_first_beat_and_then_keeps_the_interval(tmp_path):
    (tmp_path / "HEARTBEAT.md").write_text("- check things\n")
    clock = FixedClock(NOW)
    sleep = FakeSleep(clock)
    host = ScriptedHost([])
    beat = _beat(tmp_path, host, clock, jitter_fraction=0.1)
    timer = HeartbeatTimer(beat, clock, sleep=sleep, rng=random.Random(7))
    await timer.run(max_beats=4)
    first, *rest = sleep.delays
    assert 0 <= first < 1800
    assert all(1620 <= d <= 1980 for d in rest) and len(rest) == 3
    state = load_state(tmp_path)
    assert state.next_beat_at is not None and state.last_status == "ok"

    # Spread: different workspaces (different random draws) start at different points.
    firsts = {
        round(
            HeartbeatTimer(beat, clock, rng=random.Random(seed))
            .first_due(HeartbeatState())
            .timestamp()
        )
        for seed in range(10)
    }
    assert len(firsts) == 10


async def test_timer_keeps_its_rhythm_across_a_restart(tmp_path):
    clock = FixedClock(NOW)
    beat = _beat(tmp_path, ScriptedHost([]), clock)
    timer = HeartbeatTimer(beat, clock, rng=random.Random(1))
    recent = HeartbeatState(last_beat_at=NOW - timedelta(minutes=10))
    assert timer.first_due(recent) == NOW + timedelta(minutes=20)
    stale = HeartbeatState(last_beat_at=NOW - timedelta(hours=5))
    assert NOW <= timer.first_due(stale) <= NOW + timedelta(minutes=5)


async def test_busy_session_is_retried_shortly(tmp_path):
    (tmp_path / "HEARTBEAT.md").write_text("- check things\n")
    clock = FixedClock(NOW)
    sleep = FakeSleep(clock)
    host = ScriptedHost(["Water the plants."])
    host.busy = True
    beat = _beat(tmp_path, host, clock, busy_retry=timedelta(seconds=45))
    timer = HeartbeatTimer(beat, clock, sleep=sleep, rng=random.Random(3))

    async def free_later() -> None:
        while len(sleep.delays) < 2:
            await asyncio.sleep(0)
        host.busy = False

    freer = asyncio.create_task(free_later())
    await timer.run(max_beats=2)
    await freer
    assert sleep.delays[1] == 45
    assert [text for _, text, _ in host.delivered] == ["Water the plants."]


async def test_service_runs_a_timer_per_workspace_and_picks_up_new_ones(tmp_path):
    clock = FixedClock(NOW)
    sleep = FakeSleep(clock, limit=10)
    started: list[str] = []
    workspaces = [("ana", tmp_path / "ana")]

    def make_timer(person_id: str, workspace: Path) -> HeartbeatTimer | None:
        workspace.mkdir(exist_ok=True)
        started.append(person_id)
        if person_id == "off":
            return None
        return HeartbeatTimer(_beat(workspace, ScriptedHost([]), clock), clock, sleep=sleep)

    async def never(seconds: float) -> None:
        await asyncio.Event().wait()

    service = HeartbeatService(lambda: list(workspaces), make_timer, sleep=never)
    await service.start()
    assert service.persons == ["ana"]
    workspaces += [("bo", tmp_path / "bo"), ("off", tmp_path / "off")]
    assert service.refresh() == 1
    assert service.persons == ["ana", "bo"]
    for _ in range(200):
        if all(load_state(tmp_path / p).last_status for p in ("ana", "bo")):
            break
        await asyncio.sleep(0.01)
    await service.stop()
    assert started == ["ana", "bo", "off"]
    assert load_state(tmp_path / "ana").last_status == "skipped"  # no HEARTBEAT.md there
    assert load_state(tmp_path / "bo").last_reason == "HEARTBEAT.md is missing"
    assert service.persons == []


def test_outcome_describe():
    assert BeatOutcome("ok", "fine", 12).describe() == "ok: fine, 12 tokens"
