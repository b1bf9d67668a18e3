"""Prompt caching that pays: breakpoints on Anthropic, a byte-stable prefix on OpenAI, and a
fake server that computes cache usage from the request the way the real APIs do."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.agent.conversation import Message, SystemPrompt
from gateway.agent.providers.anthropic_provider import AnthropicProvider
from gateway.clock import FixedClock

NOW = datetime(2026, 11, 5, 9, 0, tzinfo=UTC)
LONG = "The workspace rules, long enough to be worth caching. " * 120  # ~1,650 tokens


def _breakpoints(request: dict[str, Any]) -> list[str]:
    where = [f"tool:{t['name']}" for t in request.get("tools", []) if "cache_control" in t]
    where += ["system" for b in request.get("system", []) if "cache_control" in b]
    for index, message in enumerate(request["messages"]):
        where += [f"message:{index}" for b in message["content"] if "cache_control" in b]
    return where


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without breakpoints and without the time note: what the history is."""
    out = []
    for message in messages:
        content = [
            {k: v for k, v in block.items() if k != "cache_control"}
            for block in message["content"]
            if not str(block.get("text", "")).startswith("[Current time:")
        ]
        if content:
            out.append({**message, "content": content})
    return out


async def test_anthropic_requests_cache_tools_system_and_history(anthropic_server, make_gateway):
    clock = FixedClock(NOW)
    _, channel = await make_gateway(anthropic_server, clock=clock)
    for turn in range(1, 7):
        if turn == 3:
            anthropic_server.reply_tool_call("read_file", {"path": "SOUL.md"})
        await channel.inject("dan", f"message number {turn} " + "about plans " * 30)
        await channel.wait_for(turn)
        clock.advance(timedelta(minutes=3))
    requests = anthropic_server.requests
    for request in requests:
        marks = _breakpoints(request)
        assert len(marks) == 3 and marks[0].startswith("tool:") and marks[1] == "system"
        assert marks[2] == f"message:{len(request['messages']) - 1}"  # the newest message
        note = request["messages"][-1]["content"][-1]
        assert note["text"].startswith("[Current time: 2026-11-05") and "cache_control" not in note
    # Each request's history is the previous one's plus what was said since.
    for before, after in itertools.pairwise(requests):
        old, new = _plain(before["messages"]), _plain(after["messages"])
        assert new[: len(old) - 1] == old[:-1]
        assert before["system"] == after["system"] and before["tools"] == after["tools"]
    # And so every request after the first reads nearly all of its prompt from the cache.
    for usage in anthropic_server.reported[1:]:
        prompt = (
            usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"]
        )
        assert usage["cache_read_input_tokens"] / prompt > 0.8


async def test_openai_prefix_is_byte_identical_from_turn_to_turn(openai_server, make_gateway):
    clock = FixedClock(NOW)
    _, channel = await make_gateway(openai_server, clock=clock)
    for turn in range(1, 5):
        await channel.inject("dan", f"message number {turn} " + "about plans " * 30)
        await channel.wait_for(turn)
        clock.advance(timedelta(minutes=3))
    serialized = [json.dumps([r["tools"], r["messages"][:-1]]) for r in openai_server.requests]
    for before, after in zip(openai_server.requests, openai_server.requests[1:], strict=False):
        # Everything but the newest message (which carries the time note) is resent as is.
        assert after["tools"] == before["tools"]
        assert after["messages"][: len(before["messages"]) - 1] == before["messages"][:-1]
        assert "Current time" not in json.dumps(after["messages"][:-1])
    assert len(set(s[:2000] for s in serialized)) == 1
    cached = [u["prompt_tokens_details"]["cached_tokens"] for u in openai_server.reported]
    assert cached[0] == 0 and all(c > 1024 for c in cached[1:])


async def test_the_stable_prefix_is_written_once_and_read_by_later_turns_and_counted(
    anthropic_server,
):
    """The provider's breakpoint sits after the stable part, so a turn whose run info differs
    still reads it, and the cache's reads and writes reach `Usage` as the API counts them."""
    provider = AnthropicProvider(model="claude-x", api_key="k", base_url=anthropic_server.base_url)
    try:
        first = [Message("user", "hi")]
        one = await provider.complete(SystemPrompt(stable=LONG, volatile="In a DM."), first, [])
        two = await provider.complete(
            SystemPrompt(stable=LONG, volatile="In the group."),
            [*first, Message("assistant", "hello"), Message("user", "again")],
            [],
        )
    finally:
        await provider.close()
    assert one.usage.cache_read_tokens == 0 and one.usage.cache_write_tokens > 1024
    # the stable part is read although the run info after it changed (which is written anew)
    assert 1024 < two.usage.cache_read_tokens < one.usage.cache_write_tokens
    assert two.usage.cache_write_tokens > 0
    assert [
        (u["cache_read_input_tokens"], u["cache_creation_input_tokens"])
        for u in anthropic_server.reported
    ] == [
        (one.usage.cache_read_tokens, one.usage.cache_write_tokens),
        (two.usage.cache_read_tokens, two.usage.cache_write_tokens),
    ]


async def test_a_changed_workspace_file_rebuilds_the_cache_once(
    anthropic_server, make_gateway, tmp_path
):
    _gateway, channel = await make_gateway(anthropic_server, owner="fakechat-eve")
    await channel.inject("eve", "one " * 50)
    await channel.wait_for(1)
    (tmp_path / "workspaces" / "fakechat-eve" / "USER.md").write_text("Eve likes tea.\n")
    for turn in (2, 3):
        await channel.inject("eve", f"turn {turn} " * 50)
        await channel.wait_for(turn)
    _, changed, after = anthropic_server.reported
    # The changed turn writes the system prompt and the history again (the tools before them
    # are still read); the next one writes only what was said since.
    assert changed["cache_creation_input_tokens"] > 2 * after["cache_creation_input_tokens"]
    assert after["cache_read_input_tokens"] > 0.8 * (
        after["cache_read_input_tokens"]
        + after["cache_creation_input_tokens"]
        + after["input_tokens"]
    )
