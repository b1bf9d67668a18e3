"""Slash commands are answered by the gateway without calling the model."""

from __future__ import annotations

import json

from gateway.pipeline.commands import parse_command
from gateway.workspace.seed import workspace_path


def test_parse_command():
    assert parse_command("/help").name == "help"
    assert parse_command("/status@clawbot").name == "status"
    assert parse_command("/new  focus on work").args == "focus on work"
    assert parse_command("/etc/passwd is a file") is None
    assert parse_command("hello /help") is None


async def test_help_status_context_and_unknown_skip_the_model(anthropic_server, make_gateway):
    _, channel = await make_gateway(anthropic_server)
    for text in ("/help", "/status", "/context", "/frobnicate"):
        await channel.inject("uma", text)
    await channel.wait_for(4)
    help_text, status, context, unknown = channel.texts()
    assert "/new" in help_text and "/context" in help_text
    assert "claude" in status and "200,000" in status and "fakechat-uma" in status
    assert "tokens" in status
    assert "AGENTS.md" in context and "MEMORY.md" in context and "System prompt" in context
    assert unknown.startswith("Unknown command /frobnicate") and "/help" in unknown
    assert anthropic_server.requests == []


async def test_status_counts_tokens_after_a_turn(anthropic_server, make_gateway):
    _, channel = await make_gateway(anthropic_server)
    anthropic_server.reply_text("hi", input_tokens=1500, output_tokens=20)
    await channel.inject("vic", "hello")
    await channel.wait_for(1)  # /status answers at once, even while a turn runs
    await channel.inject("vic", "/status")
    await channel.wait_for(2)
    status = channel.texts()[1]
    assert "~1,520 of 200,000 tokens" in status
    assert "1,500 tokens in, 20 out" in status


async def test_context_reports_truncation(anthropic_server, make_gateway, tmp_path):
    _, channel = await make_gateway(anthropic_server, prompt={"file_max_chars": 1_000})
    await channel.inject("wes", "/help")  # first contact creates the workspace
    await channel.wait_for(1)
    workspace = workspace_path(tmp_path / "workspaces", "fakechat-wes")
    (workspace / "MEMORY.md").write_text("fact\n" * 1_000)
    await channel.inject("wes", "/context")
    await channel.wait_for(2)
    line = next(li for li in channel.texts()[1].splitlines() if "MEMORY.md" in li)
    assert "truncated" in line and "5,000 chars" in line


async def test_new_starts_fresh_and_keeps_the_old_transcript(
    anthropic_server, make_gateway, tmp_path
):
    _, channel = await make_gateway(anthropic_server)
    await channel.inject("xia", "the password hint is 'blue door'")
    await channel.inject("xia", "/new")
    await channel.inject("xia", "what was the hint?")
    await channel.wait_for(3)
    assert "fresh session" in channel.texts()[1]
    assert "blue door" not in json.dumps(anthropic_server.requests[-1]["messages"])
    sessions = workspace_path(tmp_path / "workspaces", "fakechat-xia") / "sessions"
    transcripts = sorted(p.name for p in sessions.glob("*.jsonl"))
    assert len(transcripts) == 2
    archived = next(p for p in sessions.glob("*.jsonl") if p.name.count(".") == 2)
    assert "blue door" in archived.read_text()
    assert len(anthropic_server.requests) == 2
