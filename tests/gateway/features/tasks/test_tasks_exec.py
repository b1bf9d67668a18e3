"""A task's exec command asks the owner like any other (the task runs on the owner's word,
so approvals apply), and `/tasks` shows it waiting for the approval meanwhile."""

from __future__ import annotations

import json

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
