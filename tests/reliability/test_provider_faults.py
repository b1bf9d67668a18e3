"""Provider fault matrix: every failure ends in a reply or one clear line, and the session
stays usable for the next message. Both providers, real SDKs, loopback fakes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gateway.agent.loop import EMPTY_ANSWER
from gateway.agent.providers import RetryingProvider, build_provider
from gateway.pipeline.gateway import Gateway
from tests.conftest import TEST_KEY, AllowAll, llm_overrides
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeAnthropicServer, FakeLLMServer


def _anthropic_body_cut() -> str:
    return '{"id": "msg_1", "type": "message", "role": "assistant", "content": [{"ty'


def _openai_body_cut() -> str:
    return '{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"ind'


Script = Callable[[FakeLLMServer], None]

FAULTS: dict[str, tuple[Script, str]] = {
    # name: (script the fake, what the person must see: a substring of the first reply)
    "429 with retry-after, then fine": (
        lambda s: (s.reply_error(429, headers={"retry-after": "1"}), s.reply_text("fine")),
        "fine",
    ),
    "429 without retry-after, always": (
        lambda s: [s.reply_error(429) for _ in range(3)],
        "rate-limiting",
    ),
    "500 then fine": (lambda s: (s.reply_error(500), s.reply_text("fine")), "fine"),
    "503 always": (lambda s: [s.reply_error(503) for _ in range(3)], "server error"),
    "malformed JSON": (
        lambda s: [s.reply_raw(200, "{not json") for _ in range(3)],
        "could not read",
    ),
    "truncated body": (
        lambda s: [
            s.reply_raw(
                200,
                _anthropic_body_cut() if isinstance(s, FakeAnthropicServer) else _openai_body_cut(),
            )
            for _ in range(3)
        ],
        "could not read",
    ),
    "HTML error page": (
        lambda s: [s.reply_raw(502, "<html>bad gateway</html>", "text/html") for _ in range(3)],
        "server error",
    ),
    "timeout": (lambda s: [s.reply_delay(3.0) for _ in range(3)], "did not answer in time"),
    "invalid tool arguments": (
        lambda s: (s.reply_tool_call("read_file", "{oops"), s.reply_text("recovered")),
        "recovered",
    ),
    "unknown tool": (
        lambda s: (s.reply_tool_call("format_disk", {}), s.reply_text("recovered")),
        "recovered",
    ),
    "empty final answer": (lambda s: s.reply_text(""), EMPTY_ANSWER),
    "auth failure": (lambda s: s.reply_error(401), "API key"),
}


async def _gateway(
    server: FakeLLMServer, make_settings: Any, *, timeout: float = 1.0, base_url: str | None = None
) -> tuple[Gateway, RecordingChannel]:
    overrides = llm_overrides(server, timeout_seconds=timeout)
    if base_url:
        overrides["llm"]["base_url"] = base_url
    settings = make_settings(**overrides)

    async def no_sleep(seconds: float) -> None:
        return None

    inner = build_provider(settings).inner  # type: ignore[attr-defined]
    provider = RetryingProvider(inner, max_attempts=3, sleep=no_sleep)
    channel = RecordingChannel()
    gateway = Gateway.build(settings, provider, channels=[channel], access=AllowAll())
    await gateway.start()
    return gateway, channel


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_fault_gives_one_clear_answer_and_the_session_recovers(
    fault, llm_server, make_settings
):
    script, expected = FAULTS[fault]
    gateway, channel = await _gateway(llm_server, make_settings)
    try:
        script(llm_server)
        await channel.inject("pat", "hello?")
        [first] = await channel.wait_for(1, timeout=20)
        assert expected in first.text
        assert TEST_KEY not in first.text and "Traceback" not in first.text

        await channel.inject("pat", "still there?")
        sent = await channel.wait_for(2, timeout=20)
        assert len(sent) == 2
        assert sent[1].text.endswith("still there?")
    finally:
        await gateway.stop()


async def test_connection_refused(llm_server, make_settings):
    gateway, channel = await _gateway(llm_server, make_settings, base_url=_closed_port_url())
    try:
        await channel.inject("pat", "anyone?")
        [reply] = await channel.wait_for(1, timeout=20)
        assert "could not be reached" in reply.text
    finally:
        await gateway.stop()


async def test_tools_forever_stops_clearly(llm_server, make_settings):
    gateway, channel = await _gateway(llm_server, make_settings)
    try:
        llm_server.responder = lambda body: llm_server.make_tool_calls([("list_files", {}, None)])
        await channel.inject("pat", "loop")
        [reply] = await channel.wait_for(1, timeout=30)
        assert "stopped after 20 rounds" in reply.text
        llm_server.responder = None
        await channel.inject("pat", "done?")
        sent = await channel.wait_for(2, timeout=20)
        assert sent[1].text.endswith("done?")
        rounds = [r for r in llm_server.requests if "loop" in json.dumps(r)]
        assert len(rounds) >= 20
    finally:
        await gateway.stop()


def _closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
