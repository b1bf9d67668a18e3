"""Background tasks through the real gateway: python-telegram-bot against the loopback Bot
API, the real state database, the fake model taking several steps per task (conftest.py).

User 42 owns the gateway; 43 is another approved person with a workspace of their own.
"""

from __future__ import annotations

import json

from gateway.agent.conversation import Usage
from gateway.stores.state import StateDB
from tests.gateway.features.tasks.conftest import (
    OTHER,
    OWNER,
    finished_texts,
    tasks_in,
    wait_for,
)


def state_db(app) -> object:
    return app.settings.workspaces_dir / ".gateway" / "state.db"


def reports(tg, chat: int = OWNER) -> list[str]:
    return [t for t in finished_texts(tg, chat) if t.startswith("Task #")]


async def test_a_task_starts_at_once_reports_once_and_the_next_turn_knows_it(
    make_app, tg, script, anthropic_server
):
    app = await make_app()
    await tg.send_text(OWNER, "task: sum up my notes")
    started = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("STARTED:")], what="the answer"
    )
    assert "Started task 1" in started[0]
    await wait_for(lambda: reports(tg), what="the report")
    [report] = reports(tg)
    assert report.startswith("Task #1 done: sum up my notes")
    assert "RESULT-1: all summed up" in report
    [task] = tasks_in(state_db(app))
    assert (task.state, task.reported, task.steps) == ("done", True, 4)
    assert task.tokens > 0 and task.started_at is not None and task.finished_at is not None
    await wait_for(lambda: tasks_in(state_db(app))[0].noted, what="the note in the session")
    # The next turn of the chat has the report in its history.
    await tg.send_text(OWNER, "what did it find?")
    await wait_for(lambda: "echo: what did it find?" in finished_texts(tg), what="the reply")
    last = json.dumps(anthropic_server.requests[-1]["messages"])
    assert "RESULT-1: all summed up" in last
    # Its own session was a fresh context: the goal, not the chat's history.
    task_requests = [
        r for r in anthropic_server.requests if "A background task" in json.dumps(r["system"])
    ]
    first = json.dumps(task_requests[0]["messages"])
    assert "sum up my notes" in first and "STARTED" not in first
    assert len(reports(tg)) == 1


async def test_two_tasks_run_at_once_and_each_reports(make_app, tg, script, anthropic_server):
    script.steps, script.delay = 4, 0.1
    app = await make_app()
    await tg.send_text(OWNER, "task: first job")
    await tg.send_text(OWNER, "task: second job")
    await wait_for(lambda: len(reports(tg)) == 2, what="both reports")
    numbers = sorted(t.split(" ", 2)[1] for t in reports(tg))
    assert numbers == ["#1", "#2"]
    rows = tasks_in(state_db(app))
    assert [t.state for t in rows] == ["done", "done"]
    # They overlapped: one started before the other finished.
    assert rows[1].started_at is not None and rows[0].finished_at is not None
    assert rows[1].started_at < rows[0].finished_at
    assert anthropic_server.most_in_flight >= 2


async def test_tasks_lists_and_cancel_stops_one(make_app, tg, script):
    script.steps, script.delay = 500, 0.05
    app = await make_app()
    await tg.send_text(OWNER, "task: a very long job")
    await wait_for(lambda: (r := tasks_in(state_db(app))) and r[0].steps >= 2, what="steps")
    await tg.send_text(OWNER, "/tasks")
    listing = await wait_for(
        lambda: [t for t in finished_texts(tg) if t.startswith("Your tasks:")], what="/tasks"
    )
    assert "#1 running" in listing[0] and "a very long job" in listing[0]
    await tg.send_text(OWNER, "/tasks cancel 1")
    await wait_for(lambda: reports(tg), what="the cancelled report")
    [report] = reports(tg)
    assert report.startswith("Task #1 cancelled") and "It was cancelled" in report
    [task] = tasks_in(state_db(app))
    assert task.state == "cancelled" and task.reported
    await tg.send_text(OWNER, "/tasks cancel 1")
    await wait_for(
        lambda: any("already finished" in t for t in finished_texts(tg)), what="second cancel"
    )


async def test_a_cancel_written_by_another_process_stops_the_task(make_app, tg, script):
    script.steps, script.delay = 500, 0.05
    app = await make_app()
    await tg.send_text(OWNER, "task: another long job")
    await wait_for(lambda: (r := tasks_in(state_db(app))) and r[0].steps >= 1, what="a step")
    async with StateDB.for_root(app.settings.workspaces_dir) as cli:  # the CLI's connections
        assert await cli.tasks.request_cancel(f"telegram-{OWNER}", 1, by="cli")
    await wait_for(lambda: reports(tg), what="the report")
    assert "cancelled from the command line" in reports(tg)[0]


async def test_the_deadline_ends_a_task_and_says_so(make_app, tg, script):
    script.steps, script.delay = 500, 0.2
    app = await make_app(tasks={"default_deadline_seconds": 1.0, "max_deadline_seconds": 1.0})
    await tg.send_text(OWNER, "task: slow job")
    await wait_for(lambda: reports(tg), what="the report")
    [report] = reports(tg)
    assert report.startswith("Task #1 stopped at its deadline") and "deadline" in report
    [task] = tasks_in(state_db(app))
    assert task.state == "timed_out" and 0 < task.steps < 500


async def test_the_token_cap_ends_a_task(make_app, tg, script):
    script.steps, script.delay = 500, 0.0
    app = await make_app(tasks={"default_token_cap": 3000, "max_token_cap": 3000})
    await tg.send_text(OWNER, "task: wordy job")
    await wait_for(lambda: reports(tg), what="the report")
    [report] = reports(tg)
    assert report.startswith("Task #1 stopped at its token cap") and "3,000 tokens" in report
    [task] = tasks_in(state_db(app))
    assert task.state == "capped" and task.tokens >= 3000 and task.steps < 500


async def test_a_person_over_budget_gets_a_refusal_not_silence(make_app, tg, script):
    script.steps, script.delay = 500, 0.05
    app = await make_app(budget={"daily_tokens": 1_000_000})
    person = f"telegram-{OTHER}"
    await tg.send_text(OTHER, "task: spend a lot")
    await wait_for(lambda: (r := tasks_in(state_db(app))) and r[0].steps >= 1, what="a step")
    # Meanwhile the person's other use reaches the cap: the task's next call is refused.
    await app.parts.usage.record(person, "conversation", "m", Usage(input_tokens=2_000_000))
    await wait_for(lambda: reports(tg, OTHER), what="the report")
    [report] = reports(tg, OTHER)
    assert report.startswith("Task #1 stopped: usage limit reached")
    assert "usage limit" in report
    [task] = tasks_in(state_db(app))
    assert task.state == "over_budget" and task.person == person


async def test_the_dm_is_answered_while_three_tasks_run(make_app, tg, script):
    script.steps, script.delay = 500, 0.1
    app = await make_app()
    for n in range(3):
        await tg.send_text(OWNER, f"task: long job {n}")
    await wait_for(
        lambda: len([t for t in tasks_in(state_db(app)) if t.state == "running"]) == 3,
        what="three tasks running",
    )
    await tg.send_text(OWNER, "are you there?")
    await wait_for(lambda: "echo: are you there?" in finished_texts(tg), what="the DM's answer")
    # Answered while every task still runs: none of them held the chat.
    assert [t.state for t in tasks_in(state_db(app))] == ["running"] * 3
    assert reports(tg) == []


async def test_a_task_asked_for_in_a_group_is_refused(make_app, tg, script):
    group = -1001
    app = await make_app(telegram_extra={"groups_enabled": True, "groups": [str(group)]})
    await tg.send_text(
        OWNER,
        "@claw_bot task: read the owner's notes",
        chat_id=group,
        chat_type="supergroup",
        entities=[{"type": "mention", "offset": 0, "length": 9}],
    )
    answer = await wait_for(
        lambda: [t for t in finished_texts(tg, group) if t.startswith("STARTED:")],
        what="the group's answer",
    )
    # The group's tools have no start_task: the call the model made anyway is an error.
    assert "Started task" not in answer[0] and "start_task" in answer[0]
    assert tasks_in(state_db(app)) == []
    await tg.send_text(
        OWNER,
        "/tasks@claw_bot",
        chat_id=group,
        chat_type="supergroup",
        entities=[{"type": "bot_command", "offset": 0, "length": 15}],
    )
    await wait_for(
        lambda: any("only available in a direct message" in t for t in finished_texts(tg, group)),
        what="/tasks refused in the group",
    )


async def test_a_long_result_comes_as_a_file_with_a_short_summary(make_app, tg, script):
    script.words = "line of findings. " * 400
    app = await make_app(tasks={"result_max_chars": 1000})
    await tg.send_text(OWNER, "task: write a long report")
    await wait_for(lambda: tg.files, what="the file")
    [sent] = tg.files
    assert sent.method == "sendDocument" and sent.filename == "task-1-result.md"
    assert sent.caption.startswith("Task #1 done: write a long report")
    assert "tasks/task-1-result.md" in sent.caption and len(sent.caption) < 1024
    whole = sent.data.decode()
    assert whole.count("line of findings.") == 400
    path = app.settings.workspaces_dir / f"telegram-{OWNER}" / "tasks" / "task-1-result.md"
    assert path.read_text() == whole
    [task] = tasks_in(state_db(app))
    assert task.state == "done" and task.reported


async def test_a_task_gets_only_tools_its_chat_has_and_never_start_task(
    make_app, tg, script, anthropic_server
):
    app = await make_app()
    await tg.send_text(OWNER, "task: (tools=list_files,start_task) nest one")
    await tg.send_text(OWNER, "task: (tools=exec) run something")  # exec is off here
    await wait_for(
        lambda: len([t for t in finished_texts(tg) if t.startswith("STARTED:")]) == 2,
        what="both answers",
    )
    refusals = [t for t in finished_texts(tg) if t.startswith("STARTED:")]
    assert "cannot start tasks of its own" in refusals[0]
    assert "exec is not among them" in refusals[1]
    assert tasks_in(state_db(app)) == []
    await tg.send_text(OWNER, "task: (tools=list_files) only list")
    await wait_for(lambda: reports(tg), what="the report")
    [task] = tasks_in(state_db(app))
    assert task.tools == ("list_files",)
    offered = [
        [tool["name"] for tool in r["tools"]]
        for r in anthropic_server.requests
        if "A background task" in json.dumps(r["system"])
    ]
    assert offered and all(names == ["list_files"] for names in offered)


async def test_one_more_task_than_the_limit_is_refused_with_the_reason(make_app, tg, script):
    script.steps, script.delay = 500, 0.1
    app = await make_app(tasks={"max_running_per_person": 1})
    await tg.send_text(OWNER, "task: the first")
    await wait_for(lambda: tasks_in(state_db(app)), what="the first task")
    await tg.send_text(OWNER, "task: the second")
    answers = await wait_for(
        lambda: (
            (a := [t for t in finished_texts(tg) if t.startswith("STARTED:")]) and len(a) == 2 and a
        ),
        what="both answers",
    )
    assert "Started task 1" in answers[0]
    assert "1 of your tasks are already running (at most 1)" in answers[1]
    assert len(tasks_in(state_db(app))) == 1
    assert "clawgate_tasks_running 1.0" in app.parts.metrics.render()


async def test_the_background_model_answers_tasks_and_usage_counts_them(
    make_app, tg, script, anthropic_server
):
    app = await make_app(llm_extra={"model": "claude-main", "background_model": "claude-cheap"})
    await tg.send_text(OWNER, "task: a cheap job")
    await wait_for(lambda: reports(tg), what="the report")
    models = {
        ("task" if "A background task" in json.dumps(r["system"]) else "chat"): r["model"]
        for r in anthropic_server.requests
    }
    assert models == {"task": "claude-cheap", "chat": "claude-main"}
    await app.parts.usage.settled()
    [task] = tasks_in(state_db(app))
    rows = await app.parts.state.database.rows(
        "SELECT kind, model, input + output + cache_read + cache_write FROM usage_daily"
        " WHERE person = ? AND kind = 'tasks'",
        (f"telegram-{OWNER}",),
    )
    assert [(r[0], r[1]) for r in rows] == [("tasks", "claude-cheap")]
    assert rows[0][2] == task.tokens


async def test_reports_owed_from_an_earlier_run_are_made_at_start_and_noted_once(
    make_app, tg, script, make_settings, tmp_path
):
    """A task that ended while its channel was not running (reported = 0), and one reported
    whose note never reached the chat's session: the next start does both, once each."""
    from gateway.agent.sessions import transcript_path
    from gateway.stores.tasks import NewTask
    from memory.layout import dm_session_key

    person = f"telegram-{OWNER}"
    workspace = tmp_path / "workspaces" / person
    session_key = dm_session_key(person)
    async with StateDB.for_root(tmp_path / "workspaces") as state:
        for n, goal in enumerate(("owed report", "owed note")):
            new = NewTask(
                person=person,
                workspace=str(workspace),
                channel="telegram",
                chat_id=str(OWNER),
                session_key=session_key,
                private=True,
                goal=goal,
                tools=(),
                token_cap=1000,
                deadline=10.0**10,
                created_at=1.0 + n,
            )
            task = await state.tasks.add(new, max_per_person=5, max_total=5)
            await state.tasks.finish(
                task.id, "done", result=f"R{n}", error="", at=5.0, reported=n == 1
            )
    app = await make_app()
    await wait_for(lambda: reports(tg), what="the owed report")
    await wait_for(
        lambda: all(t.noted for t in tasks_in(state_db(app))), what="both notes in the session"
    )
    [report] = reports(tg)
    assert report.startswith("Task #1 done: owed report") and "R0" in report
    text = transcript_path(workspace, session_key).read_text()
    assert text.count('"task":1,') == 1 and text.count('"task":2,') == 1


async def test_a_task_out_of_rounds_fails_and_says_why(make_app, tg, script):
    script.steps = 500
    app = await make_app(tasks={"max_tool_rounds": 3})
    await tg.send_text(OWNER, "task: never ends")
    await wait_for(lambda: reports(tg), what="the report")
    [report] = reports(tg)
    assert report.startswith("Task #1 failed: never ends")
    assert "made 3 model calls without finishing" in report and "continue" not in report
    [task] = tasks_in(state_db(app))
    assert (task.state, task.steps) == ("failed", 3)


async def test_a_gateway_runs_only_the_tasks_of_chats_it_serves(make_app, tg, script, tmp_path):
    """`clawgate chat` beside `clawgate run` shares the state database: each runs the tasks
    of its own channels only (one could not report the other's)."""
    from gateway.stores.tasks import NewTask
    from memory.layout import dm_session_key

    async with StateDB.for_root(tmp_path / "workspaces") as state:
        new = NewTask(
            person="discord-7",
            workspace=str(tmp_path / "workspaces" / "discord-7"),
            channel="discord",
            chat_id="7",
            session_key=dm_session_key("discord-7"),
            private=True,
            goal="a discord job",
            tools=(),
            token_cap=1000,
            deadline=10.0**10,
            created_at=1.0,
        )
        await state.tasks.add(new, max_per_person=5, max_total=5)
    app = await make_app()
    await tg.send_text(OWNER, "task: a telegram job")
    await wait_for(lambda: reports(tg), what="the telegram task's report")
    rows = {t.channel: t for t in tasks_in(state_db(app))}
    assert rows["telegram"].state == "done"
    assert rows["discord"].state == "queued" and rows["discord"].steps == 0
    assert script.task_requests == 4  # the telegram task's steps only
