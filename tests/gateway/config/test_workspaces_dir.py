"""The workspaces root does not depend on the directory clawgate is started from."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from gateway.config.settings import describe_workspaces_dir, load_settings
from tests.conftest import llm_overrides

REPO = Path(__file__).resolve().parents[3]


def test_default_is_per_user_and_an_explicit_setting_wins(tmp_path, monkeypatch):
    home = tmp_path / "xdg-data" / "clawgate" / "workspaces"
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.workspaces_dir == home
    assert "the per-user default" in describe_workspaces_dir(settings)
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "mine"))
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.workspaces_dir == tmp_path / "mine"
    assert describe_workspaces_dir(settings) == str(tmp_path / "mine")


def test_workspaces_of_an_older_version_here_are_kept_and_named(tmp_path):
    legacy = tmp_path / "workspaces"
    (legacy / "README.md").parent.mkdir()
    (legacy / "README.md").write_text("the repository's README only")
    assert load_settings(tmp_path / "absent.toml").workspaces_dir != legacy  # no data: no
    (legacy / ".gateway").mkdir()
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.workspaces_dir == legacy
    assert "made by an older clawgate" in describe_workspaces_dir(settings)


async def test_chat_started_from_two_directories_is_one_conversation(tmp_path, anthropic_server):
    """`clawgate chat` from anywhere reaches the same assistant (it used ./workspaces)."""
    llm = llm_overrides(anthropic_server)["llm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "CLAWGATE_LLM__BASE_URL": llm["base_url"],
            "ANTHROPIC_API_KEY": "sk-test",
            "CLAWGATE_TIMEZONE": "UTC",
        }
    )
    outputs = []
    for name, line in (("one", "my cat is called Miso"), ("two", "what is my cat called?")):
        where = tmp_path / name
        where.mkdir()
        done = await _run(env, where, line)
        assert done.returncode == 0, done.stderr
        outputs.append(done)
    history = str(anthropic_server.requests[-1])
    assert "my cat is called Miso" in history  # the second start continued the first
    home = tmp_path / "xdg-data" / "clawgate" / "workspaces"
    assert (home / "owner" / "sessions").is_dir()
    assert not (tmp_path / "one" / "workspaces").exists()


async def _run(env: dict[str, str], cwd: Path, line: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", "chat"],
        input=line + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )
