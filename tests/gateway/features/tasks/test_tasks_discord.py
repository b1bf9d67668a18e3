"""Background tasks through the loopback Discord (the real discord.py client): a task started
in a DM reports once in that DM, `/tasks` lists it, and the next turn knows the result."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.assembly.builder import GatewayApp, assemble_parts
from tests.conftest import llm_overrides
from tests.fakes.discord_server import FakeDiscordServer
from tests.gateway.features.tasks.conftest import NO_CAP, PLAN, tasks_in, wait_for

OPTIONS = {"discord": {"guild_ready_timeout": 0.05, "ready_timeout": 10}}
OWNER = 301
OWNER_DM = str(OWNER + 1)  # the fake's DM channel of a user


@pytest.fixture
async def dc_app(make_settings, anthropic_server, dc, script) -> AsyncIterator[Callable[..., Any]]:
    running: list[GatewayApp] = []

    async def make() -> GatewayApp:
        settings = make_settings(
            **llm_overrides(anthropic_server),
            discord={"token": dc.token, "allow_from": [str(OWNER)]},
            owner=f"discord-{OWNER}",
            exec={"enabled": False},
            tasks={"poll_seconds": 0.1, **NO_CAP},
        )
        app = GatewayApp(settings, PLAN, parts=assemble_parts(settings, PLAN, options=OPTIONS))
        await app.start()
        running.append(app)
        await dc.identified.wait()
        return app

    yield make
    for app in running:
        await app.stop(grace=5)


def _texts(dc: FakeDiscordServer) -> list[str]:
    return [m.content for m in dc.finished() if m.channel_id == OWNER_DM]


async def test_a_task_from_a_discord_dm_reports_once_in_that_dm(
    dc_app, dc, script, anthropic_server
):
    script.steps, script.delay = 3, 0.05
    app = await dc_app()
    db = app.settings.workspaces_dir / ".gateway" / "state.db"
    await dc.dm(OWNER, "task: sum up my notes of November")
    await wait_for(lambda: any(t.startswith("STARTED:") for t in _texts(dc)), what="the start")
    await dc.dm(OWNER, "/tasks")
    await wait_for(lambda: any(t.startswith("Your tasks:") for t in _texts(dc)), what="/tasks")
    report = await wait_for(
        lambda: [t for t in _texts(dc) if t.startswith("Task #1")], what="the report"
    )
    assert report[0].startswith("Task #1 done") and "RESULT-1" in report[0]
    [task] = tasks_in(db)
    assert task.state == "done" and task.channel == "discord" and task.chat_id == OWNER_DM
    # The next turn of the DM knows the result: it is in the chat's session.
    await dc.dm(OWNER, "what did it find?")
    await wait_for(lambda: "echo: what did it find?" in _texts(dc), what="the next answer")
    assert "RESULT-1" in str(anthropic_server.requests[-1]["messages"])
    assert len([t for t in _texts(dc) if t.startswith("Task #")]) == 1
