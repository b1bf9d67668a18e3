"""Running `clawgate run` as a real process against the loopback fakes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.fakes.telegram_server import FakeTelegramServer


def gateway_env(
    tmp_path: Path, tg: FakeTelegramServer, llm_url: str, allow: Iterable[int], **extra: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    env.update(
        {
            "CLAWGATE_CONFIG": str(tmp_path / "none.toml"),
            "CLAWGATE_WORKSPACES_DIR": str(tmp_path / "workspaces"),
            "CLAWGATE_TELEGRAM__TOKEN": tg.token,
            "CLAWGATE_TELEGRAM__BASE_URL": tg.base_url,
            "CLAWGATE_TELEGRAM__POLL_TIMEOUT_SECONDS": "1",
            "CLAWGATE_TELEGRAM__DM_POLICY": "allowlist",
            "CLAWGATE_TELEGRAM__ALLOW_FROM": ",".join(str(user) for user in allow),
            "CLAWGATE_LLM__BASE_URL": llm_url,
            "CLAWGATE_HEALTH__ENABLED": "false",
            "CLAWGATE_PANEL__ENABLED": "false",
            "ANTHROPIC_API_KEY": "sk-reliability-test",
            **extra,
        }
    )
    return env


async def start_gateway(env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    with open(log, "ab") as sink:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "run",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )


def rss_mib(pid: int) -> float:
    """Resident memory of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
