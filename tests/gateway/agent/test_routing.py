"""Model routing through the real SDKs against loopback fakes: a fallback chain on overload,
5xx and timeouts (never on a refused key), the background model, per-person models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.agent.providers import ModelRouter, RetryingProvider, build_provider
from gateway.pipeline.gateway import Gateway
from tests.conftest import TEST_KEY, AllowAll
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeAnthropicServer, FakeOpenAIServer


@pytest.fixture
async def backup() -> AsyncIterator[FakeOpenAIServer]:
    """The fallback: another provider (OpenAI-compatible) on another server."""
    async with FakeOpenAIServer() as server:
        yield server


async def _gateway(
    make_settings: Any,
    primary: FakeAnthropicServer,
    backup: FakeOpenAIServer,
    *,
    attempts: int = 3,
    **llm: Any,
) -> tuple[Gateway, RecordingChannel, list[float]]:
    settings = make_settings(
        llm={
            "provider": "anthropic",
            "base_url": primary.base_url,
            "api_key": TEST_KEY,
            "model": "claude-main",
            "timeout_seconds": 1.0,
            "max_attempts": attempts,
            "fallbacks": ["backup:gpt-backup"],
            "endpoints": {
                "backup": {
                    "provider": "openai",
                    "base_url": backup.base_url,
                    "api_key": "sk-backup",
                }
            },
            **llm,
        }
    )
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    inner = build_provider(settings).inner  # type: ignore[attr-defined]
    provider = RetryingProvider(inner, max_attempts=attempts, sleep=sleep)
    channel = RecordingChannel()
    gateway = Gateway.build(settings, provider, channels=[channel], access=AllowAll())
    await gateway.start()
    return gateway, channel, sleeps


@pytest.mark.parametrize("failure", ["529 overloaded", "500", "503", "timeout", "HTML 502"])
async def test_a_failing_primary_hands_over_to_the_fallback_at_once(
    make_settings, anthropic_server, backup, failure
):
    gateway, channel, sleeps = await _gateway(make_settings, anthropic_server, backup)
    try:
        if failure == "timeout":
            anthropic_server.reply_delay(3.0)
        elif failure.startswith("HTML"):
            anthropic_server.reply_raw(502, "<html>bad gateway</html>", "text/html")
        else:
            anthropic_server.reply_error(int(failure.split()[0]))
        await channel.inject("ann", "hello")
        [reply] = await channel.wait_for(1)
        assert reply.text == "echo: hello"  # the backup's answer
        assert len(anthropic_server.requests) == 1 and len(backup.requests) == 1
        assert sleeps == []  # handed over within the same attempt: no backoff, no retry
        assert backup.requests[0]["model"] == "gpt-backup"
        kind = {"529 overloaded": "overloaded", "timeout": "timeout"}.get(failure, "server")
        assert gateway.metrics.fallbacks.value(model="claude-main", kind=kind) == 1
        by_model = await gateway.parts.usage.grouped(
            "model", "fakechat-ann", gateway.parts.usage.periods().today
        )
        assert list(by_model) == ["gpt-backup"]  # the answering model is billed
    finally:
        await gateway.stop()


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_never_falls_back(make_settings, anthropic_server, backup, status):
    gateway, channel, sleeps = await _gateway(make_settings, anthropic_server, backup)
    try:
        anthropic_server.reply_error(status)
        await channel.inject("ann", "hello")
        [reply] = await channel.wait_for(1)
        assert "API key" in reply.text
        assert backup.requests == [] and sleeps == []
    finally:
        await gateway.stop()


async def test_a_rate_limit_waits_for_the_primary_instead(make_settings, anthropic_server, backup):
    gateway, channel, sleeps = await _gateway(make_settings, anthropic_server, backup)
    try:
        anthropic_server.reply_error(429, headers={"retry-after": "2"})
        await channel.inject("ann", "hello")
        [reply] = await channel.wait_for(1)
        assert reply.text == "echo: hello"
        assert len(anthropic_server.requests) == 2 and backup.requests == []
        assert sleeps == [pytest.approx(2.0, abs=0.01)]
    finally:
        await gateway.stop()


async def test_when_the_whole_chain_fails_the_retry_policy_starts_it_again(
    make_settings, anthropic_server, backup
):
    gateway, channel, sleeps = await _gateway(make_settings, anthropic_server, backup)
    try:
        anthropic_server.reply_error(529)
        backup.reply_error(503)
        await channel.inject("ann", "hello")
        [reply] = await channel.wait_for(1)
        assert reply.text == "echo: hello"  # the primary's answer, on the second round
        assert len(anthropic_server.requests) == 2 and len(backup.requests) == 1
        assert len(sleeps) == 1
    finally:
        await gateway.stop()


async def test_a_broken_fallback_reports_why_the_primary_was_left(
    make_settings, anthropic_server, backup
):
    gateway, channel, _ = await _gateway(make_settings, anthropic_server, backup, attempts=1)
    try:
        anthropic_server.reply_error(529)
        backup.reply_error(401)
        await channel.inject("ann", "hello")
        [reply] = await channel.wait_for(1)
        assert "overloaded" in reply.text and "sk-backup" not in reply.text
        assert "sk-backup" not in gateway.redactor("key sk-backup")  # an endpoint's key
    finally:
        await gateway.stop()


async def test_background_model_for_flush_and_compaction_and_own_model_per_person(
    make_settings, anthropic_server
):
    settings = make_settings(
        llm={
            "provider": "anthropic",
            "base_url": anthropic_server.base_url,
            "api_key": TEST_KEY,
            "model": "claude-main",
            "max_attempts": 1,
            "background_model": "claude-cheap",
            "workspaces": {"fakechat-bea": {"model": "claude-own"}},
        },
        compaction={"keep_recent_tokens": 1_000},
    )
    channel = RecordingChannel()
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=AllowAll()
    )
    await gateway.start()
    try:
        assert isinstance(gateway.models, ModelRouter)
        for n in range(3):
            await channel.inject("ann", f"story part {n}: " + "words " * 900)
        await channel.wait_for(3)
        models = [r["model"] for r in anthropic_server.requests]
        assert models == ["claude-main"] * 3
        await channel.inject("ann", "/compact")
        await channel.wait_for(4)
        assert "Compacted" in channel.texts()[-1]
        flush, summary = anthropic_server.requests[-2:]
        assert "Silent memory flush" in json.dumps(flush["messages"])
        # The memory flush and the summarizer: the background model.
        assert flush["model"] == summary["model"] == "claude-cheap"
        await channel.inject("bea", "hi")
        await channel.wait_for(5)
        assert anthropic_server.requests[-1]["model"] == "claude-own"
        today = gateway.parts.usage.periods().today
        kinds = await gateway.parts.usage.grouped("kind", "fakechat-ann", today)
        assert set(kinds) == {"conversation", "flush", "compaction"}
        by_model = await gateway.parts.usage.grouped("model", None, today)
        assert set(by_model) == {"claude-main", "claude-cheap", "claude-own"}
        assert "claude-own" in anthropic_server.requests[-1]["system"][-1]["text"]  # run info
    finally:
        await gateway.stop()
