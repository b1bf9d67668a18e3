"""Providers against loopback fakes of both APIs, driven by the real SDKs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.agent.conversation import Message, SystemPrompt, ToolCall, ToolSpec, Usage
from gateway.agent.providers.anthropic_provider import AnthropicProvider, to_anthropic_messages
from gateway.agent.providers.base import ProviderError
from gateway.agent.providers.errors import classify_status, parse_retry_after
from gateway.agent.providers.openai_provider import OpenAIProvider, parse_arguments
from gateway.agent.providers.retry import RetryingProvider
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer, FakeOpenAIServer

API_KEY = "test-key"
SYSTEM = SystemPrompt(stable="You are Claw.", volatile="Now: 2025-01-01 10:00")
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ASK = [Message(role="user", text="Weather in Oslo?")]

Provider = AnthropicProvider | OpenAIProvider


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


def make_provider(server: FakeLLMServer, *, timeout: float = 5.0) -> Provider:
    cls = AnthropicProvider if isinstance(server, FakeAnthropicServer) else OpenAIProvider
    return cls(
        model="fake-model", api_key=API_KEY, base_url=server.base_url, timeout_seconds=timeout
    )


@pytest.fixture(params=["anthropic", "openai"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLMServer]:
    cls = FakeAnthropicServer if request.param == "anthropic" else FakeOpenAIServer
    async with cls() as fake:
        yield fake


@pytest.fixture
async def provider(server: FakeLLMServer) -> AsyncIterator[Provider]:
    prov = make_provider(server)
    yield prov
    await prov.close()


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def expect_error(provider: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await provider.complete(SYSTEM, ASK, [WEATHER])
    err = info.value
    assert API_KEY not in str(err) and API_KEY not in repr(err.args)
    assert len(str(err)) <= 200
    return err


# -- round trips ---------------------------------------------------------------------------


async def tool_round_trip(provider: Provider) -> tuple[list[Message], str]:
    first = await provider.complete(SYSTEM, ASK, [WEATHER])
    assert first.tool_calls == (
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),
    )
    assert first.stop_reason in ("tool_use", "tool_calls")
    history = [
        *ASK,
        Message(role="assistant", text=first.text, tool_calls=first.tool_calls),
        Message(role="tool", text="sunny, 21C", tool_call_id="call_1", tool_name="get_weather"),
    ]
    final = await provider.complete(SYSTEM, history, [WEATHER])
    assert final.tool_calls == ()
    return history, final.text


async def test_anthropic_tool_round_trip(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.reply_tool_call("get_weather", {"city": "Oslo"}, "call_1", text="Checking.")
    anthropic_server.reply_text("It is sunny in Oslo.")
    provider = make_provider(anthropic_server)
    try:
        _, text = await tool_round_trip(provider)
    finally:
        await provider.close()
    assert text == "It is sunny in Oslo."
    first, second = anthropic_server.requests
    assert first["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER.parameters,
            "cache_control": {"type": "ephemeral"},  # the tools are a cached prefix
        }
    ]
    assert first["model"] == "fake-model" and first["max_tokens"] == 4096
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            # The newest message carries the history's cache breakpoint.
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": "sunny, 21C",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]


async def test_openai_tool_round_trip(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply_tool_call("get_weather", {"city": "Oslo"}, "call_1")
    openai_server.reply_text("It is sunny in Oslo.")
    provider = make_provider(openai_server)
    try:
        _, text = await tool_round_trip(provider)
    finally:
        await provider.close()
    assert text == "It is sunny in Oslo."
    first, second = openai_server.requests
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert first["max_tokens"] == 4096 and "max_completion_tokens" not in first
    assert second["messages"] == [
        {"role": "system", "content": SYSTEM.joined()},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    ]


async def test_default_responder_echoes_last_user_message(
    server: FakeLLMServer, provider: Provider
) -> None:
    completion = await provider.complete(SYSTEM, ASK, [])
    assert completion.text == "echo: Weather in Oslo?"
    assert "tools" not in server.requests[0]
    server.responder = lambda body: server.make_text("custom")
    assert (await provider.complete(SYSTEM, ASK, [])).text == "custom"


async def test_usage_is_parsed(server: FakeLLMServer, provider: Provider) -> None:
    server.reply_text(
        "hi", input_tokens=120, output_tokens=7, cache_read_tokens=100, cache_write_tokens=3
    )
    completion = await provider.complete(SYSTEM, ASK, [])
    if isinstance(server, FakeAnthropicServer):
        assert completion.usage == Usage(120, 7, cache_read_tokens=100, cache_write_tokens=3)
        assert completion.stop_reason == "end_turn"
    else:
        # OpenAI's prompt_tokens include cached ones; we report uncached input, like Anthropic.
        assert completion.usage == Usage(20, 7, cache_read_tokens=100)
        assert completion.stop_reason == "stop"


async def test_openai_tolerates_missing_usage_and_null_content(
    openai_server: FakeOpenAIServer,
) -> None:
    reply = openai_server.make_tool_calls([("get_weather", "", None)])
    body = dict(reply.body)
    del body["usage"]
    openai_server.reply_raw(200, json.dumps(body))
    provider = make_provider(openai_server)
    try:
        completion = await provider.complete(SYSTEM, ASK, [WEATHER])
    finally:
        await provider.close()
    assert completion.usage == Usage()
    assert completion.text == ""
    (call,) = completion.tool_calls
    assert call.arguments == {} and call.arguments_error == "" and call.id.startswith("call_")


# -- request shaping -----------------------------------------------------------------------


async def test_anthropic_system_blocks_cache_stable_part(
    anthropic_server: FakeAnthropicServer,
) -> None:
    provider = make_provider(anthropic_server)
    try:
        await provider.complete(SYSTEM, ASK, [])
        await provider.complete(SystemPrompt(stable="Only stable."), ASK, [])
    finally:
        await provider.close()
    assert anthropic_server.requests[0]["system"] == [
        {"type": "text", "text": "You are Claw.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Now: 2025-01-01 10:00"},
    ]
    assert anthropic_server.requests[1]["system"] == [
        {"type": "text", "text": "Only stable.", "cache_control": {"type": "ephemeral"}},
    ]


async def test_anthropic_merges_consecutive_tool_results(
    anthropic_server: FakeAnthropicServer,
) -> None:
    calls = (
        ToolCall(id="a", name="get_weather", arguments={"city": "Oslo"}),
        ToolCall(id="b", name="get_weather", arguments={"city": "Rome"}),
    )
    history = [
        *ASK,
        Message(role="assistant", tool_calls=calls),
        Message(role="tool", text="rain", tool_call_id="a"),
        Message(role="tool", text="boom", tool_call_id="b", is_error=True),
    ]
    provider = make_provider(anthropic_server)
    try:
        await provider.complete(SYSTEM, history, [WEATHER])
    finally:
        await provider.close()
    sent = anthropic_server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "b", "name": "get_weather", "input": {"city": "Rome"}},
    ]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "rain"},
        {
            "type": "tool_result",
            "tool_use_id": "b",
            "content": "boom",
            "is_error": True,
            "cache_control": {"type": "ephemeral"},
        },
    ]


def test_anthropic_alternation_placeholder_and_empty_text() -> None:
    turns = to_anthropic_messages(
        [
            Message(role="assistant", text="Hello again."),
            Message(role="user", text=""),
            Message(role="user", text="second"),
            Message(role="assistant", text=""),
        ]
    )
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[0]["content"][0]["text"]  # placeholder, never empty
    assert turns[2]["content"] == [
        {"type": "text", "text": "(empty message)"},
        {"type": "text", "text": "second"},
    ]
    assert turns[3]["content"] == [{"type": "text", "text": "(empty message)"}]


def test_anthropic_tool_results_come_first_in_merged_user_turn() -> None:
    turns = to_anthropic_messages(
        [
            Message(role="user", text="go"),
            Message(role="assistant", tool_calls=(ToolCall("a", "t", {}),)),
            Message(role="user", text="also, hurry"),
            Message(role="tool", text="done", tool_call_id="a"),
        ]
    )
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]


# -- tool arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [('{"city": "Oslo"', "not valid JSON"), ("[1, 2]", "JSON object"), ('"Oslo"', "JSON object")],
)
async def test_openai_bad_tool_arguments_become_arguments_error(
    openai_server: FakeOpenAIServer, raw: str, fragment: str
) -> None:
    openai_server.reply_tool_call("get_weather", raw, "call_9")
    provider = make_provider(openai_server)
    try:
        completion = await provider.complete(SYSTEM, ASK, [WEATHER])
    finally:
        await provider.close()
    (call,) = completion.tool_calls
    assert call.id == "call_9" and call.name == "get_weather"
    assert call.arguments == {}
    assert fragment in call.arguments_error


def test_parse_arguments_accepts_objects_and_empty() -> None:
    assert parse_arguments({"a": 1}) == ({"a": 1}, "")
    assert parse_arguments("") == ({}, "")
    assert parse_arguments(None) == ({}, "")
    assert parse_arguments('{"a": 1}') == ({"a": 1}, "")


async def test_openai_switches_to_max_completion_tokens_when_asked(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply_error(
        400,
        {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model."
                " Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        },
    )
    provider = make_provider(openai_server)
    try:
        assert (await provider.complete(SYSTEM, ASK, [])).text.startswith("echo:")
        await provider.complete(SYSTEM, ASK, [])
    finally:
        await provider.close()
    first, second, third = openai_server.requests
    assert "max_tokens" in first
    assert second["max_completion_tokens"] == 4096 and "max_tokens" not in second
    assert "max_tokens" not in third


# -- errors and retries --------------------------------------------------------------------


async def test_rate_limit_retry_after_then_success(
    server: FakeLLMServer, provider: Provider
) -> None:
    server.reply_error(429, headers={"retry-after": "7"})
    sleep = SleepRecorder()
    retrying = RetryingProvider(provider, sleep=sleep, rng=lambda: 0.0)
    completion = await retrying.complete(SYSTEM, ASK, [WEATHER])
    assert completion.text == "echo: Weather in Oslo?"
    assert sleep.delays == [7.0]
    assert len(server.requests) == 2
    assert retrying.name == provider.name and retrying.model == "fake-model"


async def test_retry_after_ms_header(server: FakeLLMServer, provider: Provider) -> None:
    server.reply_error(429, headers={"retry-after-ms": "2500"})
    err = await expect_error(provider)
    assert err.kind == "rate_limit" and err.retryable and err.retry_after == 2.5


async def test_server_errors_until_attempts_run_out(
    server: FakeLLMServer, provider: Provider
) -> None:
    for _ in range(3):
        server.reply_error(500)
    sleep = SleepRecorder()
    retrying = RetryingProvider(
        provider, max_attempts=3, base_delay=1.0, sleep=sleep, rng=lambda: 1.0
    )
    err = await expect_error(retrying)
    assert err.kind == "server" and err.status == 500 and err.retryable
    assert err.attempts == 3  # type: ignore[attr-defined]
    assert len(server.requests) == 3  # the SDK itself did not retry
    assert sleep.delays == [1.0, 2.0]


async def test_timeout(server: FakeLLMServer) -> None:
    server.reply_delay(2.0)
    provider = make_provider(server, timeout=0.3)
    try:
        err = await expect_error(provider)
    finally:
        await provider.close()
    assert err.kind == "timeout" and err.retryable
    assert len(server.requests) == 1


async def test_connection_refused(server: FakeLLMServer) -> None:
    base_url = server.base_url
    await server.stop()
    cls = AnthropicProvider if isinstance(server, FakeAnthropicServer) else OpenAIProvider
    provider = cls(model="m", api_key=API_KEY, base_url=base_url, timeout_seconds=2)
    try:
        err = await expect_error(provider)
    finally:
        await provider.close()
    assert err.kind == "connection" and err.retryable


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"id": "x", "content": [', "application/json"),
        ("<html>bad gateway</html>", "text/html"),
        ('{"unexpected": true}', "application/json"),
        ("[1, 2, 3]", "application/json"),
        ("", "application/json"),
    ],
)
async def test_malformed_response_is_bad_response(
    server: FakeLLMServer, provider: Provider, body: str, content_type: str
) -> None:
    server.reply_raw(200, body, content_type)
    err = await expect_error(provider)
    assert err.kind == "bad_response" and err.retryable


CONTEXT_OVERFLOWS: list[tuple[int, dict[str, Any]]] = [
    (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
    ),
    (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your"
                " messages resulted in 130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    (  # vLLM
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens. However, you"
            " requested 9000 tokens in the messages, Please reduce the length of the messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    (  # Ollama
        400,
        {"error": {"message": "prompt too long; exceeded max context length by 12 tokens"}},
    ),
    (  # llama.cpp server
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
    ),
    (413, {"error": {"message": "Input exceeds the context window of this model"}}),
]


@pytest.mark.parametrize(("status", "body"), CONTEXT_OVERFLOWS)
async def test_context_overflow(
    server: FakeLLMServer, provider: Provider, status: int, body: dict[str, Any]
) -> None:
    server.reply_error(status, body)
    err = await expect_error(RetryingProvider(provider, sleep=SleepRecorder()))
    assert err.kind == "context_overflow" and not err.retryable
    assert len(server.requests) == 1


async def test_auth_error_not_retried_and_key_not_leaked(
    server: FakeLLMServer, provider: Provider
) -> None:
    server.reply_error(401, server.error_body(401, f"Incorrect API key provided: {API_KEY}."))
    sleep = SleepRecorder()
    err = await expect_error(RetryingProvider(provider, sleep=sleep))
    assert err.kind == "auth" and not err.retryable and err.status == 401
    assert "[redacted]" in str(err)
    assert len(server.requests) == 1 and sleep.delays == []
    assert err.__cause__ is None and err.__suppress_context__


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (529, "overloaded", True),
        (503, "server", True),
        (502, "server", True),
        (504, "server", True),
        (403, "auth", False),
        (404, "bad_request", False),
        (400, "bad_request", False),
        (413, "bad_request", False),
    ],
)
async def test_status_mapping(
    server: FakeLLMServer, provider: Provider, status: int, kind: str, retryable: bool
) -> None:
    server.reply_error(status, server.error_body(status, f"nope ({API_KEY})"))
    err = await expect_error(provider)
    assert (err.kind, err.retryable, err.status) == (kind, retryable, status)


async def test_overlong_retry_after_gives_up_at_once(
    server: FakeLLMServer, provider: Provider
) -> None:
    server.reply_error(429, headers={"retry-after": "600"})
    sleep = SleepRecorder()
    err = await expect_error(RetryingProvider(provider, max_delay=30.0, sleep=sleep))
    assert err.kind == "rate_limit" and err.retry_after == 600
    assert err.attempts == 1  # type: ignore[attr-defined]
    assert sleep.delays == [] and len(server.requests) == 1


def test_quota_exhaustion_is_not_retryable() -> None:
    body = {"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}
    err = classify_status(429, body, {}, provider="openai")
    assert err.kind == "rate_limit" and not err.retryable


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    when = datetime(2030, 1, 1, tzinfo=UTC)
    header = format_datetime(when, usegmt=True)
    now = (when - timedelta(seconds=42)).timestamp()
    assert parse_retry_after({"retry-after": header}, now=now) == pytest.approx(42)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_has_bounded_jitter() -> None:
    err = ProviderError("server", "x", retryable=True)
    inner = SimpleNamespace(name="stub", model="m")
    low = RetryingProvider(inner, base_delay=1.0, max_delay=5.0, rng=lambda: 0.0)
    high = RetryingProvider(inner, base_delay=1.0, max_delay=5.0, rng=lambda: 0.999)
    assert [low.delay_for(n, err) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.5]
    assert all(high.delay_for(n, err) <= 5.0 for n in range(1, 10))


async def test_concurrent_requests_overlap(server: FakeLLMServer, provider: Provider) -> None:
    server.reply_delay(1.0, then=server.make_text("slow"))
    server.reply_delay(1.0, then=server.make_text("slow too"))
    results = await asyncio.gather(
        provider.complete(SYSTEM, ASK, []), provider.complete(SYSTEM, ASK, [])
    )
    assert sorted(r.text for r in results) == ["slow", "slow too"]
    assert server.most_in_flight == 2  # the second was sent while the first was unanswered


async def test_echo_ignores_tool_results(server: FakeLLMServer, provider: Provider) -> None:
    """Both fakes echo the person's last words, even when tool results share their turn."""
    history = [
        *ASK,
        Message(role="assistant", tool_calls=(ToolCall("a", "get_weather", {}),)),
        Message(role="tool", text="long tool output", tool_call_id="a"),
        Message(role="user", text="hello again"),
    ]
    assert (await provider.complete(SYSTEM, history, [WEATHER])).text == "echo: hello again"
    tool_only = history[:3]
    assert (await provider.complete(SYSTEM, tool_only, [WEATHER])).text == "echo: Weather in Oslo?"


async def test_openai_keyless_local_server(openai_server: FakeOpenAIServer) -> None:
    provider = OpenAIProvider(model="llama3", api_key="", base_url=openai_server.base_url)
    try:
        assert (await provider.complete(SYSTEM, ASK, [])).text == "echo: Weather in Oslo?"
    finally:
        await provider.close()
