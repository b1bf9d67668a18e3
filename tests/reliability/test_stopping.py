"""Stopping `clawgate run` as a person or Docker does: Ctrl-C, SIGTERM, a busy port.

Real processes against the loopback fakes; the model's reply is held for 30 s so every stop
below happens in the middle of a turn, and a stop that waited for the turn would come after
the model answered (`answered`): that, not a stopwatch, shows a stop did not wait.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from pathlib import Path

from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

PERSON = 5150
SLOW = 30.0


async def _wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _mid_turn(tmp_path: Path, tg: FakeTelegramServer, llm, **extra: str):  # type: ignore[no-untyped-def]
    """A gateway whose model call for "slow question" is in flight."""
    env = gateway_env(tmp_path, tg, llm.base_url, [PERSON], **extra)
    log = tmp_path / "gateway.log"
    llm.reply_delay(SLOW)
    process = await start_gateway(env, log)
    await tg.send_text(PERSON, "slow question")
    await _wait_for(lambda: len(llm.requests) >= 1)
    return process, env, log


async def _stopped_by(process: asyncio.subprocess.Process, sig: int) -> int:
    process.send_signal(sig)
    return await asyncio.wait_for(process.wait(), SLOW)


async def _answered_after_restart(env, log: Path, tg: FakeTelegramServer) -> None:  # type: ignore[no-untyped-def]
    process = await start_gateway(env, log)
    try:
        await _wait_for(lambda: any("slow question" in t for t in tg.texts(PERSON)))
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), SLOW)


async def test_one_ctrl_c_stops_at_once_and_the_message_is_answered_after_restart(
    tmp_path, anthropic_server
):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        process, env, log = await _mid_turn(tmp_path, tg, anthropic_server)
        code = await _stopped_by(process, signal.SIGINT)
        output = log.read_text()
        assert code == 130, output
        assert anthropic_server.answered == 0, f"Ctrl-C waited for the turn\n{output}"
        assert "Traceback" not in output and "stopping (SIGINT)" in output
        await _answered_after_restart(env, log, tg)


async def test_sigterm_logs_gives_the_grace_then_leaves_the_turn_pending(
    tmp_path, anthropic_server
):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        process, env, log = await _mid_turn(
            tmp_path, tg, anthropic_server, CLAWGATE_STOP_GRACE_SECONDS="1"
        )
        code = await _stopped_by(process, signal.SIGTERM)
        output = log.read_text()
        assert code == 0, output
        assert anthropic_server.answered == 0, f"SIGTERM waited for the turn\n{output}"
        assert "stopping (SIGTERM)" in output
        assert "1 turn(s) still running after 1.0 s: left pending for the next start" in output
        await _answered_after_restart(env, log, tg)


async def test_a_second_signal_exits_at_once(tmp_path, anthropic_server):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        process, _, log = await _mid_turn(
            tmp_path, tg, anthropic_server, CLAWGATE_STOP_GRACE_SECONDS="25"
        )
        process.send_signal(signal.SIGTERM)
        await _wait_for(lambda: "stopping (SIGTERM)" in log.read_text())
        code = await _stopped_by(process, signal.SIGINT)
        assert code == 130, log.read_text()  # not the end of the 25 s grace (that exits 0)
        assert anthropic_server.answered == 0
        assert "left pending" not in log.read_text()


async def test_a_busy_health_port_is_one_line_and_a_quick_nonzero_exit(tmp_path, anthropic_server):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        async with FakeTelegramServer(max_poll=0.3) as tg:
            env = gateway_env(
                tmp_path,
                tg,
                anthropic_server.base_url,
                [PERSON],
                CLAWGATE_HEALTH__ENABLED="true",
                CLAWGATE_HEALTH__PORT=str(port),
            )
            log = tmp_path / "gateway.log"
            process = await start_gateway(env, log)
            code = await asyncio.wait_for(process.wait(), 30)
    output = log.read_text()
    assert code == 2, output
    assert "Traceback" not in output and "clawgate is running" not in output
    errors = [line for line in output.splitlines() if line.startswith("clawgate: ")]
    assert len(errors) == 1 and "CLAWGATE_HEALTH__PORT" in errors[0] and str(port) in errors[0]
