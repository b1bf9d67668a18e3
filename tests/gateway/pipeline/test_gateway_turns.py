"""End-to-end turns through the Gateway with the real SDKs against loopback fakes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from gateway.agent.providers import RetryingProvider, build_provider
from gateway.pipeline.gateway import Gateway
from gateway.workspace.seed import workspace_path
from tests.conftest import AllowAll
from tests.fakes.channel import RecordingChannel


async def test_tool_call_round_trip_writes_the_file(llm_server, make_gateway, tmp_path):
    server = llm_server
    _, channel = await make_gateway(server)
    server.reply_tool_call("write_file", {"path": "notes/todo.md", "content": "- buy milk\n"})
    server.reply_text("Noted it in notes/todo.md.")

    await channel.inject("dana", "remember to buy milk")
    await channel.wait_for(1)

    assert channel.texts() == ["Noted it in notes/todo.md."]
    written = workspace_path(tmp_path / "workspaces", "fakechat-dana") / "notes" / "todo.md"
    assert written.read_text() == "- buy milk\n"
    second = json.dumps(server.requests[1])
    assert "write_file" in second and "notes/todo.md" in second
    assert "wrote" in second  # the tool's result went back to the model


async def test_transcript_survives_a_restart(anthropic_server, make_gateway, tmp_path):
    first, channel = await make_gateway(anthropic_server)
    await channel.inject("erin", "my locker code is 4711")
    await channel.wait_for(1)
    # The turn ends after the reply (workspace commit, inbox marked done): a restart drains it.
    await first.lanes.drain()

    # A brand-new gateway over the same workspaces directory, as after a process restart.
    _, channel2 = await make_gateway(anthropic_server)
    await channel2.inject("erin", "what is my locker code?")
    await channel2.wait_for(1)

    messages = anthropic_server.requests[-1]["messages"]
    text = json.dumps(messages)
    assert "my locker code is 4711" in text and "echo: my locker code is 4711" in text
    assert messages[-1]["role"] == "user"


async def test_one_session_in_order_while_sessions_run_in_parallel(anthropic_server, make_gateway):
    seen: list[tuple[str, float]] = []

    def slow_echo(body):
        text = anthropic_server.last_user_text(body)
        seen.append((text, time.monotonic()))
        return anthropic_server.make_text(f"echo: {text}")

    anthropic_server.responder = slow_echo
    _, channel = await make_gateway(anthropic_server)
    for _ in range(3):
        anthropic_server.reply_delay(1.0)

    await channel.inject("fred", "f1")
    await channel.inject("fred", "f2")
    await channel.inject("gina", "g1")
    await channel.wait_for(3)

    assert channel.texts("fred") == ["echo: f1", "echo: f2"]
    assert channel.texts("gina") == ["echo: g1"]
    arrival = {text: at for text, at in seen}
    # gina's turn did not wait for fred's (two requests at once), but fred's second message
    # waited for his first turn to finish (never three at once, f2 a whole reply after f1).
    assert anthropic_server.most_in_flight == 2
    assert arrival["f2"] - arrival["f1"] >= 0.95


async def test_provider_failure_gives_one_clear_message_and_session_stays_usable(
    anthropic_server, make_settings
):
    settings = make_settings(
        llm={
            "provider": "anthropic",
            "base_url": anthropic_server.base_url,
            "api_key": "sk-test",
            "timeout_seconds": 5,
        }
    )
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    inner = build_provider(settings).inner  # type: ignore[attr-defined]
    provider = RetryingProvider(inner, max_attempts=3, sleep=fake_sleep)
    channel = RecordingChannel()
    gateway = Gateway.build(settings, provider, channels=[channel], access=AllowAll())
    await gateway.start()
    try:
        anthropic_server.reply_error(429, headers={"retry-after": "2"})
        for _ in range(2):
            anthropic_server.reply_error(503)
        await channel.inject("hana", "are you there?")
        await channel.wait_for(1)
        assert len(anthropic_server.requests) == 3
        assert delays[0] == pytest.approx(2.0, abs=0.01)
        [error] = channel.texts()
        assert "saved" in error and "\n" not in error and "sk-test" not in error

        await channel.inject("hana", "and now?")
        await channel.wait_for(2)
        assert channel.texts()[1].endswith("and now?")  # both waiting messages in one turn
        history = json.dumps(anthropic_server.requests[-1]["messages"])
        assert "are you there?" in history  # the unanswered message was kept
    finally:
        await gateway.stop()


async def test_tool_loop_is_bounded(anthropic_server, make_gateway):
    _, channel = await make_gateway(anthropic_server, llm={"max_tool_rounds": 3})
    anthropic_server.responder = lambda body: anthropic_server.make_tool_calls(
        [("list_files", {"path": "."}, None)]
    )
    await channel.inject("ivan", "loop forever")
    await channel.wait_for(1)
    assert len(anthropic_server.requests) == 3
    assert "stopped after 3 rounds" in channel.texts()[0]

    anthropic_server.responder = None
    await channel.inject("ivan", "hello again")
    await channel.wait_for(2)
    assert channel.texts()[1].endswith("hello again")


async def test_bad_tool_arguments_and_unknown_tools_are_errors_not_crashes(
    openai_server, make_gateway
):
    _, channel = await make_gateway(openai_server)
    openai_server.reply_tool_call("read_file", "{not json")
    openai_server.reply_tool_call("launch_rockets", {"count": 3})
    openai_server.reply_tool_call("read_file", {"path": "../../etc/passwd"})
    openai_server.reply_text("done")
    await channel.inject("jo", "try things")
    await channel.wait_for(1)
    assert channel.texts() == ["done"]
    tool_messages = [m for m in openai_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 3
    assert "invalid arguments" in tool_messages[0]["content"]
    assert "launch_rockets" in tool_messages[1]["content"]
    assert "root:" not in tool_messages[2]["content"]


async def test_empty_message_is_answered_without_the_model(anthropic_server, make_gateway):
    _, channel = await make_gateway(anthropic_server)
    await channel.inject("kim", "   ")
    await channel.wait_for(1)
    assert "empty message" in channel.texts()[0]
    assert anthropic_server.requests == []


async def test_messages_queued_during_a_turn_are_all_answered(anthropic_server, make_gateway):
    _, channel = await make_gateway(anthropic_server)
    anthropic_server.reply_delay(0.3)
    for n in range(5):
        await channel.inject("lee", f"m{n}")
    await asyncio.wait_for(channel.wait_for(5), 10)
    assert channel.texts() == [f"echo: m{n}" for n in range(5)]


async def test_a_refused_request_names_status_endpoint_and_model(openai_server, make_gateway):
    _, channel = await make_gateway(openai_server, llm={"model": "no-such-model"})
    openai_server.reply_error(
        404, {"error": {"message": "model 'no-such-model' not found", "type": "not_found_error"}}
    )
    await channel.inject("dana", "hello")
    (reply,) = [m.text for m in await channel.wait_for(1)]
    host = openai_server.base_url.split("//")[1].split("/")[0]
    assert "HTTP 404" in reply and host in reply and "no-such-model" in reply
    assert "clawgate doctor" in reply and "saved" in reply and "\n" not in reply


async def test_a_stop_counts_the_turns_it_leaves_for_the_next_start(
    anthropic_server, make_gateway, caplog
):
    """Before: SIGTERM said "0 turn(s) still running" while one was (the count came after the
    timeout had cancelled them)."""
    gateway, channel = await make_gateway(anthropic_server)
    anthropic_server.reply_delay(30.0)
    await channel.inject("fay", "take your time")
    async with asyncio.timeout(10):
        while not anthropic_server.requests:  # the turn is with the model
            await asyncio.sleep(0.02)
    with caplog.at_level("WARNING", logger="gateway.pipeline.gateway"):
        await gateway.stop(drain_timeout=0.2)
    assert "stopping with 1 turn(s) still running" in caplog.text
    assert channel.texts() == []  # left for the next start, not answered half-way
