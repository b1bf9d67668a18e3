"""The exec tool and its approvals end to end through the loopback Bot API: the real
python-telegram-bot, real inline keyboards and callback queries, the fake model calling the
tool, and the real sandbox running what the owner approved.

User 42 is the owner (settings `owner = "telegram-42"`); user 43 is another approved person.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.clock import FixedClock
from gateway.features.exec.approvals_store import ApprovalStore
from gateway.pipeline.gateway import Gateway
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer, Sent
from tests.gateway.features.exec.conftest import sandbox_settled, wait_until

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}
OWNER, OTHER = 42, 43


@pytest.fixture
async def exec_gateway(
    make_settings: Callable[..., Any],
    anthropic_server: FakeAnthropicServer,
    tg: FakeTelegramServer,
    sandbox_works: None,
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(clock: FixedClock | None = None, **exec_settings: Any) -> Gateway:
        telegram = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": [str(OWNER), str(OTHER)],
        }
        settings = make_settings(
            **llm_overrides(anthropic_server),
            telegram=telegram,
            owner=f"telegram-{OWNER}",
            exec=exec_settings,
        )
        gateway = build_gateway(
            settings,
            build_provider(settings),
            clock=clock,
            options={"telegram": FAST},
            with_exec=True,
        )
        assert gateway.presses is not None
        await gateway.start()
        running.append(gateway)
        assert await sandbox_settled(gateway)  # the tool is offered from here on
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)


def workspace(gateway: Gateway, user: int = OWNER) -> Path:
    return gateway.settings.workspaces_dir / f"telegram-{user}"


async def question(tg: FakeTelegramServer, count: int = 1, chat: int = OWNER) -> Sent:
    """The `count`-th message with buttons in the owner's chat."""
    await wait_until(lambda: len(tg.with_buttons(chat)) >= count, what="the question")
    return tg.with_buttons(chat)[count - 1]


def code_of(sent: Sent) -> str:
    return sent.button_data()[0].rsplit(":", 1)[1]


def tool_results(server: FakeAnthropicServer) -> list[str]:
    """Every tool result the model was sent, in order (the last request's history)."""
    found: list[str] = []
    for message in server.requests[-1]["messages"]:
        content = message["content"]
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    inner = block["content"]
                    found.append(inner if isinstance(inner, str) else json.dumps(inner))
    return found


async def runs(gateway: Gateway) -> list[Any]:
    return await ApprovalStore(gateway.state.database).runs()


async def test_a_pipe_asks_and_runs_once_approved_with_the_button(
    exec_gateway, tg, anthropic_server
):
    gateway = await exec_gateway(allow=["ls"])
    (workspace(gateway) / "notes").mkdir(parents=True, exist_ok=True)
    anthropic_server.reply_tool_call(
        "exec", {"command": "printf 'a\\nb\\n' | wc -l", "cwd": "notes"}
    )
    anthropic_server.reply_text("there are two lines")
    await tg.send_text(OWNER, "count the lines")
    asked = await question(tg)
    assert "printf 'a\\nb\\n' | wc -l" in asked.text
    assert "directory: /workspace/notes" in asked.text and "network: no" in asked.text
    assert [d.split(":")[1] for d in asked.button_data()] == ["once", "always", "deny"]
    query = await tg.press(OWNER, asked, asked.button_data()[0])
    assert "Approved" in await tg.wait_answered(query)
    await wait_until(lambda: "there are two lines" in tg.texts(OWNER), what="the reply")
    result = tool_results(anthropic_server)[-1]
    assert "exit status: 0" in result and "<command-output" in result and "\n2\n" in result
    # The question now says what became of it, and its buttons are gone.
    assert asked.reply_markup is None and asked.text.startswith("Approved (once)")
    [run] = await runs(gateway)
    assert (run.command, run.approved_by, run.exit_code) == (
        "printf 'a\\nb\\n' | wc -l",
        f"telegram:{OWNER}",
        0,
    )


async def test_deny_means_it_never_runs(exec_gateway, tg, anthropic_server):
    gateway = await exec_gateway()
    anthropic_server.reply_tool_call("exec", {"command": "touch notes/made-by-command"})
    anthropic_server.reply_text("ok, not done")
    await tg.send_text(OWNER, "make a file")
    asked = await question(tg)
    query = await tg.press(OWNER, asked, asked.button_data()[2])
    assert "Denied" in await tg.wait_answered(query)
    await wait_until(lambda: "ok, not done" in tg.texts(OWNER), what="the reply")
    assert "denied" in tool_results(anthropic_server)[-1]
    assert not (workspace(gateway) / "notes" / "made-by-command").exists()
    assert await runs(gateway) == []


async def test_a_strangers_press_is_refused_and_changes_nothing(exec_gateway, tg, anthropic_server):
    gateway = await exec_gateway()
    anthropic_server.reply_tool_call("exec", {"command": "echo $((6*7))"})
    anthropic_server.reply_text("forty-two")
    await tg.send_text(OWNER, "compute")
    asked = await question(tg)
    stranger = await tg.press(OTHER, asked, asked.button_data()[0], first_name="Mallory")
    assert "Only the owner" in await tg.wait_answered(stranger)
    store = ApprovalStore(gateway.state.database)
    approval = await store.get(code_of(asked))
    assert approval is not None and approval.status == "pending"
    assert asked.reply_markup is not None  # still answerable by the owner
    owner = await tg.press(OWNER, asked, asked.button_data()[0])
    assert "Approved" in await tg.wait_answered(owner)
    await wait_until(lambda: "forty-two" in tg.texts(OWNER), what="the reply")
    assert "42" in tool_results(anthropic_server)[-1]


async def test_an_allowlisted_command_runs_without_asking(exec_gateway, tg, anthropic_server):
    gateway = await exec_gateway(allow=["ls"])
    (workspace(gateway) / "notes").mkdir(parents=True, exist_ok=True)
    (workspace(gateway) / "notes" / "plan.md").write_text("x", encoding="utf-8")
    anthropic_server.reply_tool_call("exec", {"command": "ls notes"})
    anthropic_server.reply_text("listed")
    await tg.send_text(OWNER, "what is in notes")
    await wait_until(lambda: "listed" in tg.texts(OWNER), what="the reply")
    assert not tg.with_buttons()
    assert "plan.md" in tool_results(anthropic_server)[-1]
    [run] = await runs(gateway)
    assert run.approved_by == "allowlist"


@pytest.mark.parametrize("command", ["ls $(echo notes)", "ls notes; id", "ls `id`"])
async def test_what_the_allowlist_cannot_read_asks(exec_gateway, tg, anthropic_server, command):
    gateway = await exec_gateway(allow=["ls"])
    anthropic_server.reply_tool_call("exec", {"command": command})
    anthropic_server.reply_text("asked")
    await tg.send_text(OWNER, "go")
    asked = await question(tg)
    assert command in asked.text
    query = await tg.press(OWNER, asked, asked.button_data()[2])
    await tg.wait_answered(query)
    await wait_until(lambda: "asked" in tg.texts(OWNER), what="the reply")
    assert await runs(gateway) == []


async def test_always_allow_runs_the_exact_command_later_without_asking(
    exec_gateway, tg, anthropic_server
):
    gateway = await exec_gateway(mode="ask")
    anthropic_server.reply_tool_call("exec", {"command": "echo hi"})
    anthropic_server.reply_text("first")
    await tg.send_text(OWNER, "one")
    asked = await question(tg)
    await tg.wait_answered(await tg.press(OWNER, asked, asked.button_data()[1]))
    await wait_until(lambda: "first" in tg.texts(OWNER), what="the first reply")
    anthropic_server.reply_tool_call("exec", {"command": "echo hi"})
    anthropic_server.reply_text("second")
    await tg.send_text(OWNER, "two")
    await wait_until(lambda: "second" in tg.texts(OWNER), what="the second reply")
    assert len(tg.with_buttons()) == 1
    assert [r.approved_by for r in await runs(gateway)] == ["always", f"telegram:{OWNER}"]


async def test_an_expired_request_cannot_be_approved(exec_gateway, tg, anthropic_server):
    clock = FixedClock(datetime.now(UTC))
    gateway = await exec_gateway(clock=clock, wait_seconds=0, approval_seconds=60)
    anthropic_server.reply_tool_call("exec", {"command": "touch notes/late"})
    anthropic_server.reply_text("waiting for the owner")
    await tg.send_text(OWNER, "make it")
    asked = await question(tg)
    await wait_until(lambda: "waiting for the owner" in tg.texts(OWNER), what="the reply")
    assert "no answer yet" in tool_results(anthropic_server)[-1]
    clock.advance(timedelta(seconds=61))
    query = await tg.press(OWNER, asked, asked.button_data()[0])
    assert "expired" in await tg.wait_answered(query)
    assert asked.text.startswith("Expired") and asked.reply_markup is None
    assert not (workspace(gateway) / "notes" / "late").exists()
    assert await runs(gateway) == []


async def test_a_late_approval_runs_and_posts_the_result_in_the_chat(
    exec_gateway, tg, anthropic_server
):
    gateway = await exec_gateway(wait_seconds=0)
    (workspace(gateway) / "notes").mkdir(parents=True, exist_ok=True)
    anthropic_server.reply_tool_call(
        "exec", {"command": "echo late-result-7 > notes/out.txt; cat notes/out.txt"}
    )
    anthropic_server.reply_text("asked the owner")
    await tg.send_text(OWNER, "do it")
    asked = await question(tg)
    await wait_until(lambda: "asked the owner" in tg.texts(OWNER), what="the reply")
    await tg.wait_answered(await tg.press(OWNER, asked, asked.button_data()[0]))
    await wait_until(
        lambda: any(t.startswith("The command approved") for t in tg.texts(OWNER)),
        what="the posted result",
    )
    posted = next(t for t in tg.texts(OWNER) if t.startswith("The command approved"))
    assert "exit status 0" in posted and "late-result-7" in posted
    # What the command wrote is committed, so `clawgate memory undo` can take it back.
    out = workspace(gateway) / "notes" / "out.txt"
    assert out.read_text() == "late-result-7\n"
    await wait_until(lambda: _committed(workspace(gateway), "notes/out.txt"), what="the commit")


def _committed(ws: Path, rel: str) -> bool:
    import subprocess

    done = subprocess.run(
        ["git", "-C", str(ws), "log", "--name-only", "--format=%s"],
        capture_output=True,
        text=True,
        check=False,
    )
    return rel in done.stdout


async def test_a_script_changed_after_approval_asks_again(exec_gateway, tg, anthropic_server):
    gateway = await exec_gateway(wait_seconds=0)
    script = workspace(gateway) / "notes" / "job.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("echo harmless\n", encoding="utf-8")
    anthropic_server.reply_tool_call("exec", {"command": "sh notes/job.sh"})
    anthropic_server.reply_text("asked")
    await tg.send_text(OWNER, "run my job")
    asked = await question(tg)
    assert "sh notes/job.sh" in asked.text
    first_code = code_of(asked)
    await wait_until(lambda: "asked" in tg.texts(OWNER), what="the reply")
    script.write_text("echo something-else-ran\n", encoding="utf-8")  # after it was shown
    await tg.wait_answered(await tg.press(OWNER, asked, asked.button_data()[0]))
    again = await question(tg, 2)
    assert code_of(again) != first_code
    await wait_until(
        lambda: any("asked again" in t for t in tg.texts(OWNER)), what="the note that it asks again"
    )
    assert not any("something-else-ran" in t for t in tg.texts(OWNER))
    assert await runs(gateway) == []
    # Approving the new question runs the script as it is now.
    await tg.wait_answered(await tg.press(OWNER, again, again.button_data()[0]))
    await wait_until(
        lambda: any(
            t.startswith("The command approved") and "something-else-ran" in t
            for t in tg.texts(OWNER)
        ),
        what="the result",
    )


async def test_another_persons_commands_need_the_owner_to_list_them(
    exec_gateway, tg, anthropic_server
):
    gateway = await exec_gateway(mode="off")
    anthropic_server.reply_tool_call("exec", {"command": "id -u"})
    anthropic_server.reply_text("not for you")
    await tg.send_text(OTHER, "who am i")
    await wait_until(lambda: "not for you" in tg.texts(OTHER), what="the reply")
    offered = {tool["name"] for tool in anthropic_server.requests[0]["tools"]}
    assert "exec" not in offered and "read_file" in offered  # not offered to them at all
    assert "unknown tool 'exec'" in tool_results(anthropic_server)[-1]  # called anyway
    assert await runs(gateway) == []


async def test_a_listed_persons_command_is_approved_by_the_owner(
    exec_gateway, tg, anthropic_server
):
    gateway = await exec_gateway(people=[f"telegram-{OTHER}"])
    await tg.send_text(OWNER, "hello")  # the owner's DM is known: the question goes there
    await wait_until(lambda: len(tg.texts(OWNER)) >= 1, what="the owner's reply")
    anthropic_server.reply_tool_call("exec", {"command": "echo $HOME"})
    anthropic_server.reply_text("done for 43")
    await tg.send_text(OTHER, "where is home")
    asked = await question(tg, chat=OWNER)
    assert f"for telegram-{OTHER}" in asked.text
    # The person themself cannot approve their own request.
    refused = await tg.press(OTHER, asked, asked.button_data()[0])
    assert "Only the owner" in await tg.wait_answered(refused)
    await tg.wait_answered(await tg.press(OWNER, asked, asked.button_data()[0]))
    await wait_until(lambda: "done for 43" in tg.texts(OTHER), what="the reply")
    assert "/tmp" in tool_results(anthropic_server)[-1]
    [run] = await runs(gateway)
    assert run.person_id == f"telegram-{OTHER}"


async def test_slash_approve_answers_where_buttons_do_not(exec_gateway, tg, anthropic_server):
    gateway = await exec_gateway()
    anthropic_server.reply_tool_call("exec", {"command": "echo typed-$((1+1))"})
    anthropic_server.reply_text("approved by typing")
    await tg.send_text(OWNER, "go")
    asked = await question(tg)
    await tg.send_text(OTHER, f"/approve {code_of(asked)}")
    await wait_until(
        lambda: any("Only the owner" in t for t in tg.texts(OTHER)), what="the refusal"
    )
    await tg.send_text(OWNER, f"/approve {code_of(asked).lower()}")
    await wait_until(lambda: "approved by typing" in tg.texts(OWNER), what="the reply")
    assert "typed-2" in tool_results(anthropic_server)[-1]
    [run] = await runs(gateway)
    assert run.approved_by == f"telegram:{OWNER}"
