"""The terminal chat as a person uses it: `clawgate chat` in a real process, piped or on a pty."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeAnthropicServer

REPO = Path(__file__).resolve().parents[2]


def chat_env(tmp_path: Path, server: FakeAnthropicServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CLAWGATE_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env.update({
        "PYTHONPATH": str(REPO),
        "CLAWGATE_CONFIG": str(tmp_path / "none.toml"),
        "CLAWGATE_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "CLAWGATE_LLM__BASE_URL": server.base_url,
        "CLAWGATE_TIMEZONE": "UTC",
        "ANTHROPIC_API_KEY": "sk-terminal-test",
        **extra,
    })
    return env


async def test_piped_lines_are_answered_in_input_order(tmp_path, anthropic_server):
    """A slash command after a slow turn waits for it (it printed first before)."""
    anthropic_server.reply_delay(1.5)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "chat", env=chat_env(tmp_path, anthropic_server),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(b"first\n/status\nsecond\n"), 60)
    assert process.returncode == 0, err.decode()
    lines = [line for line in out.decode().splitlines() if line.startswith("assistant> ")]
    assert lines[0] == "assistant> echo: first"
    assert lines[-1] == "assistant> echo: second"
    assert len(lines) == 3 and "echo" not in lines[1]  # the status, in between
