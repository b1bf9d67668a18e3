"""The command line as a person runs it: real processes, the fake provider on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

TIMEOUT = 60


async def _run(args: list[str], env: dict[str, str], stdin: str = "") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), TIMEOUT)
    return process.returncode or 0, out.decode(), err.decode()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CLAWGATE_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    env["CLAWGATE_WORKSPACES_DIR"] = str(tmp_path / "workspaces")
    env["CLAWGATE_CONFIG"] = str(tmp_path / "none.toml")
    env["CLAWGATE_PANEL__PORT"] = "0"  # a panel started by a command binds any free port
    env.update(extra)
    return env


async def test_run_without_a_key_says_how_to_set_one_in_one_line(tmp_path):
    code, _, err = await _run(["run"], _env(tmp_path))
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "ANTHROPIC_API_KEY" in lines[0]


async def test_invalid_setting_fails_at_start_in_one_line(tmp_path):
    code, _, err = await _run(["run"], _env(tmp_path, CLAWGATE_LLM__PROVIDER="nope"))
    assert code == 2
    assert err.strip().count("\n") == 0 and "CLAWGATE_LLM__PROVIDER" in err


async def test_chat_remembers_across_restarts(tmp_path, anthropic_server):
    env = _env(
        tmp_path, ANTHROPIC_API_KEY="sk-test-cli", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url
    )
    code, out, err = await _run(["chat"], env, stdin="my name is Ada\n/status\n")
    assert code == 0, err
    assert "assistant> echo: my name is Ada" in out
    assert "Session: owner:dm" in out
    assert (tmp_path / "workspaces" / "owner" / "AGENTS.md").exists()

    code, out, err = await _run(["run"], env, stdin="what is my name?\n")
    assert code == 0, err
    assert "terminal chat" in err
    assert "assistant> echo: what is my name?" in out
    history = json.dumps(anthropic_server.requests[-1]["messages"])
    assert "my name is Ada" in history
    assert "sk-test-cli" not in out + err


async def test_doctor_reports_each_check(tmp_path, anthropic_server):
    # The provider check makes one real request: to the fake server, never the internet.
    code, out, _ = await _run(
        ["doctor"],
        _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url),
    )
    assert code == 0, out
    assert "sqlite-vec" in out and "writable" in out and "all checks passed" in out

    code, out, _ = await _run(["doctor"], _env(tmp_path))
    assert code == 1
    assert "FAIL no provider API key" in out and "fix:" in out


async def test_doctor_makes_one_real_request_and_explains_failures(tmp_path, openai_server):
    env = _env(
        tmp_path,
        CLAWGATE_LLM__PROVIDER="openai",
        OPENAI_API_KEY="sk-x",
        CLAWGATE_LLM__BASE_URL=openai_server.base_url,
        CLAWGATE_LLM__MODEL="tiny",
    )
    code, out, _ = await _run(["doctor"], env)
    assert code == 0 and "provider answers" in out and "tools accepted" in out, out
    assert openai_server.requests[-1]["model"] == "tiny"

    openai_server.reply_error(401, {"error": {"message": "bad key", "type": "auth"}})
    code, out, _ = await _run(["doctor"], env)
    assert code == 1 and "refused the API key (HTTP 401)" in out

    openai_server.reply_error(404, {"error": {"message": "model 'tiny' not found"}})
    code, out, _ = await _run(["doctor"], env)
    assert code == 1 and "no such model or endpoint (HTTP 404)" in out and "tiny" in out

    openai_server.reply_error(400, {"error": {"message": "tiny does not support tools"}})
    code, out, _ = await _run(["doctor"], env)
    assert code == 1 and "does not take tools" in out

    closed = _env(
        tmp_path, CLAWGATE_LLM__PROVIDER="openai", CLAWGATE_LLM__BASE_URL="http://127.0.0.1:9/v1"
    )
    code, out, _ = await _run(["doctor"], closed)
    assert code == 1 and "not reachable" in out and "all checks passed" not in out
    assert "no API key set" in out
