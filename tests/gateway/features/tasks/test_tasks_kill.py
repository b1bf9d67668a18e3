"""kill -9 during a task: `clawgate run` as a real process (the fake Bot API and the scripted
fake model on loopback), killed with SIGKILL while a task is between steps, started again.
The task goes on from its transcript and is reported exactly once; a task whose deadline
passed while the gateway was down is reported as such.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.features.tasks.conftest import OWNER, finished_texts, tasks_in, wait_for
from tests.reliability.process import gateway_env, start_gateway


def _env(tmp_path: Path, tg: FakeTelegramServer, url: str, **extra: str) -> dict[str, str]:
    return gateway_env(
        tmp_path,
        tg,
        url,
        [OWNER],
        CLAWGATE_OWNER=f"telegram-{OWNER}",
        CLAWGATE_EXEC__ENABLED="false",
        CLAWGATE_TELEGRAM__STREAMING="false",
        CLAWGATE_TASKS__POLL_SECONDS="0.1",
        CLAWGATE_TASKS__MAX_TOKEN_CAP="100000000",
        CLAWGATE_TASKS__DEFAULT_TOKEN_CAP="100000000",
        **extra,
    )


def _reports(tg: FakeTelegramServer) -> list[str]:
    return [t for t in finished_texts(tg) if t.startswith("Task #")]


def _tool_results_in_task_requests(server) -> list[int]:
    counts = []
    for request in server.requests:
        if "A background task" in json.dumps(request.get("system", "")):
            text = json.dumps(request["messages"])
            counts.append(text.count('"tool_result"'))
    return counts


async def test_a_task_killed_mid_way_continues_and_reports_once(tmp_path, anthropic_server, script):
    script.steps, script.delay = 8, 0.3
    db = tmp_path / "workspaces" / ".gateway" / "state.db"
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = _env(tmp_path, tg, anthropic_server.base_url)
        log = tmp_path / "gateway.log"
        process = await start_gateway(env, log)
        try:
            await tg.send_text(OWNER, "task: go through my notes")
            await wait_for(
                lambda: (r := tasks_in(db)) and r[0].steps >= 3, what="steps", timeout=60
            )
            process.send_signal(signal.SIGKILL)
            await process.wait()
            before = len(_tool_results_in_task_requests(anthropic_server))
            assert tasks_in(db)[0].state == "running" and not _reports(tg)
            process = await start_gateway(env, log)
            await wait_for(lambda: _reports(tg), what="the report after the restart", timeout=60)
            # Taken up from its transcript: the first request after the restart already
            # carried the steps done before the kill (not a fresh start of the task).
            after = _tool_results_in_task_requests(anthropic_server)[before:]
            assert after and after[0] >= 2
            # A third start finds nothing more to report.
            process.send_signal(signal.SIGTERM)
            await process.wait()
            process = await start_gateway(env, log)
            await tg.send_text(OWNER, "still there?")
            await wait_for(
                lambda: "echo: still there?" in finished_texts(tg), what="the DM", timeout=60
            )
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        [report] = _reports(tg)
        assert report.startswith("Task #1 done: go through my notes") and "RESULT-1" in report
        [task] = tasks_in(db)
        assert (task.state, task.reported, task.noted) == ("done", True, True)
    assert "Traceback" not in log.read_text()


async def test_a_deadline_passed_while_the_gateway_was_down_is_reported(
    tmp_path, anthropic_server, script
):
    script.steps, script.delay = 500, 0.2
    db = tmp_path / "workspaces" / ".gateway" / "state.db"
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = _env(
            tmp_path,
            tg,
            anthropic_server.base_url,
            CLAWGATE_TASKS__DEFAULT_DEADLINE_SECONDS="4",
            CLAWGATE_TASKS__MAX_DEADLINE_SECONDS="4",
        )
        log = tmp_path / "gateway.log"
        process = await start_gateway(env, log)
        try:
            await tg.send_text(OWNER, "task: keep trying the site")
            await wait_for(
                lambda: (r := tasks_in(db)) and r[0].steps >= 1, what="a step", timeout=60
            )
            process.send_signal(signal.SIGKILL)
            await process.wait()
            deadline = tasks_in(db)[0].deadline
            await wait_for(lambda: time.time() > deadline, what="the deadline", timeout=30)
            process = await start_gateway(env, log)
            await wait_for(lambda: _reports(tg), what="the report", timeout=60)
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        [report] = _reports(tg)
        assert report.startswith("Task #1 stopped at its deadline")
        assert "while the gateway was stopped" in report
        assert tasks_in(db)[0].state == "timed_out"
