"""A reminder end to end in real processes: `clawgate run` against the fake Telegram server
and a scripted model. The model creates the reminder with a tool call, the gateway is killed
and started again, and the reminder arrives at its time, once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.stores.state import StateDB, state_path
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway
from tests.settle import settled

USER = 5150
# Seconds from the request to the reminder once the gateway polls: a turn, a kill -9 and a
# restart fit in it on a quiet machine; on a loaded one the reminder comes at the restart,
# still once (its punctuality is bench/scheduler_heap.py's subject, not this test's).
LEAD = 15.0


async def _until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def _settle(state_db: Path) -> None:
    """Until the running gateway has nothing pending: the answered message is marked done
    (else the restart answers it again) or the reminder's delivery recorded."""
    async with StateDB(state_db) as state:
        await settled(state, timeout=60)


async def test_a_reminder_made_by_a_tool_call_arrives_once_across_a_restart(
    tmp_path, anthropic_server
) -> None:
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(
        tmp_path, tg, anthropic_server.base_url, [USER], CLAWGATE_TIMEZONE="Europe/Berlin"
    )
    log = tmp_path / "gateway.log"
    state_db = state_path(tmp_path / "workspaces")
    process = await start_gateway(env, log)
    try:
        await _until(lambda: bool(tg.offsets_seen))  # it polls: started
        due = (datetime.now(UTC) + timedelta(seconds=LEAD)).replace(microsecond=0)
        due_clock = time.monotonic() + (due - datetime.now(UTC)).total_seconds()
        anthropic_server.reply_tool_call(
            "schedule_create", {"when": due.isoformat(), "text": "Send the invoice"}
        )
        anthropic_server.reply_text("I'll remind you.")
        await tg.send_text(USER, "remind me in a moment to send the invoice")
        await tg.wait_sent(1, timeout=60)
        tool_result = json.dumps(anthropic_server.requests[-1])
        assert "Scheduled reminder #1" in tool_result and "(Europe/Berlin)" in tool_result
        await _settle(state_db)
        process.kill()  # kill -9 between the promise and the reminder
        await process.wait()
        process = await start_gateway(env, log)
        await tg.wait_sent(2, timeout=max(0.0, due_clock - time.monotonic()) + 60)
        await _settle(state_db)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 40)
        await tg.stop()
    texts = tg.texts(USER)
    assert texts == ["I'll remind you.", "Send the invoice"], log.read_text()[-3000:]
    lateness = tg.sent[-1].at - due_clock
    print(f"\nreminder arrived {lateness * 1000:.0f} ms after its due time")
    assert lateness > -0.05  # never before its time (a loaded machine only makes it later)
