"""Versioned workspaces: a commit per change, log/diff/undo, and life without git."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from pathlib import Path

from gateway.cli.main import main
from gateway.ops.versioning import Change, Versioning, undo_words
from gateway.workspace.seed import workspace_path
from memory.index import RecallIndex


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={workspace / '.git'}", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit_count(workspace: Path) -> int:
    return int(git(workspace, "rev-list", "--count", "HEAD").strip())


async def test_a_turn_that_writes_memory_makes_one_commit(anthropic_server, make_gateway, tmp_path):
    gateway, channel = await make_gateway(anthropic_server)
    await channel.inject("dana", "hello")
    await channel.wait_for(1)
    await gateway.lanes.drain()  # the commit follows the delivered reply
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-dana")
    # First contact: the seeded workspace is the first commit; a chat-only turn adds none.
    assert commit_count(workspace) == 1
    assert "init:" in git(workspace, "log", "-1", "--format=%s")

    anthropic_server.reply_tool_call("write_file", {"path": "MEMORY.md", "content": "- tea\n"})
    anthropic_server.reply_text("Saved.")
    await channel.inject("dana", "remember I like tea")
    await channel.wait_for(2)
    await gateway.lanes.drain()

    assert commit_count(workspace) == 2
    message = git(workspace, "log", "-1", "--format=%B")
    assert message.startswith("turn: MEMORY.md")
    assert "Session: " in message and "Turn: " in message
    assert git(workspace, "show", "HEAD:MEMORY.md") == "- tea\n"
    # Transcripts and the index are not versioned.
    tracked = git(workspace, "ls-files")
    assert "sessions/" not in tracked
    assert gateway.metrics.commits.value(reason="turn") == 1


async def test_hand_edits_are_committed_before_the_next_turn(
    anthropic_server, make_gateway, tmp_path
):
    gateway, channel = await make_gateway(anthropic_server)
    await channel.inject("erin", "hi")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-erin")
    (workspace / "USER.md").write_text("Erin, likes hiking\n")
    await channel.inject("erin", "hi again")
    await channel.wait_for(2)
    await gateway.lanes.drain()
    assert git(workspace, "log", "-1", "--format=%s") == "hand edit: USER.md\n"
    assert commit_count(workspace) == 2


async def test_an_edit_during_a_chat_only_turn_is_the_humans_not_the_turns(
    anthropic_server, make_gateway, tmp_path
):
    # A turn without tool calls wrote nothing: it makes no commit (and walks no workspace),
    # and an edit made while it ran is committed as a hand edit before the next turn.
    gateway, channel = await make_gateway(anthropic_server)
    await channel.inject("fay", "hi")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-fay")
    anthropic_server.reply_delay(1.0)
    asked = len(anthropic_server.requests)
    await channel.inject("fay", "how are you?")
    for _ in range(200):
        if len(anthropic_server.requests) > asked:
            break
        await asyncio.sleep(0.02)
    (workspace / "USER.md").write_text("Fay, edited while the assistant answered\n")
    await channel.wait_for(2)
    await gateway.lanes.drain()
    assert commit_count(workspace) == 1  # the seeded workspace only
    await channel.inject("fay", "and now?")
    await channel.wait_for(3)
    await gateway.lanes.drain()
    assert git(workspace, "log", "-1", "--format=%s") == "hand edit: USER.md\n"
    assert gateway.metrics.commits.value(reason="turn") == 0


async def test_commit_is_free_when_nothing_changed(tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("a\n")
    versioning = Versioning()
    await versioning.ensure_repo(workspace)
    (workspace / "MEMORY.md").write_text("b\n")
    assert await versioning.commit(workspace, "turn")
    calls = []
    original = versioning._git

    async def counting(*args, **kwargs):
        calls.append(args)
        return await original(*args, **kwargs)

    monkeypatch.setattr(versioning, "_git", counting)
    assert await versioning.commit(workspace, "turn") is None
    assert calls == []  # no git process at all


async def test_undo_restores_and_the_next_search_reflects_it(tmp_path, capsys):
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    note = workspace / "MEMORY.md"
    note.write_text("The parking spot is number 17 near the bakery.\n")
    versioning = Versioning()
    await versioning.ensure_repo(workspace)
    note.write_text("The parking spot is number 42 near the florist.\n")
    await versioning.commit(workspace, "turn")

    index = RecallIndex(workspace, None, sessions=False)
    try:
        found = await index.search("parking florist")
        assert any("florist" in r.snippet for r in found.results)

        where = ["--workspace", str(workspace)]
        assert await asyncio.to_thread(main, ["memory", "log", *where]) == 0
        assert "turn: MEMORY.md" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["memory", "diff", *where]) == 0
        assert "+The parking spot is number 42" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["memory", "undo", *where]) == 0
        assert "MEMORY.md" in capsys.readouterr().out

        assert note.read_text() == "The parking spot is number 17 near the bakery.\n"
        after = await index.search("parking florist bakery")
        snippets = " ".join(r.snippet for r in after.results)
        assert "bakery" in snippets and "florist" not in snippets
    finally:
        await index.close()
    assert git(workspace, "log", "-1", "--format=%s").startswith("undo: MEMORY.md")


async def test_undo_to_a_revision_restores_the_whole_tree(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text("one\n")
    versioning = Versioning()
    await versioning.ensure_repo(workspace)
    first = (await versioning.head(workspace)).rev
    (workspace / "MEMORY.md").write_text("two\n")
    (workspace / "notes.md").write_text("new\n")
    await versioning.commit(workspace, "turn")
    (workspace / "MEMORY.md").write_text("three\n")
    await versioning.commit(workspace, "turn")

    changed = await versioning.undo(workspace, first, to=True)
    assert sorted(changed) == [Change("MEMORY.md", "restored"), Change("notes.md", "deleted")]
    assert undo_words(changed) == "deleted notes.md; restored MEMORY.md"
    assert (workspace / "MEMORY.md").read_text() == "one\n"
    assert not (workspace / "notes.md").exists()


def test_memory_commands_explain_an_unversioned_workspace(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    assert main(["memory", "diff", "--workspace", str(tmp_path / "plain")]) == 1
    assert "not versioned yet" in capsys.readouterr().err


async def test_without_git_one_warning_and_everything_else_works(
    anthropic_server, make_gateway, tmp_path, monkeypatch, caplog
):
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    caplog.set_level(logging.WARNING)
    gateway, channel = await make_gateway(anthropic_server)
    assert not gateway.versioning.enabled

    anthropic_server.reply_tool_call("write_file", {"path": "MEMORY.md", "content": "- tea\n"})
    anthropic_server.reply_text("Saved.")
    await channel.inject("fay", "remember tea")
    await channel.inject("fay", "and hello")
    await channel.wait_for(2)

    assert channel.texts() == ["Saved.", "echo: and hello"]
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-fay")
    assert (workspace / "MEMORY.md").read_text() == "- tea\n"
    assert not (workspace / ".git").exists()
    warnings = [r for r in caplog.records if "git not found" in r.getMessage()]
    assert len(warnings) == 1
