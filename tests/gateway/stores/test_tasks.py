"""The tasks table (gateway/stores/tasks.py): numbers per person, the limits checked where the
row is inserted, a cancel from another process, and a final state written once with its
report in the outbox's transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from gateway.stores.migrations import MIGRATIONS, migrate
from gateway.stores.state import StateDB
from gateway.stores.tasks import NewTask, TaskLimitReached


def _new(person: str = "ana", goal: str = "sum up my notes", at: float = 1000.0) -> NewTask:
    return NewTask(
        person=person,
        workspace=f"/w/{person}",
        channel="telegram",
        chat_id="42",
        session_key=f"dm-{person}",
        private=True,
        goal=goal,
        tools=("read_file", "web_fetch"),
        token_cap=5000,
        deadline=at + 600,
        created_at=at,
        context="she keeps notes in notes/",
    )


async def test_tasks_are_numbered_per_person_and_read_back_whole(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:
        first = await state.tasks.add(_new(), max_per_person=5, max_total=10)
        second = await state.tasks.add(_new(goal="two"), max_per_person=5, max_total=10)
        bob = await state.tasks.add(_new("bob"), max_per_person=5, max_total=10)
        assert (first.number, second.number, bob.number) == (1, 2, 1)
        assert first.state == "queued" and first.tools == ("read_file", "web_fetch")
        assert first.private and first.context == "she keeps notes in notes/"
        assert first.deadline == 1600.0 and first.token_cap == 5000
        assert await state.tasks.by_number("ana", 2) == second
        assert await state.tasks.get(bob.id) == bob
        assert [t.number for t in await state.tasks.list_for("ana")] == [2, 1]
        assert [t.person for t in await state.tasks.list_all()] == ["bob", "ana", "ana"]
        assert await state.tasks.by_number("ana", 3) is None


async def test_the_limits_hold_even_when_starts_race(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:

        async def start(person: str) -> str:
            try:
                await state.tasks.add(_new(person), max_per_person=2, max_total=3)
            except TaskLimitReached as exc:
                return str(exc)
            return "ok"

        outcomes = await asyncio.gather(*(start("ana") for _ in range(5)))
        assert outcomes.count("ok") == 2
        assert "at most 2" in next(o for o in outcomes if o != "ok")
        assert await start("bob") == "ok"
        assert "at most 3 in all" in await start("cy")
        # A finished task frees its place.
        [one, *_] = await state.tasks.list_for("ana")
        await state.tasks.finish(one.id, "done", result="r", error="", at=2000.0, reported=True)
        assert await start("cy") == "ok"


async def test_a_cancel_from_another_process_is_seen_by_the_gateway(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as gateway:
        task = await gateway.tasks.add(_new(), max_per_person=5, max_total=10)
        async with StateDB.for_root(tmp_path) as cli:  # a second connection pair: the CLI's
            assert await cli.tasks.request_cancel("ana", 1, by="cli")
            assert not await cli.tasks.request_cancel("ana", 7)
            assert not await cli.tasks.request_cancel("bob", 1)
        assert await gateway.tasks.cancels_requested([task.id]) == {task.id}
        again = await gateway.tasks.get(task.id)
        assert again is not None and again.cancel_requested and again.cancelled_by == "cli"
        await gateway.tasks.finish(task.id, "cancelled", result="", error="", at=1.0, reported=True)
        assert not await gateway.tasks.request_cancel("ana", 1)  # finished: nothing to stop


async def test_progress_and_waiting_for_an_approval(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:
        task = await state.tasks.add(_new(), max_per_person=5, max_total=10)
        await state.tasks.mark_started(task.id, 1010.0)
        await state.tasks.note_step(task.id, tokens=120, cost=0.01)
        await state.tasks.note_step(task.id, tokens=80, cost=0.02)
        await state.tasks.set_waiting(task.id, True)
        now = await state.tasks.get(task.id)
        assert now is not None
        assert (now.state, now.steps, now.tokens, now.started_at) == (
            "waiting_approval",
            2,
            200,
            1010.0,
        )
        assert now.cost == pytest.approx(0.03)
        await state.tasks.set_waiting(task.id, False)
        assert [t.id for t in await state.tasks.active()] == [task.id]
        await state.tasks.mark_started(task.id, 5000.0)  # resumed after a restart
        resumed = await state.tasks.get(task.id)
        assert resumed is not None and (resumed.state, resumed.started_at) == ("running", 1010.0)


async def test_the_final_state_and_the_report_commit_together_and_once(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:
        task = await state.tasks.add(_new(), max_per_person=5, max_total=10)
        key = f"task:{task.id}"
        done = state.tasks.finish_write(
            task.id, "done", result="R", error="", at=9.0, reported=True
        )
        row = await state.outbox.enqueue_outbound("telegram", "42", "R", key=key, together=done)
        assert row is not None
        late = state.tasks.finish_write(
            task.id, "failed", result="", error="x", at=10.0, reported=True
        )
        assert (
            await state.outbox.enqueue_outbound("telegram", "42", "x", key=key, together=late)
            is None
        )
        final = await state.tasks.get(task.id)
        assert final is not None
        assert (final.state, final.result, final.reported, final.finished_at) == (
            "done",
            "R",
            True,
            9.0,
        )
        assert [m.text for m in await state.outbox.pending_outbound()] == ["R"]
        assert await state.tasks.active() == [] and await state.tasks.unreported() == []


async def test_a_report_owed_is_listed_until_it_is_made(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:
        task = await state.tasks.add(_new(), max_per_person=5, max_total=10)
        await state.tasks.finish(
            task.id, "timed_out", result="", error="late", at=5.0, reported=False
        )
        assert [t.id for t in await state.tasks.unreported()] == [task.id]
        await state.outbox.enqueue_outbound(
            "telegram",
            "42",
            "late",
            key=f"task:{task.id}",
            together=state.tasks.finish_write(
                task.id, "timed_out", result="", error="late", at=6.0, reported=True
            ),
        )
        assert await state.tasks.unreported() == []
        final = await state.tasks.get(task.id)
        assert final is not None and (final.finished_at, final.reported_at) == (5.0, 6.0)
    with pytest.raises(ValueError):
        state.tasks.finish_write(1, "running", result="", error="", at=1.0, reported=True)


async def test_a_database_at_version_10_gains_the_tasks_table_keeping_exec_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    migrate(db, MIGRATIONS[:10])
    db.execute(
        "INSERT INTO exec_runs (person_id, command, cwd, network, approved_by, ended,"
        " duration, bytes_out, at) VALUES ('ana', 'ls', '.', 0, 'allowlist', 'exit', 0.1, 3, 1)"
    )
    db.execute("COMMIT")
    db.close()
    async with StateDB(path) as state:
        task = await state.tasks.add(_new(), max_per_person=1, max_total=1)
        assert task.number == 1
        [(runs,)] = await state.database.rows("SELECT count(*) FROM exec_runs")
        assert runs == 1
