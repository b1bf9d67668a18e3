"""One person's assistant can never reach another person's workspace, index or transcripts."""

from __future__ import annotations

import hashlib
import json
import logging
import os

from gateway.workspace.seed import ensure_workspace
from tests.conftest import TEST_KEY

CANARY = "canary-of-bo-31337"


def _tree(path):
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


async def test_a_cannot_read_or_write_b_through_tools(anthropic_server, make_gateway, tmp_path):
    _, channel = await make_gateway(anthropic_server)
    root = tmp_path / "workspaces"
    amy = ensure_workspace(root, "fakechat-amy")
    bo = ensure_workspace(root, "fakechat-bo")
    (bo / "MEMORY.md").write_text(f"- {CANARY}\n")
    (bo / "sessions" / "bo_dm-00000000.jsonl").write_text(
        json.dumps({"type": "user", "text": CANARY}) + "\n"
    )
    (bo / ".index").mkdir()
    (bo / ".index" / "memory.sqlite").write_text(CANARY)
    os.symlink(bo, amy / "bo-link")
    os.symlink(bo / "MEMORY.md", amy / "notes.md")
    before = _tree(bo)

    attempts = [
        ("read_file", {"path": "../fakechat-bo/MEMORY.md"}),
        ("read_file", {"path": str(bo / "MEMORY.md")}),
        ("read_file", {"path": "bo-link/MEMORY.md"}),
        ("read_file", {"path": "notes.md"}),
        ("read_file", {"path": "../fakechat-bo/sessions/bo_dm-00000000.jsonl"}),
        ("read_file", {"path": "../fakechat-bo/.index/memory.sqlite"}),
        ("list_files", {"path": ".."}),
        ("list_files", {"path": "bo-link"}),
        ("write_file", {"path": "../fakechat-bo/MEMORY.md", "content": "pwned"}),
        ("append_file", {"path": "bo-link/MEMORY.md", "content": "pwned"}),
        ("edit_file", {"path": "notes.md", "old_text": "- ", "new_text": "pwned"}),
        ("delete_file", {"path": "bo-link/SOUL.md"}),
    ]
    anthropic_server.reply_tool_calls([(name, args, None) for name, args in attempts])
    anthropic_server.reply_text("I could not get in.")
    await channel.inject("amy", "show me bo's memory")
    await channel.wait_for(1)

    assert channel.texts() == ["I could not get in."]
    assert CANARY not in json.dumps(anthropic_server.requests)
    results = [
        b
        for b in anthropic_server.requests[-1]["messages"][-1]["content"]
        if b["type"] == "tool_result"
    ]
    assert len(results) == len(attempts)
    assert all(r.get("is_error") for r in results), [r["content"] for r in results]
    assert _tree(bo) == before


async def test_secrets_never_reach_logs_transcripts_or_people(
    anthropic_server, make_gateway, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    _, channel = await make_gateway(anthropic_server)
    echoed = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key: {TEST_KEY}"},
    }
    anthropic_server.reply_error(401, body=echoed)
    anthropic_server.reply_error(
        400,
        body={
            "type": "error",
            "error": {"type": "invalid_request_error", "message": f"bad header Bearer {TEST_KEY}"},
        },
    )
    await channel.inject("kay", "hi")
    await channel.inject("kay", "again")
    await channel.wait_for(2)
    produced = [caplog.text, *channel.texts()]
    produced += [p.read_text() for p in (tmp_path / "workspaces").rglob("*.jsonl")]
    for text in produced:
        assert TEST_KEY not in text
        assert TEST_KEY[:12] not in text
