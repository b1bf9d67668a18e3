"""Small wording that misled (issue 27): each line says what really happened."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.features.scheduling import delivery_note
from gateway.ops.versioning import Versioning
from gateway.stores.links import DmRoute
from gateway.stores.state import StateDB
from gateway.workspace.seed import ensure_workspace
from tests.fakes.mcp_server import stdio_config


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    return tmp_path / "workspaces"


def _git_log(workspace: Path) -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(workspace), "log", "--format=%s"],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.splitlines()


def test_undoing_a_files_creation_says_it_was_deleted(root, capsys):
    workspace = ensure_workspace(root, "owner")
    versioning = Versioning()
    asyncio.run(versioning.ensure_repo(workspace))
    (workspace / "notes.md").write_text("- new\n")
    (workspace / "MEMORY.md").write_text("- changed\n")
    asyncio.run(versioning.commit(workspace, "turn"))
    assert main(["memory", "undo"]) == 0
    out = capsys.readouterr().out
    assert "deleted notes.md" in out and "restored MEMORY.md" in out
    assert "file(s)" not in out and "restored notes.md" not in out


def test_schedule_add_commits_as_schedule_and_says_where_it_goes(root, capsys):
    workspace = ensure_workspace(root, "owner")
    asyncio.run(Versioning().ensure_repo(workspace))
    assert main(["schedule", "add", "tomorrow 9am", "Send the invoice"]) == 0
    out = capsys.readouterr().out
    assert "Scheduled reminder #1" in out and "`clawgate chat`" in out
    assert _git_log(workspace)[0] == "schedule: .clawgate-schedule.json"
    assert main(["schedule", "cancel", "1"]) == 0
    assert _git_log(workspace)[0] == "schedule: .clawgate-schedule.json"
    assert not any(line.startswith("hand edit") for line in _git_log(workspace))

    # A person who wrote from Telegram: there.
    async def route() -> None:
        async with StateDB.for_root(root) as state:
            await state.links.set_last_dm_route("owner", "telegram", "42", "42", datetime.now(UTC))

    asyncio.run(route())
    assert main(["schedule", "add", "in 2 hours", "Stretch"]) == 0
    assert "`clawgate run` sends it to your Telegram DM" in capsys.readouterr().out


def test_where_a_reminder_goes_in_every_way_of_running() -> None:
    telegram = DmRoute("ana", "telegram", "7", "7", datetime.now(UTC))
    # `clawgate run` with Telegram: there.
    assert (
        delivery_note("ana", "owner", telegram, {"telegram"}, 12)
        == "It will be sent to ana's Telegram DM."
    )
    # The owner's terminal chat, with and without a Telegram account of theirs.
    mine = DmRoute("owner", "telegram", "7", "7", telegram.at)
    assert (
        "this chat if the chat is open then; otherwise `clawgate run` sends it to your "
        "Telegram DM" in delivery_note("owner", "owner", mine, {"terminal"}, 12)
    )
    assert "next starts (up to 12 hours late)" in delivery_note(
        "owner", "owner", None, {"terminal"}, 12
    )
    # `clawgate run` with Telegram, but no account of the owner's has written yet.
    assert delivery_note("owner", "owner", None, {"telegram"}, 12).startswith(
        "Nowhere to send it yet: no Telegram or Discord account of yours"
    )
    # Nowhere: said so.
    assert delivery_note("bob", "owner", None, {"telegram"}, 12).startswith(
        "Nowhere to send it yet: bob has not written to the bot"
    )


def test_skills_check_reports_every_problem_of_a_skill(root, capsys):
    bad = root / "owner" / "skills" / "report"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: Weekly Report\n---\nBody.\n")
    assert main(["skills", "check"]) == 1
    out = capsys.readouterr().out
    assert "must be lowercase letters" in out and "has no description" in out


def test_mcp_check_names_the_tools_and_promises_no_next_attempt(
    root, tmp_path, monkeypatch, capsys
):
    config = tmp_path / "clawgate.toml"
    good = stdio_config(tools=["echo", "add"])
    config.write_text(
        "[mcp.servers.fake]\n"
        + "\n".join(f"{k} = {json.dumps(v)}" for k, v in good.items() if k != "env")
        + f"\nenv = {{ PYTHONPATH = {json.dumps(good['env']['PYTHONPATH'])} }}\n"
        + '[mcp.servers.missing]\ncommand = "/nonexistent/server"\n'
    )
    monkeypatch.setenv("CLAWGATE_CONFIG", str(config))
    assert main(["mcp", "check"]) == 1
    out = capsys.readouterr().out
    assert "fake__echo, fake__add" in out
    assert "next attempt" not in out and "2 tools" not in out and "cannot run" in out
