"""Start-up errors: one clear line, a non-zero exit, and no hang.

aiosqlite runs each connection in a worker thread that is not a daemon, so a connection left
open by a failed start keeps the process alive after the error. On main a corrupt state.db
printed a 40-line traceback and then hung; these run `clawgate` as a real process with a
timeout.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env

TIMEOUT = 30


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
        pytest.fail(f"clawgate {' '.join(args)} did not exit within {TIMEOUT} s (hang)")
    return proc.returncode or 0, (out + err).decode()


def _corrupt_state(tmp_path) -> None:
    state = tmp_path / "workspaces" / ".gateway" / "state.db"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"not a database, just bytes " * 200)


@pytest.mark.parametrize("platform", [True, False], ids=["telegram", "terminal"])
async def test_a_corrupt_state_db_is_one_line_and_an_exit(tmp_path, anthropic_server, platform):
    _corrupt_state(tmp_path)
    async with FakeTelegramServer() as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, allow=[1])
        if not platform:
            env = {k: v for k, v in env.items() if not k.startswith("CLAWGATE_TELEGRAM")}
        code, output = await _run(env, "run")
    assert code == 1, output  # damaged data: a failure (the exit-code rule, docs/cli.md)
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("clawgate:")]
    assert len(errors) == 1 and "state database" in errors[0] and "not a database" in errors[0]


async def test_admin_commands_on_a_corrupt_state_db_say_so_in_one_line(tmp_path, anthropic_server):
    _corrupt_state(tmp_path)
    async with FakeTelegramServer() as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, allow=[1])
    code, output = await _run(env, "pairing", "list")
    assert code == 1 and "Traceback" not in output
    assert output.count("\n") == 1 and "state database" in output


async def test_a_start_up_error_after_the_database_opened_does_not_hang(tmp_path, anthropic_server):
    with socket.socket() as busy:  # the health port is taken
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        async with FakeTelegramServer() as tg:
            env = gateway_env(
                tmp_path,
                tg,
                anthropic_server.base_url,
                allow=[1],
                CLAWGATE_HEALTH__ENABLED="true",
                CLAWGATE_HEALTH__PORT=str(port),
            )
            code, output = await _run(env, "run")
    assert code == 2, output
    assert "Traceback" not in output
    assert f"cannot serve /healthz on 127.0.0.1:{port}" in output
