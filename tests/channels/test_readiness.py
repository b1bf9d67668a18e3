"""/readyz follows the Telegram channel: ready while polling works, not ready when the Bot
API is unreachable."""

from __future__ import annotations

import asyncio

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.health import readiness
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.telegram_server import FakeTelegramServer


async def _until(predicate, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_readiness_follows_the_bot_api(make_settings, anthropic_server):
    tg = FakeTelegramServer(max_poll=0.2)
    await tg.start()
    settings = make_settings(
        **llm_overrides(anthropic_server),
        telegram={"token": tg.token, "base_url": tg.base_url, "poll_timeout_seconds": 1},
    )
    gateway = build_gateway(
        settings,
        build_provider(settings),
        options={"telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}},
    )
    await gateway.start()
    channel = gateway.channels["telegram"]
    try:
        await _until(lambda: channel.ready)
        report = await readiness(gateway.parts, started=True)
        assert report["ready"] and report["channels"]["telegram"]["ready"]

        await tg.stop()
        await _until(lambda: not channel.ready)
        report = await readiness(gateway.parts, started=True)
        assert not report["ready"]
        assert "polling failed" in report["channels"]["telegram"]["detail"]
    finally:
        await gateway.stop(drain_timeout=5)


async def test_a_stop_ends_a_loop_that_lost_one_cancel():
    # What Python 3.11's wait_for does when a cancel lands as the inner call ends: the loop
    # sees the call's own outcome and goes round again. The stop still ends it.
    from channels.base import cancel_until_done

    rounds = 0

    async def loop_that_swallows_once() -> None:
        nonlocal rounds
        swallowed = False
        while True:
            rounds += 1
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed = True

    task = asyncio.create_task(loop_that_swallows_once())
    await asyncio.sleep(0.05)
    await asyncio.wait_for(cancel_until_done(task, every=0.05), 5)
    assert task.cancelled() and rounds > 1
