"""Budgets and fallback through `clawgate run` as a real process (fake Telegram, fake models).

- A person with a daily token cap gets answered until the cap, then politely refused without a
  model call; the owner gets the note; the usage table on disk equals what the model reported.
- The primary model is overloaded on every call: each turn is answered by the fallback model
  (another server), at once.
"""

from __future__ import annotations

import sqlite3

from tests.fakes.llm_server import FakeAnthropicServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, start_gateway

USER, BOSS = 4242, 7070


async def _stop(process, tg) -> None:  # type: ignore[no-untyped-def]
    process.terminate()
    await process.wait()
    await tg.stop()


async def test_a_daily_cap_through_clawgate_run(tmp_path, anthropic_server) -> None:
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    env = gateway_env(
        tmp_path,
        tg,
        anthropic_server.base_url,
        [USER, BOSS],
        CLAWGATE_OWNER=f"telegram-{BOSS}",
        CLAWGATE_BUDGET__DAILY_TOKENS="1000",
    )
    log = tmp_path / "gateway.log"
    process = await start_gateway(env, log)
    try:
        await tg.send_text(BOSS, "hello, I run this")
        await tg.wait_sent(1, timeout=30)
        await tg.send_text(USER, "first question")
        await tg.wait_sent(3, timeout=30)  # the answer and the owner's note
        calls = len(anthropic_server.requests)
        await tg.send_text(USER, "second question")
        await tg.wait_sent(4, timeout=30)
    finally:
        await _stop(process, tg)
    assert tg.texts(USER)[0] == "echo: first question", log.read_text()[-3000:]
    assert "usage limit" in tg.texts(USER)[1]
    assert len(anthropic_server.requests) == calls  # the refusal called no model
    assert any("reached the daily cap" in text for text in tg.texts(BOSS))
    with sqlite3.connect(tmp_path / "workspaces" / ".gateway" / "state.db") as db:
        row = db.execute(
            "SELECT sum(input), sum(output), sum(cache_read), sum(cache_write) FROM usage_daily"
        ).fetchone()
        people = {r[0] for r in db.execute("SELECT person FROM usage_daily")}
    reported = anthropic_server.reported_totals()
    assert row == (
        reported["input"],
        reported["output"],
        reported["cache_read"],
        reported["cache_write"],
    )
    assert people == {f"telegram-{USER}", f"telegram-{BOSS}"}


async def test_fallback_through_clawgate_run(tmp_path, anthropic_server) -> None:
    anthropic_server.responder = lambda body: Reply(
        status=529, body=anthropic_server.error_body(529, "Overloaded")
    )
    tg = FakeTelegramServer(max_poll=0.3)
    await tg.start()
    async with FakeAnthropicServer() as backup:
        env = gateway_env(
            tmp_path,
            tg,
            anthropic_server.base_url,
            [USER],
            CLAWGATE_LLM__MODEL="claude-primary",
            CLAWGATE_LLM__FALLBACKS="backup:claude-backup",
            CLAWGATE_LLM__ENDPOINTS__BACKUP__PROVIDER="anthropic",
            CLAWGATE_LLM__ENDPOINTS__BACKUP__BASE_URL=backup.base_url,
        )
        log = tmp_path / "gateway.log"
        process = await start_gateway(env, log)
        try:
            for n, text in enumerate(("are you there?", "still there?"), start=1):
                await tg.send_text(USER, text)
                await tg.wait_sent(n, timeout=30)
        finally:
            await _stop(process, tg)
        assert tg.texts(USER) == ["echo: are you there?", "echo: still there?"], log.read_text()[
            -3000:
        ]
        assert [r["model"] for r in backup.requests] == ["claude-backup"] * 2
        assert len(anthropic_server.requests) == 2  # one try each: no retry before the handover
        assert "model claude-primary failed (overloaded); trying claude-backup" in log.read_text()
