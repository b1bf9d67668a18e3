"""A reminder end to end in real processes: `clawgate run` against the fake Telegram server
and a scripted model. The model creates the reminder with a tool call, the gateway is killed
and started again, and the reminder arrives at its time, once."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

USER = 5150
LEAD = 25.0  # seconds from the request to the reminder: covers a start, a turn, a restart


async def test_a_reminder_made_by_a_tool_call_arrives_once_across_a_restart(
        tmp_path, anthropic_server) -> None:
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(tmp_path, tg, anthropic_server.base_url, [USER],
                      CLAWGATE_TIMEZONE="Europe/Berlin")
    log = tmp_path / "gateway.log"
    process = await start_gateway(env, log)
    try:
        due = (datetime.now(UTC) + timedelta(seconds=LEAD)).replace(microsecond=0)
        due_clock = time.monotonic() + (due - datetime.now(UTC)).total_seconds()
        anthropic_server.reply_tool_call("schedule_create", {"when": due.isoformat(),
                                                             "text": "Send the invoice"})
        anthropic_server.reply_text("I'll remind you.")
        await tg.send_text(USER, "remind me in a moment to send the invoice")
        await tg.wait_sent(1, timeout=20)
        tool_result = json.dumps(anthropic_server.requests[-1])
        assert "Scheduled reminder #1" in tool_result and "(Europe/Berlin)" in tool_result
        await asyncio.sleep(1.0)  # the answered message is marked done (else it is re-answered)
        process.kill()  # kill -9 between the promise and the reminder
        await process.wait()
        process = await start_gateway(env, log)
        await asyncio.sleep(max(0.0, due_clock - time.monotonic()) + 4.0)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 40)
        await tg.stop()
    texts = tg.texts(USER)
    assert texts == ["I'll remind you.", "Send the invoice"], log.read_text()[-3000:]
    reminder = tg.sent[-1]
    lateness = reminder.at - due_clock
    print(f"\nreminder arrived {lateness * 1000:.0f} ms after its due time")
    assert -0.05 < lateness < 1.5
