"""`clawgate tasks list|cancel` as a person runs them: real processes over a state database,
and a cancel that the running gateway's task runner acts on."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.stores.database import state_path
from gateway.stores.state import StateDB
from gateway.stores.tasks import NewTask, Task
from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.panel.test_browser_tasks import PLAN, scripted

TIMEOUT = 60
HOSTILE = "Summarise [bold red]my[/] notes \x1b[2J\x1b[31mRED\nsecond line"


async def _run(args: list[str], root: Path) -> tuple[int, str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CLAWGATE_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    env["CLAWGATE_WORKSPACES_DIR"] = str(root)
    env["CLAWGATE_CONFIG"] = str(root.parent / "none.toml")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "tasks",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    return process.returncode or 0, out.decode(), err.decode()


def _new(person: str, goal: str) -> NewTask:
    now = time.time()
    return NewTask(
        person=person,
        workspace=f"/w/{person}",
        channel="telegram",
        chat_id="1",
        session_key=f"{person}:dm",
        private=True,
        goal=goal,
        tools=(),
        token_cap=5000,
        deadline=now + 600,
        created_at=now - 90,
    )


@pytest.fixture
async def tasks(tmp_path: Path) -> AsyncIterator[tuple[Path, dict[str, Task]]]:
    """ana: #1 running (hostile goal), #2 done; bob: #1 queued; carl: 22 finished ones."""
    root = tmp_path / "workspaces"
    async with StateDB.for_root(root) as state:
        store = state.tasks

        async def add(person: str, goal: str) -> Task:
            return await store.add(_new(person, goal), max_per_person=5, max_total=50)

        running = await add("ana", HOSTILE)
        await store.mark_started(running.id, time.time() - 60)
        await store.note_step(running.id, tokens=4321, cost=0.031)
        done = await add("ana", "check the site")
        await store.finish(done.id, "done", result="ok", error="", at=time.time(), reported=True)
        queued = await add("bob", "bob's job")
        for n in range(22):
            old = await add("carl", f"old job {n}")
            await store.finish(
                old.id, "failed", result="", error="x", at=time.time(), reported=True
            )
    yield root, {"running": running, "done": done, "queued": queued}


async def test_list_reads_only_and_quotes_goals_safely(tasks):
    root, _ = tasks
    # A writer holds the database's write lock: a command that wrote anything (a migration,
    # a prune) would wait out the busy timeout and fail; a read-only one is not held up.
    lock = sqlite3.connect(state_path(root), timeout=1)
    lock.execute("BEGIN IMMEDIATE")
    try:
        code, out, err = await _run(["list", "--person", "ana"], root)
        assert code == 0, err
        every = await _run(["list", "--all", "--json"], root)
        recent = await _run(["list", "--json"], root)
    finally:
        lock.rollback()
        lock.close()
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].split() == ["person", "#", "state", "elapsed", "tokens", "cost", "goal"]
    assert "running" in lines[1] and "4,321" in lines[1] and "$0.03" in lines[1]
    assert "[bold red]my[/]" in lines[1]  # shown as text, not Rich markup
    assert "\x1b" not in out and "second line" in lines[1]  # no terminal escape, one line
    assert "done" in lines[2] and "check the site" in lines[2]
    assert "clawgate tasks cancel NUMBER --person NAME" in out
    assert every[0] == 0 and recent[0] == 0, every[2] + recent[2]
    all_rows, recent_rows = json.loads(every[1]), json.loads(recent[1])
    assert len(all_rows) == 25 and len(recent_rows) == 20
    # The active ones come first: never pushed out of the short list by old ones.
    assert {(r["person"], r["number"]) for r in recent_rows[:2]} == {("ana", 1), ("bob", 1)}
    ana = next(r for r in all_rows if (r["person"], r["number"]) == ("ana", 1))
    assert ana["goal"] == HOSTILE and ana["state"] == "running" and ana["tokens"] == 4321
    assert ana["started"].endswith("+00:00") and ana["finished"] is None
    assert (await _run(["list", "-p", "nobody"], root))[1].strip() == "no tasks for nobody"


async def test_cancel_writes_only_the_flag_and_says_why_it_cannot(tasks, tmp_path):
    root, made = tasks
    code, out, err = await _run(["cancel", "1", "--person", "ana"], root)
    assert code == 0, err
    assert "stopping task #1 of ana" in out
    async with StateDB.for_root(root) as state:
        task = await state.tasks.get(made["running"].id)
        assert task is not None and task.cancel_requested and task.cancelled_by == "cli"
        assert task.state == "running"  # the gateway's runner ends it, not the command
        bob = await state.tasks.get(made["queued"].id)
        assert bob is not None and not bob.cancel_requested
    again = await _run(["cancel", "1", "--person", "ana"], root)
    assert again[0] == 0 and "already being stopped" in again[1]

    finished = await _run(["cancel", "2", "--person", "ana"], root)
    assert finished[0] == 1 and "task #2 of ana has already finished (done)" in finished[2]
    unknown = await _run(["cancel", "7", "--person", "ana"], root)
    assert unknown[0] == 2 and "ana has no task #7" in unknown[2]
    assert (await _run(["cancel", "1"], root))[0] == 2  # whose task: --person is required
    # No state database: nothing to cancel, and none is created.
    empty = tmp_path / "elsewhere"
    nothing = await _run(["cancel", "1", "--person", "ana"], empty)
    assert nothing[0] == 2 and not state_path(empty).exists()
    assert (await _run(["list"], empty))[1].strip() == "no tasks"


@pytest.mark.timeout(120)
async def test_a_cancel_from_the_command_line_stops_a_task_in_the_running_gateway(
    make_settings: Any, anthropic_server: FakeAnthropicServer
) -> None:
    from gateway.agent.providers import build_provider
    from gateway.assembly.builder import GatewayApp, assemble_parts
    from retrypolicy import Backoff
    from tests.conftest import llm_overrides
    from tests.settle import settled

    user = 7007
    anthropic_server.responder = scripted(anthropic_server)
    async with FakeTelegramServer() as tg:
        settings = make_settings(
            **llm_overrides(anthropic_server, timeout_seconds=60),
            telegram={
                "token": tg.token,
                "base_url": tg.base_url,
                "poll_timeout_seconds": 1,
                "allow_from": [str(user)],
            },
            memory={"embedder": "none", "watch": False},
            tasks={"poll_seconds": 0.2},
            panel={"enabled": False},
        )
        parts = assemble_parts(
            settings,
            PLAN,
            provider=build_provider(settings),
            options={"telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}},
        )
        async with GatewayApp(settings, PLAN, parts=parts) as app:
            await tg.send_text(user, "please compare those three pages for me")
            assert (await tg.wait_sent(1))[0].text.startswith("I've started on it")
            person = f"telegram-{user}"
            store = app.gateway.state.tasks
            async with asyncio.timeout(30):
                while not any(t.state == "running" for t in await store.list_for(person)):
                    await asyncio.sleep(0.05)
            listed = await _run(["list", "--json"], settings.workspaces_dir)
            assert [r["state"] for r in json.loads(listed[1])] == ["running"], listed[2]
            code, _, err = await _run(["cancel", "1", "-p", person], settings.workspaces_dir)
            assert code == 0, err
            report = (await tg.wait_sent(2, timeout=30))[1].text
            assert "cancel" in report.lower(), report
            await settled(app.gateway.state)
            assert len(tg.sent) == 2  # the answer and one report
            task = await store.by_number(person, 1)
            assert task is not None and task.state == "cancelled" and task.cancelled_by == "cli"
