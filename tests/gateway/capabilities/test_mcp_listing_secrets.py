"""A server's own listing is hostile input: a token it was configured with,
put into a tool's schema (description, default, enum, title, examples), a schema key or a tool
name, never reaches the model, the transcript or /metrics. Real SDKs against the loopback fakes
(tests/fakes/mcp_server.py --leaky, tests/fakes/llm_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.agent.tools.base import ToolContext
from gateway.capabilities.mcp_manager import McpManager
from gateway.config.mcp import McpServerSettings, McpSettings
from gateway.workspace.seed import workspace_path
from tests.fakes.mcp_server import stdio_config

TOKEN = "tok-5f1c9a77e2b04d1e"
OWNER = "fakechat-dana"


def _leaky() -> dict:
    return stdio_config("--leaky", env={"FAKE_TOKEN": TOKEN}, restart_initial_seconds=0.1)


async def test_a_listing_carrying_a_secret_is_masked_and_bad_names_refused():
    manager = McpManager(McpSettings(servers={"fake": _leaky()}))
    await manager.start()
    try:
        registry = manager.registry([], "owner_dm")
        assert registry is not None
        specs = {spec.name: spec for spec in registry.specs()}
        assert TOKEN not in json.dumps(
            [[s.name, s.description, s.parameters] for s in specs.values()]
        )
        query = specs["fake__lookup"].parameters["properties"]["query"]
        assert query["description"] == "Search text; the API key is [redacted]."
        assert (query["default"], query["enum"], query["title"]) == (
            "[redacted]",
            ["a", "[redacted]"],
            "Query ([redacted])",
        )
        assert query["examples"] == [["[redacted]"]]
        assert specs["fake__lookup"].parameters["title"] == "lookup with [redacted]"
        assert "fake__list_events" in specs  # renamed to [A-Za-z0-9_-], still callable
        assert not any(name.startswith("fake__tok_") for name in specs)  # refused
        assert "fake__keyed" not in specs and "fake__deep" not in specs  # refused
        assert "fake__echo" in specs  # the rest of the server is fine
        called = await registry.run("fake__list_events", {}, ToolContext(Path("."), "k", True))
        assert (called.is_error, called.text) == (False, "dotted")
    finally:
        await manager.stop()


def test_the_default_call_timeout_is_short_enough_for_a_dm():
    """A hung server holds the person's DM (the session's lane) until the call times out."""
    server = McpServerSettings(command="x")
    assert server.call_timeout_seconds <= 20


async def test_no_secret_reaches_the_model_transcript_or_metrics(
    anthropic_server, make_gateway, tmp_path
):
    server = anthropic_server
    gateway, channel = await make_gateway(server, owner=OWNER, mcp={"servers": {"fake": _leaky()}})
    server.reply_tool_call("fake__lookup", {"query": "a"})
    server.reply_tool_call("fake__list_events", {})
    server.reply_text("Looked it up.")

    await channel.inject("dana", "look it up")
    await channel.wait_for(1)

    assert channel.texts() == ["Looked it up."]
    assert TOKEN not in json.dumps(server.requests)  # tools, schemas and results
    sessions = workspace_path(tmp_path / "workspaces", OWNER) / "sessions"
    transcripts = "".join(p.read_text() for p in sessions.glob("*.jsonl"))
    assert "fake__lookup" in transcripts and TOKEN not in transcripts
    metrics = gateway.metrics.render()
    assert TOKEN not in metrics
    # Labels come from the configured server name, never from the server's tool names.
    assert gateway.metrics.tool_calls.value(tool="mcp:fake", outcome="ok") == 2
    assert "fake__lookup" not in metrics and "list_events" not in metrics


async def test_a_called_name_holding_a_secret_is_recorded_masked(
    anthropic_server, make_gateway, tmp_path
):
    """Red-team round 3: the model calls the tool whose listing was refused for its name (the
    server's token in it). The result's text was masked, but the tool-result record, and the
    call in the assistant's record, kept the name: the token sat in the transcript and went
    back to the model with the history."""
    server = anthropic_server
    _, channel = await make_gateway(server, owner=OWNER, mcp={"servers": {"fake": _leaky()}})
    server.reply_tool_call(f"fake__tok_{TOKEN}", {})
    server.reply_text("No such tool.")
    await channel.inject("dana", "use the token tool")
    await channel.wait_for(1)
    sessions = workspace_path(tmp_path / "workspaces", OWNER) / "sessions"
    transcripts = "".join(p.read_text() for p in sessions.glob("*.jsonl"))
    assert TOKEN not in transcripts
    assert '"name":"fake__tok__redacted_"' in transcripts  # the record is still there
    assert TOKEN not in json.dumps(server.requests[-1])  # the history sent back
