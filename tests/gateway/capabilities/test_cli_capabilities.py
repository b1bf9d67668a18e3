"""`clawgate skills list|check` and `clawgate mcp check`, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli.main import main
from tests.fakes.mcp_server import stdio_config


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    skills = tmp_path / "workspaces" / "owner" / "skills"
    (skills / "ok").mkdir(parents=True)
    (skills / "ok" / "SKILL.md").write_text("---\nname: ok\ndescription: A fine skill.\n---\n")
    shared = tmp_path / "shared"
    (shared / "team").mkdir(parents=True)
    (shared / "team" / "SKILL.md").write_text("---\nname: team\ndescription: Shared one.\n---\n")
    monkeypatch.setenv("CLAWGATE_SKILLS__SHARED_DIR", str(shared))
    return tmp_path / "workspaces"


def test_skills_list_shows_own_and_shared(root, capsys):
    assert main(["skills", "list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["source"]) for s in out["skills"]] == [
        ("ok", "workspace"),
        ("team", "shared"),
    ]
    assert out["problems"] == [] and out["prompt"]["listed"] == 2
    assert main(["skills", "list"]) == 0
    assert "A fine skill." in capsys.readouterr().out


def test_skills_check_fails_on_a_broken_skill_and_names_it(root, capsys):
    assert main(["skills", "check"]) == 0
    assert "2 valid skill(s)" in capsys.readouterr().out
    bad = root / "owner" / "skills" / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: bad\n---\n")
    assert main(["skills", "check"]) == 1
    out = capsys.readouterr().out
    assert "BROKEN" in out and "bad/SKILL.md: front matter has no description" in out


def test_skills_list_of_a_missing_workspace_is_one_error_line(root, capsys):
    assert main(["skills", "list", "--workspace", "nobody"]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_mcp_check_starts_reports_and_stops_each_server(root, tmp_path, monkeypatch, capsys):
    config = tmp_path / "clawgate.toml"
    good = stdio_config(tools=["echo", "add"])
    config.write_text(
        "[mcp.servers.fake]\n"
        + "\n".join(f"{k} = {json.dumps(v)}" for k, v in good.items() if k != "env")
        + f"\nenv = {{ PYTHONPATH = {json.dumps(good['env']['PYTHONPATH'])} }}\n"
        # (a later restart would show it "starting" when the fake starts slowly, on a busy
        # machine: only the first attempt is reported)
        + '[mcp.servers.missing]\ncommand = "/nonexistent/server"\n'
        + "restart_initial_seconds = 600\n"
    )
    monkeypatch.setenv("CLAWGATE_CONFIG", str(config))
    assert main(["mcp", "check", "--json"]) == 1  # one server does not start
    rows = {row["server"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["fake"]["status"] == "ready"
    assert rows["fake"]["tools"] == ["fake__echo", "fake__add"]
    assert rows["fake"]["contexts"] == ["owner_dm", "heartbeat"]
    assert rows["missing"]["status"] == "down" and "cannot run" in rows["missing"]["detail"]
