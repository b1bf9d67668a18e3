"""The one exit-code rule, command by command (docs/cli.md "Exit status", gateway/cli/common.py):
2 when the command cannot do what was asked as written (change the command line or a
setting), 1 when it ran and failed or found a problem in the data, the network or the system.
In-process (`main([...])`), each case one `clawgate: ...` line.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.stores.state import StateDB, state_path
from gateway.workspace.seed import ensure_workspace

MISTAKE, FAILURE = 2, 1


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CLAWGATE_MEMORY__EMBEDDER", "none")
    monkeypatch.setenv("CLAWGATE_HEALTH__PORT", "9")  # nothing answers there
    root = tmp_path / "workspaces"
    ensure_workspace(root, "owner")
    return root


def _versioned(workspace: Path) -> None:
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", "-C", str(workspace), *args], check=True)


def _state(root: Path) -> None:
    async def make() -> None:
        async with StateDB.for_root(root):
            pass

    asyncio.run(make())


def _status(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit status, and what was printed (stderr, then stdout)."""
    code = main(args)
    said = capsys.readouterr()
    assert "Traceback" not in said.err
    return code, said.err + said.out


def test_mistakes_in_the_command_or_a_setting_exit_2(root, tmp_path, monkeypatch, capsys):
    _versioned(root / "owner")
    _state(root)
    (tmp_path / "exists.tar.gz").write_bytes(b"precious")
    (tmp_path / "notes.txt").write_text("not an archive")
    cases = [
        (["frobnicate"], "frobnicate"),
        (["memory", "log", "--nope"], "--nope"),
        (["memory", "undo", "deadbeef"], "no revision 'deadbeef'"),  # was 1
        (["memory", "diff", "deadbeef"], "no revision 'deadbeef'"),
        (["schedule", "add", "whenever you like", "x"], "time of day"),
        (["schedule", "cancel", "99"], "no job #99"),
        (["pairing", "approve", "telegram", "ABCD2345"], "no pending pairing request"),
        (["pairing", "revoke", "telegram", "999"], "is not approved"),
        (["users", "unlink", "telegram:999"], "is not linked"),
        (["restore", str(tmp_path / "missing.tar.gz")], "no archive"),
        (["restore", str(tmp_path / "notes.txt")], "not a clawgate backup"),
        (["backup", "--all", "--output", str(tmp_path / "exists.tar.gz")], "--force"),
        (["clone", "owner", "owner"], "already exists"),
        (["chat", "--person", "Bob Smith"], "invalid person id"),
        (["--config", str(tmp_path / "missing.toml"), "status"], "does not exist"),
    ]
    for args, said in cases:
        code, err = _status(args, capsys)
        assert (code, said in err) == (MISTAKE, True), (args, code, err)
    monkeypatch.setenv("CLAWGATE_PANEL__ENABLED", "false")
    assert _status(["panel", "url"], capsys)[0] == MISTAKE
    monkeypatch.setenv("CLAWGATE_LLM__PROVDER", "openai")
    code, err = _status(["status"], capsys)
    assert code == MISTAKE and "did you mean CLAWGATE_LLM__PROVIDER" in err


def test_failures_and_problems_found_exit_1(root, tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.mkdir()
    (root / "owner" / ".clawgate-schedule.json").write_text('{"jobs": [')  # was 2
    broken_skill = root / "owner" / "skills" / "Bad Name"
    broken_skill.mkdir(parents=True)
    (broken_skill / "SKILL.md").write_text("no front matter\n")
    first = tmp_path / "first"
    first.mkdir()
    (first / "MEMORY.md").write_text("one\n")
    _versioned(first)
    cases = [
        (["schedule", "list"], "not valid JSON"),
        (["schedule", "add", "tomorrow at 9", "x"], "not valid JSON"),
        (["memory", "log", "--workspace", str(plain)], "not versioned yet"),
        (["memory", "undo", "--workspace", str(first)], "first commit"),
        (["skills", "check"], "BROKEN"),
        (["healthcheck"], "unhealthy"),
    ]
    for args, said in cases:
        code, err = _status(args, capsys)
        assert (code, said in err) == (FAILURE, True), (args, code, err)
    state_path(root).parent.mkdir(parents=True, exist_ok=True)
    state_path(root).write_bytes(b"this is not a database" * 100)  # damaged
    code, err = _status(["pairing", "list"], capsys)
    assert code == FAILURE and "cannot open the state database" in err
