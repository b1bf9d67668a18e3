"""A task's exec command asks the owner like any other (the task runs on the owner's word,
so approvals apply), and `/tasks` shows it waiting for the approval meanwhile."""

from __future__ import annotations

import json
import sqlite3

from tests.gateway.features.exec.conftest import sandbox_works  # noqa: F401 (a fixture)
from tests.gateway.features.tasks.conftest import OWNER, finished_texts, tasks_in, wait_for


async def test_a_tasks_command_waits_for_the_owner_and_shows_so(
    make_app,
    tg,
    script,
    anthropic_server,
    sandbox_works,  # noqa: F811
):
    script.steps = 1
    script.tool = ("exec", {"command": "echo from-the-task-$((40+2))"})
    app = await make_app(exec_settings={"mode": "ask"})
    db = app.settings.workspaces_dir / ".gateway" / "state.db"
    await tg.send_text(OWNER, "task: (tools=exec,list_files) run the echo")
    await wait_for(lambda: tg.with_buttons(OWNER), what="the question", timeout=60)
    await wait_for(
        lambda: (r := tasks_in(db)) and r[0].state == "waiting_approval", what="waiting state"
    )
    await tg.send_text(OWNER, "/tasks")
    listing = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("Your tasks:")], what="/tasks"
    )
    assert "#1 waiting for your approval" in listing[0]
    asked = tg.with_buttons(OWNER)[0]
    assert "echo from-the-task" in asked.text
    query = await tg.press(OWNER, asked, asked.button_data()[0])
    assert "Approved" in await tg.wait_answered(query, timeout=30)
    report = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("Task #")], what="the report"
    )
    assert report[0].startswith("Task #1 done")
    [task] = tasks_in(db)
    assert task.state == "done"
    last_task_request = [
        r for r in anthropic_server.requests if "A background task" in json.dumps(r["system"])
    ][-1]
    assert "from-the-task-42" in json.dumps(last_task_request["messages"])  # it ran


async def test_a_cancelled_tasks_question_can_no_longer_run_its_command(
    make_app,
    tg,
    script,
    anthropic_server,
    sandbox_works,  # noqa: F811
):
    """Cancelled while it waits for the owner: the command it asked about is withdrawn (a
    late "Run once" would run it for a task nobody waits for any more)."""
    script.steps = 1
    script.tool = ("exec", {"command": "echo from-the-task-$((40+2))"})
    app = await make_app(exec_settings={"mode": "ask"})
    db = app.settings.workspaces_dir / ".gateway" / "state.db"
    await tg.send_text(OWNER, "task: (tools=exec,list_files) run the echo")
    await wait_for(
        lambda: (r := tasks_in(db)) and r[0].state == "waiting_approval", what="waiting state"
    )
    await tg.send_text(OWNER, "/tasks cancel 1")
    report = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("Task #")], what="the report"
    )
    assert report[0].startswith("Task #1 cancelled")
    asked = tg.with_buttons(OWNER)[0]
    query = await tg.press(OWNER, asked, asked.button_data()[0])
    answer = await tg.wait_answered(query, timeout=30)
    assert "Approved" not in answer
    with sqlite3.connect(db) as conn:
        statuses = [row[0] for row in conn.execute("SELECT status FROM exec_approvals")]
        runs = conn.execute("SELECT COUNT(*) FROM exec_runs").fetchone()[0]
    assert statuses and all(status in ("pending", "expired") for status in statuses)
    assert runs == 0
    assert "from-the-task-42" not in json.dumps(anthropic_server.requests)


async def test_a_task_resumed_at_start_waits_for_the_probe_and_keeps_its_commands(
    make_app,
    tg,
    script,
    anthropic_server,
    sandbox_works,  # noqa: F811
    tmp_path,
):
    """The sandbox is probed beside the first poll (features/exec/gate.py): a task the last
    run left running is taken up only once the probe has said whether `exec` runs, so the
    task keeps the tool it was started with instead of finding it gone mid-task."""
    from tests.gateway.features.exec.test_offer_after_probe import _held_bwrap

    script.steps, script.delay = 2, 1.5
    script.tool = ("exec", {"command": "echo from-the-task-$((40+2))"})
    first = await make_app(exec_settings={"mode": "off"})
    db = first.settings.workspaces_dir / ".gateway" / "state.db"
    await tg.send_text(OWNER, "task: (tools=exec,list_files) run the echo twice")
    await wait_for(lambda: script.task_requests >= 1, what="the task's first step")
    await first.stop(grace=5)
    [task] = tasks_in(db)
    assert task.state == "running"
    script.delay = 0.02
    bwrap, go = _held_bwrap(tmp_path)
    asked = script.task_requests
    await make_app(exec_settings={"mode": "off", "bwrap": bwrap})
    await wait_for(lambda: (tmp_path / "probing").exists(), what="the probe held")
    await tg.send_text(OWNER, "hello while it probes")
    await wait_for(lambda: "echo: hello while it probes" in finished_texts(tg), what="a chat")
    assert script.task_requests == asked  # the task waits for the probe
    go.touch()
    report = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("Task #")], what="the report"
    )
    assert report[0].startswith("Task #1 done")
    task_requests = [
        r for r in anthropic_server.requests if "A background task" in json.dumps(r["system"])
    ]
    assert all("exec" in [t["name"] for t in r["tools"]] for r in task_requests)
    assert "from-the-task-42" in json.dumps(task_requests[-1]["messages"])
