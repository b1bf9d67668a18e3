"""The rules every command follows: root options anywhere, one `--workspace` rule, `--json`
wherever a table is printed, one-line errors (exit statuses: test_exit_codes.py), read-only
commands that write nothing. In-process (`main([...])`) so each case stays cheap.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from gateway.cli.main import hoist_root_options, main
from gateway.stores.state import StateDB
from gateway.workspace.seed import ensure_workspace


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CLAWGATE_MEMORY__EMBEDDER", "none")
    return tmp_path / "workspaces"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_top_level_help_lists_every_command(root, capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in (
        "run",
        "chat",
        "doctor",
        "pairing",
        "users",
        "heartbeat",
        "tasks",
        "memory",
        "backup",
        "restore",
        "clone",
        "status",
        "healthcheck",
    ):
        assert f" {name} " in out, name


def test_root_options_are_hoisted_from_after_the_command():
    args, debug = hoist_root_options(["status", "--json", "--config", "x.toml", "--debug"])
    assert args == ["--config", "x.toml", "--debug", "status", "--json"] and debug
    args, debug = hoist_root_options(["memory", "log", "--config=y.toml"])
    assert args == ["--config=y.toml", "memory", "log"] and not debug


def test_config_after_the_command_is_used(root, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CLAWGATE_WORKSPACES_DIR")
    config = tmp_path / "other.toml"
    config.write_text(f'workspaces_dir = "{tmp_path / "elsewhere"}"\n')
    ensure_workspace(tmp_path / "elsewhere", "ana")
    assert main(["heartbeat", "status", "--json", "--config", str(config)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["person"] for row in rows] == ["ana"]


def test_a_missing_config_file_given_with_the_flag_fails(root, capsys):
    assert main(["--config", "nope.toml", "status"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "nope.toml" in line and "does not exist" in line


def test_unknown_command_and_bad_option_are_one_line_exit_2(root, capsys):
    assert main(["frobnicate"]) == 2
    assert "frobnicate" in _one_error_line(capsys.readouterr().err)
    assert main(["memory", "log", "--nope"]) == 2
    assert "--nope" in _one_error_line(capsys.readouterr().err)


def test_invalid_person_is_one_line_exit_2(root, capsys):
    assert main(["chat", "--person", "Bob Smith"]) == 2
    assert "invalid person id" in _one_error_line(capsys.readouterr().err)


def test_workspaces_dir_that_is_a_file_is_one_line(root, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(blocker))
    assert main(["pairing", "list"]) == 2
    assert str(blocker) in _one_error_line(capsys.readouterr().err)


def test_workspace_option_takes_a_person_id_or_a_path(root, tmp_path, capsys):
    ws = ensure_workspace(root, "ana")
    (ws / "MEMORY.md").write_text("Ana parks at spot 42.\n")
    assert main(["memory", "index", "--workspace", "ana"]) == 0
    assert "indexed" in capsys.readouterr().out
    assert (ws / ".recall" / "index.sqlite").exists()
    assert main(["memory", "search", "spot", "--workspace", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["path"] == "MEMORY.md"
    # No value: the owner's workspace, which does not exist yet.
    assert main(["memory", "status"]) == 2
    assert "owner" in _one_error_line(capsys.readouterr().err)


def test_memory_status_and_log_create_nothing_in_a_plain_folder(root, tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "MEMORY.md").write_text("notes\n")
    assert main(["memory", "status", "--workspace", str(plain)]) == 0
    assert "no recall index yet" in capsys.readouterr().out
    assert main(["memory", "status", "--workspace", str(plain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["present"] is False
    assert main(["memory", "log", "--workspace", str(plain)]) == 1
    assert "not versioned yet" in capsys.readouterr().err
    assert sorted(p.name for p in plain.iterdir()) == ["MEMORY.md"]


def test_memory_log_since_must_be_a_time(root, tmp_path, capsys):
    assert main(["memory", "log", "--workspace", str(tmp_path), "--since", "banana"]) == 2
    assert "banana" in _one_error_line(capsys.readouterr().err)


def test_memory_log_json_and_undo_of_an_unknown_revision(root, tmp_path, capsys):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("one\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(ws),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init: MEMORY.md",
        ],
        check=True,
    )
    assert main(["memory", "log", "--workspace", str(ws), "--json", "--since", "2 days ago"]) == 0
    log = json.loads(capsys.readouterr().out)
    assert log[0]["subject"] == "init: MEMORY.md" and log[0]["files"] == ["MEMORY.md"]
    assert main(["memory", "undo", "deadbeef", "--workspace", str(ws)]) == 2  # a mistake
    line = _one_error_line(capsys.readouterr().err)
    assert "deadbeef" in line and "fatal" not in line and "clawgate memory log" in line


def test_backup_refuses_to_overwrite_without_force(root, tmp_path, capsys):
    ensure_workspace(root, "owner")
    archive = tmp_path / "b.tar.gz"
    archive.write_bytes(b"precious")
    assert main(["backup", "--all", "--output", str(archive)]) == 2
    assert "--force" in _one_error_line(capsys.readouterr().err)
    assert archive.read_bytes() == b"precious"
    assert main(["backup", "--all", "--output", str(archive), "--force"]) == 0
    assert archive.read_bytes() != b"precious"


def test_tables_have_json(root, capsys):
    ensure_workspace(root, "telegram-7")

    async def seed() -> None:
        async with StateDB.for_root(root) as state:
            await state.links.link("telegram", "7", "telegram-7")
            await state.access.approve("telegram", "7", via="link")

    asyncio.run(seed())
    assert main(["users", "list", "--json"]) == 0
    users = json.loads(capsys.readouterr().out)
    assert users["links"] == [{"person": "telegram-7", "channel": "telegram", "user_id": "7"}]
    assert main(["pairing", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["heartbeat", "status", "--json"]) == 0
    assert [row["person"] for row in json.loads(capsys.readouterr().out)] == ["telegram-7"]
    assert main(["users", "list"]) == 0
    assert "telegram:7" in capsys.readouterr().out


def test_channel_names_accept_any_case(root, capsys):
    assert main(["pairing", "approve", "Telegram", "ABCD2345"]) == 2  # no such code, but parsed
    assert "ABCD2345" in _one_error_line(capsys.readouterr().err).upper()


def test_restore_as_hints_at_no_state_when_the_state_database_is_in_the_way(root, tmp_path, capsys):
    ensure_workspace(root, "ana")

    async def make_state() -> None:
        async with StateDB.for_root(root):
            pass

    asyncio.run(make_state())
    archive = tmp_path / "ana.tar.gz"
    assert main(["backup", "--all", "--output", str(archive)]) == 0
    capsys.readouterr()
    assert main(["restore", str(archive), "--as", "ana-copy"]) == 2
    assert "--no-state" in _one_error_line(capsys.readouterr().err)
    assert main(["restore", str(archive), "--as", "ana-copy", "--no-state"]) == 0
    assert (root / "ana-copy" / "AGENTS.md").exists()  # the hint was the way through


def test_listing_commands_create_no_state_database(root, capsys):
    assert main(["pairing", "list"]) == 0
    assert main(["users", "list", "--json"]) == 0
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "no pending pairing requests" in out and "no tasks" in out
    assert not root.exists()
