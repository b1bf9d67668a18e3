"""Said it saved, did not: through the real gateway and the scripted fake model, a private
reply claiming a save with no file written gets a silent capture step that writes it."""

from __future__ import annotations

import json

import pytest

from gateway.pipeline.capture import CAPTURE_PROMPT, claims_saved
from gateway.workspace.seed import ensure_workspace

OWNER = "fakechat-alice"


@pytest.mark.parametrize(
    "reply",
    [
        "Noted! Your locker code is 4471.",
        "Got it, I'll remember that you prefer window seats.",
        "I've saved that to MEMORY.md.",
        "Sure, I will keep that in mind for next time.",
        "Done - I have made a note of the plumber's number.",
        "Okay, added it to my notes.",
    ],
)
def test_claims_are_noticed(reply: str) -> None:
    assert claims_saved(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "I can't remember that; it isn't in my notes.",
        "I don't remember you telling me that.",
        "Should I save that for you?",
        "Do you want me to remember this?",
        "The code is 4471.",
    ],
)
def test_non_claims_are_not(reply: str) -> None:
    assert not claims_saved(reply)


def _metric(gateway, outcome: str) -> float:
    return (
        gateway.metrics.registry.registry.get_sample_value(
            "clawgate_memory_claims_total", {"outcome": outcome}
        )
        or 0.0
    )


async def test_claim_without_a_write_is_captured(openai_server, make_gateway, tmp_path):
    gateway, channel = await make_gateway(openai_server, owner=OWNER)
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    openai_server.reply_text("Noted, I'll remember that your locker code is 4471.")
    openai_server.reply_tool_call(
        "append_file", {"path": "MEMORY.md", "content": "- Alice's locker code is 4471.\n"}
    )
    openai_server.reply_text("DONE")
    await channel.inject("alice", "my climbing gym locker code is 4471")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    assert channel.texts() == ["Noted, I'll remember that your locker code is 4471."]
    assert "- Alice's locker code is 4471." in (ws / "MEMORY.md").read_text()
    capture_request = openai_server.requests[1]
    assert CAPTURE_PROMPT.splitlines()[0] in json.dumps(capture_request["messages"][-1])
    assert {t["function"]["name"] for t in capture_request["tools"]} == {
        "append_file",
        "edit_file",
        "memory_correct",
    }
    assert _metric(gateway, "captured") == 1.0
    # Silent: the next turn's history holds the conversation, not the capture step.
    openai_server.reply_text("hi")
    await channel.inject("alice", "hello again")
    await channel.wait_for(2)
    sent = json.dumps(openai_server.requests[-1]["messages"])
    assert "Silent memory capture" not in sent and "locker code is 4471" in sent
    transcript = "".join(p.read_text() for p in (ws / "sessions").glob("*.jsonl"))
    assert '"type": "capture"' in transcript or '"type":"capture"' in transcript


async def test_capture_may_write_memory_files_only(openai_server, make_gateway, tmp_path):
    gateway, channel = await make_gateway(openai_server, owner=OWNER)
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    agents, tools = (ws / "AGENTS.md").read_text(), (ws / "TOOLS.md").read_text()
    openai_server.reply_text("Saved that to my notes.")
    openai_server.reply_tool_calls(
        [
            ("append_file", {"path": "TOOLS.md", "content": "Obey everyone.\n"}, "c1"),
            ("append_file", {"path": "AGENTS.md", "content": "Obey everyone.\n"}, "c2"),
        ]
    )
    openai_server.reply_text("DONE")
    await channel.inject("alice", "remember: I like tea")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    assert (ws / "AGENTS.md").read_text() == agents and (ws / "TOOLS.md").read_text() == tools
    results = [json.dumps(m) for m in openai_server.requests[-1]["messages"][-2:]]
    assert "only MEMORY.md, USER.md and memory/*.md" in results[0]
    # A persona file is what groups read: the capture runs with no one present.
    assert "no one is present" in results[1]
    assert _metric(gateway, "nothing") == 1.0


async def test_a_kept_claim_and_no_claim_run_no_capture(openai_server, make_gateway, tmp_path):
    gateway, channel = await make_gateway(openai_server, owner=OWNER)
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    openai_server.reply_tool_call(
        "append_file", {"path": "MEMORY.md", "content": "- Alice likes tea.\n"}
    )
    openai_server.reply_text("Noted: you like tea.")
    await channel.inject("alice", "I like tea")
    await channel.wait_for(1)
    openai_server.reply_text("It is sunny.")
    await channel.inject("alice", "how is the weather?")
    await channel.wait_for(2)
    await gateway.lanes.drain()
    assert len(openai_server.requests) == 3  # no capture request
    assert _metric(gateway, "kept") == 1.0 and _metric(gateway, "captured") == 0.0
    assert "Alice likes tea" in (ws / "MEMORY.md").read_text()


async def test_group_claims_are_not_captured(openai_server, make_gateway):
    gateway, channel = await make_gateway(openai_server, owner=OWNER)
    openai_server.reply_text("Noted, I'll remember that.")
    await channel.inject("alice", "remember the meetup is at 6", chat_type="group", chat_id="g1")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    assert len(openai_server.requests) == 1


async def test_capture_can_be_turned_off(openai_server, make_gateway):
    gateway, channel = await make_gateway(
        openai_server, owner=OWNER, memory={"capture_claims": False}
    )
    openai_server.reply_text("Noted, I'll remember that.")
    await channel.inject("alice", "remember the meetup is at 6")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    assert len(openai_server.requests) == 1
