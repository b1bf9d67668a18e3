"""The scheduler with a fake clock: exact firing, order, late and skipped runs, restarts,
retries, agent tasks, reloads."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from scheduler import (
    Scheduler,
    SchedulerPolicy,
    WorkspaceRef,
    cancel,
    create,
    list_jobs,
)
from scheduler.jobs import schedule_path
from scheduler.state import load_state
from tests.scheduler.fakes import FakeHost, FakeTime

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # Monday 10:00 in Berlin


class Rig:
    """Workspaces on disk, virtual time, a recording host, and the scheduler over them."""

    def __init__(self, root: Path, people: tuple[str, ...] = ("ana", "ben")) -> None:
        self.root = root
        self.time = FakeTime(START)
        self.host = FakeHost(self.time)
        self.zones = dict.fromkeys(people, BERLIN)
        for person in people:
            (root / person).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.policy = SchedulerPolicy(rescan_seconds=10**9, max_wait=10**6)
        self.scheduler: Scheduler | None = None

    def refs(self) -> list[WorkspaceRef]:
        return [WorkspaceRef(p, self.root / p, z) for p, z in self.zones.items()]

    def add(self, person: str, when: str, text: str, kind: str = "message") -> int:
        job, _ = create(self.root / person, self.zones[person], when, text, kind, self.time.now())
        return job.id

    async def start(self, **policy: object) -> Scheduler:
        if policy:
            self.policy = SchedulerPolicy(**{"rescan_seconds": 10**9, "max_wait": 10**6, **policy})
        self.scheduler = Scheduler(self.refs, self.time, policy=self.policy, sleep=self.time.sleep)
        await self.scheduler.start(self.host)
        await self.settle()
        return self.scheduler

    async def stop(self) -> None:
        assert self.scheduler is not None
        await self.scheduler.stop()
        self.scheduler = None

    async def settle(self) -> None:
        """Let the scheduler run until it is asleep again with nothing in flight."""
        quiet = 0
        for _ in range(5000):
            if self.scheduler is None:
                return
            if not self.scheduler._tasks and self.time.waiting():
                quiet += 1
                if quiet > 5:
                    return
                await asyncio.sleep(0)
            else:
                quiet = 0
                await asyncio.sleep(0.0005)
        raise AssertionError("the scheduler did not settle")

    async def advance(self, **delta: float) -> None:
        await self.time.advance(timedelta(**delta), self.settle)

    def at(self, **delta: float) -> datetime:
        return START + timedelta(**delta)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path / "workspaces")


async def test_runs_fire_at_their_exact_time_in_order(rig: Rig) -> None:
    rig.add("ana", "in 90 minutes", "stretch")
    rig.add("ben", "in 30 minutes", "water the plants")
    rig.add("ana", "at 11:00", "call the dentist")  # 10:00 UTC
    rig.add("ben", "every 2 hours", "drink water")
    await rig.start()
    await rig.advance(hours=5)
    sent = [(s.person_id, s.text, s.at) for s in rig.host.sent]
    assert sent == [
        ("ben", "water the plants", rig.at(minutes=30)),
        ("ana", "call the dentist", rig.at(hours=1)),
        ("ana", "stretch", rig.at(minutes=90)),
        ("ben", "drink water", rig.at(hours=2)),
        ("ben", "drink water", rig.at(hours=4)),
    ]
    metrics = rig.scheduler.metrics  # type: ignore[union-attr]
    assert (metrics.fired, metrics.late, metrics.skipped, metrics.failed) == (5, 0, 0, 0)
    assert metrics.jobs == 1  # only the recurring job has a run ahead
    await rig.stop()


async def test_runs_due_together_in_one_workspace_go_out_in_id_order(rig: Rig) -> None:
    for number in range(1, 6):
        rig.add("ana", "at 12:00", f"note {number}")
    await rig.start()
    await rig.advance(hours=3)
    assert rig.host.texts() == [f"note {n}" for n in range(1, 6)]
    assert {s.at for s in rig.host.sent} == {rig.at(hours=2)}
    assert len(set(rig.host.calls)) == 5
    await rig.stop()


async def test_a_run_due_while_down_is_delivered_once_at_start_marked_late(rig: Rig) -> None:
    rig.add("ana", "at 15:00", "send the invoice")  # 14:00 UTC
    await rig.start()
    await rig.advance(hours=2)
    await rig.stop()  # down from 11:00 UTC ...
    rig.time.set(rig.at(hours=7))  # ... until 16:00 UTC
    await rig.start()
    assert rig.host.texts() == ["(late: due 15:00) send the invoice"]
    assert rig.host.sent[0].at == rig.at(hours=7)
    assert rig.scheduler.metrics.late == 1  # type: ignore[union-attr]
    await rig.stop()
    await rig.start()  # another restart: nothing again
    await rig.advance(days=2)
    assert len(rig.host.calls) == 1
    views, _ = list_jobs(rig.root / "ana", BERLIN)
    assert views == []  # done one-shots leave the list
    await rig.stop()


async def test_a_run_older_than_the_grace_is_skipped(rig: Rig) -> None:
    rig.add("ana", "at 12:00", "stand up")
    rig.add("ana", "at 18:00", "evening walk")
    rig.time.set(rig.at(hours=8))  # 17:00 UTC: 12:00 local is 6 h past, 18:00 local is now
    await rig.start(grace=timedelta(hours=2))
    assert rig.host.texts() == ["evening walk"]  # 18:00 CET = 17:00 UTC: on time
    metrics = rig.scheduler.metrics  # type: ignore[union-attr]
    assert (metrics.fired, metrics.skipped) == (1, 1)
    assert load_state(rig.root / "ana").jobs[1].outcome == "skipped"
    await rig.stop()


async def test_a_recurring_job_that_missed_runs_delivers_only_the_latest(rig: Rig) -> None:
    rig.add("ana", "every hour", "posture check")  # 10:00, 11:00, ... UTC
    rig.add("ana", "every day at 09:00", "plan the day")  # 08:00 UTC
    rig.time.set(rig.at(hours=5, minutes=30))  # missed 10, 11, 12, 13, 14 UTC
    await rig.start(grace=timedelta(hours=3))
    assert rig.host.texts() == ["(late: due 15:00) posture check"]
    assert rig.scheduler.metrics.skipped == 4  # type: ignore[union-attr]
    await rig.advance(minutes=30)
    assert rig.host.sent[-1].text == "posture check"
    assert rig.host.sent[-1].at == rig.at(hours=6)
    await rig.advance(hours=17)  # the next morning at 09:00 Berlin
    morning = datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert [s.text for s in rig.host.sent if s.text == "plan the day"] == ["plan the day"]
    assert {s.at for s in rig.host.sent if s.text == "plan the day"} == {morning}
    await rig.stop()


async def test_restart_reloads_jobs_and_keeps_their_rhythm(rig: Rig) -> None:
    rig.add("ana", "every 2 hours", "drink water")
    rig.add("ana", "every weekday at 10:30", "stand-up")
    await rig.start()
    await rig.advance(hours=3)  # water at 11:00 UTC; stand-up at 09:30 UTC
    await rig.stop()
    before = list(rig.host.texts())
    await rig.advance(minutes=30)  # 12:30, nothing due while down
    await rig.start()
    await rig.advance(hours=1)  # water at 13:00 UTC
    assert rig.host.texts() == [*before, "drink water"]
    assert rig.host.sent[-1].at == rig.at(hours=4)
    assert len(rig.host.calls) == len(set(rig.host.calls))
    await rig.stop()


async def test_a_run_claimed_before_a_crash_is_delivered_once_with_the_same_key(rig: Rig) -> None:
    rig.add("ana", "in 10 minutes", "take the cake out")
    rig.host.block = asyncio.Event()  # the send hangs ...
    await rig.start()
    await rig.time.advance(timedelta(minutes=10), lambda: asyncio.sleep(0))
    for _ in range(50):
        await asyncio.sleep(0.002)
    await rig.scheduler.stop()  # type: ignore[union-attr]  # ... and the gateway goes down
    rig.scheduler = None
    assert rig.host.calls and not rig.host.sent
    pending = load_state(rig.root / "ana").pending
    assert list(pending) == rig.host.calls[:1]  # claimed on disk before the send
    # The first attempt did reach the outbox after all; the restart sends the same key.
    rig.host.block = None
    rig.host.keys.add(rig.host.calls[0])
    await rig.start()
    assert rig.host.calls == [rig.host.calls[0]] * 2
    assert rig.host.sent == []  # the outbox dropped the repeat
    assert load_state(rig.root / "ana").pending == {}
    await rig.stop()


async def test_failed_deliveries_are_retried_then_counted_failed(rig: Rig) -> None:
    rig.add("ana", "in 10 minutes", "first")
    rig.add("ben", "in 10 minutes", "second")
    rig.host.fail = 2  # both first attempts fail
    await rig.start(retry_delays=(30.0, 60.0))
    await rig.advance(minutes=10)
    assert rig.host.sent == []
    await rig.advance(seconds=29)
    assert rig.host.sent == []
    await rig.advance(seconds=1)
    assert sorted(rig.host.texts()) == ["first", "second"]
    assert {s.at for s in rig.host.sent} == {rig.at(minutes=10, seconds=30)}
    metrics = rig.scheduler.metrics  # type: ignore[union-attr]
    assert (metrics.fired, metrics.failed) == (2, 0)
    rig.add("ana", "in 10 minutes", "never")
    await rig.scheduler.reload("ana")  # type: ignore[union-attr]
    rig.host.fail = 10
    await rig.advance(minutes=20)
    assert rig.host.calls.count(rig.host.calls[-1]) == 3  # the run and its two retries
    assert metrics.failed == 1
    state = load_state(rig.root / "ana")
    assert state.pending == {} and state.jobs[2].outcome == "failed"
    assert "ConnectionError" in state.jobs[2].error
    await rig.stop()


async def test_agent_tasks_deliver_their_result_unless_it_is_an_acknowledgement(rig: Rig) -> None:
    rig.add("ana", "in 5 minutes", "summarize my notes", kind="agent")
    rig.add("ana", "in 6 minutes", "anything urgent?", kind="agent")
    rig.host.replies["anything urgent?"] = "HEARTBEAT_OK"
    await rig.start()
    await rig.advance(minutes=10)
    assert rig.host.texts() == ["done: summarize my notes"]
    assert rig.host.turns == ["summarize my notes", "anything urgent?"]
    assert rig.scheduler.metrics.silent == 1  # type: ignore[union-attr]
    await rig.stop()


async def test_an_agent_result_is_kept_so_a_retry_does_not_ask_the_model_again(rig: Rig) -> None:
    rig.add("ana", "in 5 minutes", "weekly review", kind="agent")
    rig.host.fail = 1
    await rig.start(retry_delays=(30.0,))
    await rig.advance(minutes=5)
    pending = list(load_state(rig.root / "ana").pending.values())
    assert [p.result for p in pending] == ["done: weekly review"]
    await rig.stop()
    await rig.start()  # restart: deliver the stored reply
    assert rig.host.texts() == ["done: weekly review"]
    assert rig.host.turns == ["weekly review"]
    await rig.stop()


async def test_adding_a_job_wakes_the_scheduler_and_cancelling_stops_it(rig: Rig) -> None:
    await rig.start()
    first = rig.add("ana", "in 2 minutes", "soon")
    doomed = rig.add("ana", "in 3 minutes", "cancelled")
    await rig.scheduler.reload("ana")  # type: ignore[union-attr]
    assert cancel(rig.root / "ana", BERLIN, doomed) is not None
    await rig.scheduler.reload("ana")  # type: ignore[union-attr]
    await rig.advance(minutes=10)
    assert rig.host.texts() == ["soon"]
    assert rig.host.sent[0].at == rig.at(minutes=2)
    assert cancel(rig.root / "ana", BERLIN, first) is None  # done already
    await rig.stop()


async def test_hand_edits_are_picked_up_by_the_rescan(rig: Rig) -> None:
    rig.add("ana", "every day at 12:00", "lunch")
    await rig.start(rescan_seconds=60)
    path = schedule_path(rig.root / "ana")
    data = json.loads(path.read_text())
    data["jobs"][0]["when"] = "every day at 11:15"
    data["jobs"].append({"id": 7, "text": "hand-written", "when": "2026-11-30 10:30"})
    data["jobs"].append({"id": 8, "text": "broken", "when": "someday"})
    path.write_text(json.dumps(data))
    await rig.advance(hours=3)
    assert [(s.text, s.at) for s in rig.host.sent] == [
        ("hand-written", rig.at(minutes=30)),
        ("lunch", rig.at(hours=1, minutes=15)),
    ]
    assert any("job 8" in p for p in rig.scheduler.problems("ana"))  # type: ignore[union-attr]
    await rig.stop()


async def test_a_time_zone_change_moves_wall_clock_jobs(rig: Rig) -> None:
    rig.add("ana", "every day at 08:30", "morning")
    await rig.start(rescan_seconds=60)
    rig.zones["ana"] = ZoneInfo("America/New_York")  # 04:00 there: today's 08:30 is ahead
    await rig.advance(days=1, hours=6)
    assert [s.at for s in rig.host.sent] == [
        datetime(2026, 11, 30, 13, 30, tzinfo=UTC),
        datetime(2026, 12, 1, 13, 30, tzinfo=UTC),
    ]
    await rig.stop()


async def test_daily_job_keeps_local_time_across_dst_in_the_loop(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "w", ("ana",))
    rig.time.set(datetime(2026, 3, 27, 12, tzinfo=UTC))
    rig.add("ana", "every day at 08:30", "morning")
    await rig.start()
    await rig.time.advance(timedelta(days=3), rig.settle)
    assert [f"{s.at.astimezone(BERLIN):%d %H:%M}" for s in rig.host.sent] == [
        "28 08:30",
        "29 08:30",
        "30 08:30",
    ]
    assert [s.at.hour for s in rig.host.sent] == [7, 6, 6]
    await rig.stop()


async def test_the_state_file_is_private(rig: Rig) -> None:
    rig.add("ana", "in 1 minute", "x")
    await rig.start()
    await rig.advance(minutes=2)
    for name in (".clawgate-schedule.json", ".clawgate-schedule-state.jsonl"):
        assert (rig.root / "ana" / name).stat().st_mode & 0o777 == 0o600
    await rig.stop()


async def test_the_state_journal_stays_short(rig: Rig) -> None:
    rig.add("ana", "every 10 minutes", "tick")
    await rig.start()
    await rig.advance(days=2)
    assert len(rig.host.sent) == 288
    lines = (rig.root / "ana" / ".clawgate-schedule-state.jsonl").read_text().splitlines()
    assert len(lines) <= 2 + 64 + 3  # compacted as it grows (one job, no run in flight)
    await rig.stop()
    assert load_state(rig.root / "ana").jobs[1].runs == 288


async def test_editing_a_rule_counts_from_the_edit_never_a_missed_run(rig: Rig) -> None:
    rig.add("ana", "every day at 12:00", "lunch")  # 11:00 UTC
    await rig.start(rescan_seconds=60)
    await rig.advance(hours=1)  # 11:00 local: now the rule moves to 10:30, already past today
    path = schedule_path(rig.root / "ana")
    data = json.loads(path.read_text())
    data["jobs"][0]["when"] = "every day at 10:30"
    path.write_text(json.dumps(data))
    await rig.advance(hours=23, minutes=30)  # Tuesday 09:30 UTC = 10:30 local
    assert [(s.text, s.at) for s in rig.host.sent] == [("lunch", rig.at(hours=24, minutes=30))]
    await rig.stop()
