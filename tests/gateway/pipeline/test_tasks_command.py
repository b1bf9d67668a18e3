"""`/tasks` and `/tasks cancel N` (gateway/pipeline/tasks_command.py) over a real state
database: the listing's words, the answers to a bad number, a finished task, a group."""

from __future__ import annotations

from pathlib import Path

from gateway.pipeline.routing import Route
from gateway.pipeline.tasks_command import tasks_command
from gateway.stores.state import StateDB
from gateway.stores.tasks import NewTask


def _route(private: bool = True) -> Route:
    return Route("ana", Path("/w/ana"), "ana:dm", private, "telegram", "42", sender_id="42")


def _new(goal: str, at: float) -> NewTask:
    return NewTask(
        person="ana",
        workspace="/w/ana",
        channel="telegram",
        chat_id="42",
        session_key="ana:dm",
        private=True,
        goal=goal,
        tools=("read_file",),
        token_cap=1000,
        deadline=at + 600,
        created_at=at,
    )


async def test_the_listing_cancel_and_the_refusals(tmp_path: Path) -> None:
    async with StateDB.for_root(tmp_path) as state:
        store = state.tasks
        assert "No tasks yet" in await tasks_command(store, _route(), "", now=0)
        first = await store.add(
            _new("compare the three pages " * 5, 100.0), max_per_person=5, max_total=5
        )
        await store.add(_new("draft a summary", 200.0), max_per_person=5, max_total=5)
        await store.mark_started(first.id, 110.0)
        await store.note_step(first.id, tokens=12_345, cost=0.25)
        await store.finish(first.id, "done", result="r", error="", at=170.0, reported=True)
        listing = await tasks_command(store, _route(), "", now=260.0)
        lines = listing.splitlines()
        assert lines[0] == "Your tasks:"
        assert lines[1] == "#2 queued, 60 s, 0 tokens: draft a summary"
        assert lines[2].startswith("#1 done, 60 s, 12,345 tokens, $0.25: compare the three")
        assert lines[2].endswith("…") and len(lines[2]) < 120
        assert "Stopping task #2" in await tasks_command(store, _route(), "cancel 2")
        assert "already finished (done)" in await tasks_command(store, _route(), "cancel #1")
        assert "no task #9" in await tasks_command(store, _route(), "cancel 9")
        assert "Usage:" in await tasks_command(store, _route(), "stop everything")
        assert "direct message" in await tasks_command(store, _route(private=False), "")
        assert "turned off" in await tasks_command(None, _route(), "")
        again = await store.by_number("ana", 2)
        assert again is not None and again.cancel_requested and again.cancelled_by == "telegram:42"
