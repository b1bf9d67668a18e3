"""Fixtures of the channel tests that take media: the loopback Bot API, a loopback speech
endpoint, and a gateway on both (`media_gateway`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.agent.providers import build_provider
from gateway.assembly.platforms import build_gateway
from gateway.pipeline.gateway import Gateway
from retrypolicy import Backoff
from tests.conftest import llm_overrides
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.speech import FakeSpeechServer
from tests.fakes.transcription_server import FakeTranscriptionServer

FAST = {"backoff": Backoff(0.05, 0.2), "stall_grace": 0.5}


@pytest.fixture
async def stt() -> AsyncIterator[FakeTranscriptionServer]:
    async with FakeTranscriptionServer() as server:
        yield server


@pytest.fixture
async def tts() -> AsyncIterator[FakeSpeechServer]:
    """A loopback OpenAI-compatible /audio/speech (babble, fast)."""
    async with FakeSpeechServer() as server:
        yield server


@pytest.fixture
async def media_gateway(
    make_settings, anthropic_server, tg, stt
) -> AsyncIterator[Callable[..., Any]]:
    running: list[Gateway] = []

    async def make(
        llm_server: FakeLLMServer | None = None,
        *,
        llm: dict[str, Any] | None = None,
        media: dict[str, Any] | None = None,
        tools: dict[str, Any] | None = None,
        settings: dict[str, Any] | None = None,
        **telegram: Any,
    ) -> Gateway:
        """A gateway on the fake Telegram; `settings`: other top-level settings."""
        section = {
            "token": tg.token,
            "base_url": tg.base_url,
            "poll_timeout_seconds": 1,
            "allow_from": ["42"],
            **telegram,
        }
        transcription = {"backend": "openai", "base_url": stt.base_url, "api_key": stt.key}
        # Spoken replies only where a test asks for them (tests/channels/test_voice_replies.py).
        media_section = {
            "transcription": transcription,
            "speech": {"backend": "none"},
            **(media or {}),
        }
        built = make_settings(
            **llm_overrides(llm_server or anthropic_server, **(llm or {})),
            telegram=section,
            media=media_section,
            tools=tools or {},
            **(settings or {}),
        )
        gateway = build_gateway(built, build_provider(built), options={"telegram": FAST})
        await gateway.start()
        running.append(gateway)
        return gateway

    yield make
    for gateway in running:
        await gateway.stop(drain_timeout=5)
