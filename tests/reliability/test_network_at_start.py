"""No network at start is the machine's state, not a mistake: `clawgate run`
keeps running, says so once, shows not ready, and connects when the Bot API comes back. A token
that cannot be one is a configuration error: exit 2, one line. Real processes, loopback fakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientSession

from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

PERSON = 4301


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _readyz(port: int) -> dict | None:
    try:
        async with ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as r:
            return json.loads(await r.text())
    except OSError:
        return None


async def _until(check, timeout: float) -> None:
    for _ in range(int(timeout / 0.2)):
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError("condition not reached")


@contextlib.asynccontextmanager
async def _hanging_up(port: int) -> AsyncIterator[list[int]]:
    """Something at `port` that closes every connection at once, counting them: a Bot API
    still unreachable, whose retries can be seen."""
    attempts = [0]

    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts[0] += 1
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", port)
    try:
        yield attempts
    finally:
        server.close()
        await server.wait_closed()


async def test_no_bot_api_at_start_runs_not_ready_then_connects(tmp_path, anthropic_server):
    api_port, health_port = _free_port(), _free_port()
    tg = FakeTelegramServer(max_poll=0.3)
    tg.port = api_port  # not started yet: nothing answers there
    env = gateway_env(
        tmp_path,
        tg,
        anthropic_server.base_url,
        [PERSON],
        CLAWGATE_HEALTH__ENABLED="true",
        CLAWGATE_HEALTH__PORT=str(health_port),
    )
    log = tmp_path / "gateway.log"
    process = await start_gateway(env, log)
    try:

        async def not_ready_yet() -> bool:
            report = await _readyz(health_port)
            return report is not None and "connecting" in report["channels"]["telegram"]["detail"]

        await _until(not_ready_yet, 60)  # the gateway runs, /readyz says why it is not ready
        report = await _readyz(health_port)
        assert report is not None and report["ready"] is False
        async with _hanging_up(api_port) as attempts:

            async def retried() -> bool:
                return attempts[0] >= 1

            await _until(retried, 60)  # it tries again with backoff, still running
        assert process.returncode is None, log.read_text()

        await tg.start()  # the network is back
        await tg.send_text(PERSON, "are you there?")
        await tg.wait_sent(1, timeout=60)

        async def ready() -> bool:
            report = await _readyz(health_port)
            return bool(report and report["ready"])

        await _until(ready, 30)
        output = log.read_text()
        assert output.count("cannot reach the Telegram Bot API") == 1, output  # said once
        assert "Traceback" not in output
    finally:
        process.terminate()
        await process.wait()
        await tg.stop()


@pytest.mark.parametrize(
    "variable,value",
    [
        ("CLAWGATE_TELEGRAM__TOKEN", "hello"),
        ("CLAWGATE_TELEGRAM__TOKEN", "Bot 123456789:AAF-test-token-0123456789abcdefghijkl"),
        ("CLAWGATE_DISCORD__TOKEN", "hello"),
    ],
)
async def test_a_token_of_the_wrong_shape_is_exit_2_in_one_line(
    tmp_path, anthropic_server, variable, value
):
    async with FakeTelegramServer() as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, [PERSON], **{variable: value})
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "run",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            pytest.fail(f"clawgate run with {variable}={value!r} kept running")
    lines = (out + err).decode().strip().splitlines()
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith("clawgate: "), lines
    assert variable in lines[0] and value not in lines[0]  # named as set; never echoed
    assert value not in lines[0] and "hello" not in lines[0]  # a token is never shown
    assert not Path(tmp_path / "workspaces" / ".gateway" / "state.db").exists()
