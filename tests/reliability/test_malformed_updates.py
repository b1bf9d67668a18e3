"""Malformed or unexpected Telegram updates: skipped without a crash, and the next good
message is still answered."""

from __future__ import annotations

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.telegram_server import FakeTelegramServer


async def test_garbage_updates_do_not_stop_the_channel(make_settings, anthropic_server):
    async with FakeTelegramServer(max_poll=0.3) as tg:
        settings = make_settings(
            **llm_overrides(anthropic_server),
            telegram={
                "token": tg.token,
                "base_url": tg.base_url,
                "poll_timeout_seconds": 1,
                "allow_from": ["42"],
            },
        )
        gateway = build_gateway(
            settings,
            build_provider(settings),
            options={"telegram": {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}},
        )
        await gateway.start()
        try:
            good = tg.message(42, "fine")
            odd_updates = [
                {"update_id": 1, "edited_message": {**good, "edit_date": 1}},
                {"update_id": 2, "callback_query": {"id": "x", "from": good["from"]}},
                {"update_id": 3, "message": {k: v for k, v in good.items() if k != "from"}},
                {"update_id": 4, "message": {**good, "text": 12345}},
                {"update_id": 5, "message": {**good, "chat": {"id": 42}}},
                {"update_id": 6, "channel_post": {**good, "chat": {"id": -1, "type": "channel"}}},
                {"update_id": 7, "message": {**good, "text": "x" * 50_000}},
                {"update_id": 8, "message": {"message_id": "nope"}},
                {"update_id": 9},
            ]
            async with tg._changed:
                tg.updates.extend(odd_updates)
                tg._changed.notify_all()
            await tg.send_text(42, "are you still alive?")
            await tg.wait_sent(1, timeout=20)
            for _ in range(50):
                if any(text.endswith("are you still alive?") for text in tg.texts(42)):
                    break
                await tg.wait_sent(len(tg.sent) + 1, timeout=20)
            assert any(text.endswith("are you still alive?") for text in tg.texts(42))
        finally:
            await gateway.stop(drain_timeout=5)
