"""The panel's Tasks tab over HTTP: a person's tasks (active first, waiting for an approval
shown as such), the goal escaped and flattened (it is hostile text), and Cancel writing only
the store's cancel flag, through the same CSRF rule as every other action."""

from __future__ import annotations

import time
from typing import Any

from gateway.stores.tasks import NewTask, Task

RLO = "\u202e"  # right-to-left override: would reorder the text shown after it


def _new(person: str, goal: str) -> NewTask:
    now = time.time()
    return NewTask(
        person=person,
        workspace=f"/w/{person}",
        channel="telegram",
        chat_id="42",
        session_key=f"{person}:dm",
        private=True,
        goal=goal,
        tools=("read_file",),
        token_cap=5000,
        deadline=now + 600,
        created_at=now - 75,
    )


async def _add(rig: Any, person: str, goal: str) -> Task:
    return await rig.gateway.state.tasks.add(_new(person, goal), max_per_person=9, max_total=99)


async def test_tasks_tab_lists_escapes_and_cancels_through_the_store(rig):
    csrf = await rig.login()
    store = rig.gateway.state.tasks
    empty = await (await rig.client.get("/p/owner/tasks")).text()
    assert 'href="/p/owner/tasks" class="on"' in empty
    assert "No task is running." in empty and "No finished tasks yet." in empty

    hostile = await _add(
        rig, "owner", f'<script>alert(1)</script> "x" {RLO}gpj.exe\nsecond line ' + "y" * 300
    )
    await store.mark_started(hostile.id, time.time() - 60)
    await store.note_step(hostile.id, tokens=12345, cost=0.0625)
    waiting = await _add(rig, "owner", "run the backup script")
    await store.mark_started(waiting.id, time.time())
    await store.set_waiting(waiting.id, True)
    done = await _add(rig, "owner", "summarise last month's notes")
    await store.finish(done.id, "done", result="ok", error="", at=time.time(), reported=True)
    theirs = await _add(rig, "telegram-42", "secret-of-42")

    page = await (await rig.client.get("/p/owner/tasks")).text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert RLO not in page and "gpj.exe second line" in page  # one line, no reordering
    assert "yyy...<div" in page and "y" * 300 + '"' in page  # shortened; whole in the tooltip
    assert "12,345" in page and "$0.06" in page and "running" in page
    assert "waiting for your approval" in page and "answer in the chat" in page
    running, recent = page.split('id="recent"')
    assert "summarise last month" in recent and "summarise last month" not in running
    assert running.count('action="/p/owner/tasks/cancel"') == 2  # the two active ones
    assert "secret-of-42" not in page  # another person's tasks are on their own page
    assert "secret-of-42" in await (await rig.client.get("/p/telegram-42/tasks")).text()
    assert (await rig.client.get("/p/nobody/tasks")).status == 404

    # Without the session's CSRF token nothing is written.
    refused = await rig.client.post(
        "/p/owner/tasks/cancel", data={"number": "1"}, allow_redirects=False
    )
    assert refused.status == 403
    assert not (await store.get(hostile.id)).cancel_requested  # type: ignore[union-attr]

    cancel = await rig.post("/p/owner/tasks/cancel", {"number": str(hostile.number)}, csrf)
    assert cancel.status == 303 and cancel.headers["Location"] == "/p/owner/tasks"
    task = await store.get(hostile.id)
    assert task is not None and task.cancel_requested and task.cancelled_by == "panel:owner"
    assert task.state == "running"  # only the flag: the gateway's runner ends it
    assert not (await store.get(theirs.id)).cancel_requested  # type: ignore[union-attr]
    after = await (await rig.client.get("/p/owner/tasks")).text()
    assert f"stopping task #{hostile.number}" in after and "stopping</span>" in after
    assert after.split('id="recent"')[0].count('action="/p/owner/tasks/cancel"') == 1

    for number, said in (
        (done.number, f"task #{done.number} has already finished (done)"),
        (99, "there is no task #99"),
        (0, "no task number given"),
    ):
        await rig.post("/p/owner/tasks/cancel", {"number": str(number)}, csrf)
        text = await (await rig.client.get("/p/owner/tasks")).text()
        assert 'class="flash error"' in text and said in text, said


async def test_tasks_tab_says_when_tasks_are_off(make_gateway, anthropic_server):
    from aiohttp.test_utils import TestClient, TestServer

    from gateway.config.panel import PanelSettings
    from gateway.panel.host import PanelHost
    from gateway.panel.server import PanelServer, build_app
    from gateway.workspace.seed import ensure_workspace
    from tests.gateway.panel.conftest import PanelRig

    gateway, _ = await make_gateway(anthropic_server, tasks={"enabled": False})
    ensure_workspace(gateway.settings.workspaces_dir, "owner")
    server = PanelServer(PanelHost(gateway.parts), PanelSettings(port=0))
    client = TestClient(TestServer(build_app(server.panel)))
    await client.start_server()
    try:
        rig = PanelRig(gateway, server, client)
        await rig.login()
        page = await (await client.get("/p/owner/tasks")).text()
        assert "Background tasks are off ([tasks] enabled = false)." in page
        assert "No task is running." not in page
    finally:
        await client.close()
