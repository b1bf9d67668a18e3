"""Streamed answers through the real SDKs against the fakes' server-sent events: the text
comes in pieces, the completion and its usage are the same as without streaming, and a
stream that breaks off is retried or handed to the fallback with the preview restarted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.agent.conversation import Message, SystemPrompt, ToolSpec
from gateway.agent.providers.anthropic_provider import AnthropicProvider
from gateway.agent.providers.base import ProviderError
from gateway.agent.providers.openai_provider import OpenAIProvider
from gateway.agent.providers.retry import RetryingProvider
from gateway.agent.providers.routing import FallbackChain
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer, FakeOpenAIServer

SYSTEM = SystemPrompt(stable="You are Claw.", volatile="", now="Monday 10:00")
ASK = [Message("user", "Tell me about Oslo")]
WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)
ANSWER = "Oslo is the capital of Norway, on the Oslofjord, with about 700,000 people."


class Recorder:
    """A TextStream that keeps what a preview would show, and every event."""

    def __init__(self) -> None:
        self.text = ""
        self.events: list[str] = []

    def delta(self, text: str) -> None:
        self.text += text
        self.events.append(text)

    def restart(self) -> None:
        self.text = ""
        self.events.append("<restart>")


@pytest.fixture(params=["anthropic", "openai"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLMServer]:
    cls = FakeAnthropicServer if request.param == "anthropic" else FakeOpenAIServer
    async with cls() as fake:
        yield fake


def provider_for(
    server: FakeLLMServer, model: str = "fake-model"
) -> AnthropicProvider | OpenAIProvider:
    cls = AnthropicProvider if isinstance(server, FakeAnthropicServer) else OpenAIProvider
    return cls(model=model, api_key="test-key", base_url=server.base_url, timeout_seconds=5.0)


async def test_text_arrives_in_pieces_and_the_completion_is_the_same(server: FakeLLMServer) -> None:
    provider = provider_for(server)
    server.reply_text(ANSWER, input_tokens=120, output_tokens=17, cache_read_tokens=40)
    server.reply_text(ANSWER, input_tokens=120, output_tokens=17, cache_read_tokens=40)
    try:
        whole = await provider.complete(SYSTEM, ASK, [WEATHER])
        seen = Recorder()
        streamed = await provider.complete(SYSTEM, ASK, [WEATHER], stream=seen)
    finally:
        await provider.close()
    assert server.streamed == 1
    assert server.requests[1]["stream"] is True
    assert seen.text == ANSWER and len(seen.events) == -(-len(ANSWER) // 8)
    assert streamed.text == whole.text == ANSWER
    assert streamed.usage == whole.usage
    assert streamed.stop_reason == whole.stop_reason
    if isinstance(server, FakeOpenAIServer):
        assert server.requests[1]["stream_options"] == {"include_usage": True}


async def test_usage_of_a_streamed_answer_is_what_the_server_reported(
    server: FakeLLMServer,
) -> None:
    provider = provider_for(server)
    server.reply_text(ANSWER)  # usage computed from the request, as the real API does
    try:
        streamed = await provider.complete(SYSTEM, ASK, [], stream=Recorder())
    finally:
        await provider.close()
    totals = server.reported_totals()
    usage = streamed.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ) == (totals["input"], totals["output"], totals["cache_read"], totals["cache_write"])
    assert usage.input_tokens > 0 and usage.output_tokens > 0


async def test_tool_calls_are_assembled_from_their_fragments(server: FakeLLMServer) -> None:
    provider = provider_for(server)
    server.reply_tool_calls(
        [
            ("get_weather", {"city": "Oslo", "detail": "x" * 40}, "call_1"),
            ("get_weather", {"city": "Bergen"}, "call_2"),
        ],
        text="Let me check.",
    )
    seen = Recorder()
    try:
        completion = await provider.complete(SYSTEM, ASK, [WEATHER], stream=seen)
    finally:
        await provider.close()
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call_1", "get_weather", {"city": "Oslo", "detail": "x" * 40}),
        ("call_2", "get_weather", {"city": "Bergen"}),
    ]
    assert completion.text == seen.text == "Let me check."


async def test_a_stream_that_breaks_off_is_an_overload_and_is_retried_from_scratch(
    server: FakeLLMServer,
) -> None:
    server.reply_text(ANSWER, input_tokens=5, break_after=3)
    server.reply_text("Second try.", input_tokens=5)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    provider = RetryingProvider(provider_for(server), max_attempts=2, sleep=sleep)
    seen = Recorder()
    try:
        completion = await provider.complete(SYSTEM, ASK, [], stream=seen)
    finally:
        await provider.close()
    assert completion.text == "Second try."
    assert seen.text == "Second try."
    cut = seen.events.index("<restart>")
    assert "".join(seen.events[:cut]) == ANSWER[:24]  # three pieces, then the break
    assert len(sleeps) == 1


async def test_a_fallback_after_partial_output_restarts_the_preview() -> None:
    async with FakeAnthropicServer() as primary, FakeOpenAIServer() as backup:
        primary.reply_text(ANSWER, input_tokens=5, break_after=2)
        backup.reply_text("From the backup.", input_tokens=5)
        chain = FallbackChain(
            [provider_for(primary, "claude-main"), provider_for(backup, "gpt-backup")]
        )
        seen = Recorder()
        try:
            completion = await chain.complete(SYSTEM, ASK, [], stream=seen)
        finally:
            await chain.close()
    assert completion.model == "gpt-backup"
    assert seen.events[:2] == [ANSWER[:8], ANSWER[8:16]]
    assert seen.events[2] == "<restart>"
    assert seen.text == "From the backup."


async def test_an_http_error_before_the_stream_is_the_same_error(server: FakeLLMServer) -> None:
    provider = provider_for(server)
    server.reply_error(401)
    seen = Recorder()
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(SYSTEM, ASK, [], stream=seen)
    finally:
        await provider.close()
    assert caught.value.kind == "auth"
    assert seen.events == []
