"""One gateway per workspaces root, with `clawgate run` as real processes.

A second `clawgate run` on the same workspaces used to start (on another port) and poll the
same bot: a message went to the model twice and the transcript held two answers. Now it says
who runs and exits 1, while commands that write beside a running gateway still work.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from gateway.stores.state import StateDB, state_path
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway
from tests.settle import settled

TIMEOUT = 30
PERSON = 4201


async def _run(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"clawgate {' '.join(args)} kept running: a second gateway started")
    return proc.returncode or 0, (out + err).decode()


async def test_a_second_run_on_the_same_root_says_who_runs_and_exits_1(tmp_path, anthropic_server):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, [PERSON])
        first = await start_gateway(env, tmp_path / "first.log")
        try:
            await tg.send_text(PERSON, "hello once")
            await tg.wait_sent(1, timeout=30)  # the first gateway runs and answers

            code, output = await _run(env, "run")

            root = tmp_path / "workspaces"
            assert code == 1, output
            assert f"clawgate is already running (pid {first.pid}) on {root}" in output
            assert "Traceback" not in output
            # A command that writes to the state database still works beside it.
            code, output = await _run(env, "users", "link", "telegram:9999", "discord:9999")
            assert code == 0 and "linked telegram:9999 and discord:9999" in output, output
            await tg.send_text(PERSON, "hello twice")
            await tg.wait_sent(2, timeout=30)
            async with StateDB(state_path(root)) as state:  # beside the running gateway
                await settled(state, timeout=30)
            assert len(tg.sent) == 2  # each message answered once: no second poller
        finally:
            first.terminate()
            await first.wait()
        # Once the first has stopped, the lock is free again.
        second = await start_gateway(env, tmp_path / "second.log")
        try:
            await tg.send_text(PERSON, "after the restart")
            await tg.wait_sent(3, timeout=30)
        finally:
            second.kill()
            await second.wait()
