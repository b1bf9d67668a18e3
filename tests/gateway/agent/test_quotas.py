"""Quotas through the whole Gateway and a scripted model: disk per area and per workspace,
bytes written per turn, tool calls per step and per turn.

On main nothing capped any of them: the red team's four-step group mention (write "x" to 20
files, then replace_all "x" by 100 x's three times) grew the workspace by 20 MB in 0.9 s."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gateway.agent.tools.quota import tree_bytes
from gateway.workspace.seed import workspace_path
from tests.gateway.capabilities.test_capabilities_gateway import OWNER

AREA = "groups/fakechat-g1"


def _results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results the model got in this request (its last user message)."""
    content = request["messages"][-1]["content"]
    return [block for block in content if block.get("type") == "tool_result"]


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else json.dumps(content)


async def test_the_red_team_group_amplification_stays_within_the_area_quota(
    anthropic_server, make_gateway, tmp_path
) -> None:
    server = anthropic_server
    gateway, channel = await make_gateway(server, owner=OWNER)
    files = [f"{AREA}/f{i}.md" for i in range(20)]
    server.reply_tool_calls([("write_file", {"path": f, "content": "x"}, None) for f in files])
    for _ in range(3):
        server.reply_tool_calls(
            [
                (
                    "edit_file",
                    {"path": f, "old_text": "x", "new_text": "x" * 100, "replace_all": True},
                    None,
                )
                for f in files
            ]
        )
    server.reply_text("done")
    await channel.inject("mallory", "@bot grow", chat_type="group", chat_id="g1")
    await channel.wait_for(1)

    workspace = workspace_path(tmp_path / "workspaces", OWNER)
    grown = tree_bytes(workspace / AREA)
    print(f"\nthe group's area after the attack: {grown:,} bytes (main: 20,000,000)")
    assert grown <= gateway.settings.tools.group_area_max_bytes
    last = [_text(b) for b in _results(server.requests[-1])]
    refused = [t for t in last if "refused, nothing was written" in t]
    assert refused and "this group's area" in refused[0] and "group_area_max_bytes" in refused[0]
    assert all(text.startswith("edit_file:") for text in refused)
    # A refused edit left its file as it was (10,000 x's), never half done.
    sizes = sorted({(workspace / f).stat().st_size for f in files})
    assert set(sizes) <= {10_000, 1_000_000}
    assert gateway.metrics.quota_refusals.value(quota="group_area") == len(refused)
    assert "clawgate_quota_refusals_total" in gateway.metrics.render()


async def test_an_amplifying_edit_is_refused_by_the_turn_budget_before_it_writes(
    anthropic_server, make_gateway, tmp_path
) -> None:
    server = anthropic_server
    gateway, channel = await make_gateway(
        server, owner=OWNER, tools={"turn_write_max_bytes": 64 * 1024}
    )
    workspace = workspace_path(tmp_path / "workspaces", OWNER)
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    (workspace / "notes" / "a.md").write_text("x" * 1_000)
    server.reply_tool_call(
        "edit_file",
        {"path": "notes/a.md", "old_text": "x", "new_text": "y" * 100, "replace_all": True},
    )
    server.reply_tool_call("append_file", {"path": "notes/a.md", "content": "fine"})
    server.reply_text("ok")
    await channel.inject("dana", "make it longer")
    await channel.wait_for(1)
    edit, append = (_text(_results(r)[0]) for r in server.requests[1:3])
    assert "refused, nothing was written" in edit and "64 KiB one message may write" in edit
    assert (workspace / "notes" / "a.md").read_text() == "x" * 1_000 + "\nfine"
    assert "appended" in append
    assert gateway.metrics.quota_refusals.value(quota="turn_write") == 1
    assert gateway.metrics.tool_bytes.value() == len("\nfine")


async def test_tool_calls_per_step_and_per_turn(anthropic_server, make_gateway, tmp_path) -> None:
    server = anthropic_server
    gateway, channel = await make_gateway(
        server, owner=OWNER, tools={"step_max_tool_calls": 4, "turn_max_tool_calls": 6}
    )
    server.reply_tool_calls([("list_files", {}, None)] * 5)  # one over the step
    server.reply_tool_calls([("list_files", {}, None)] * 3)  # two over the turn
    server.reply_text("done")
    await channel.inject("dana", "look around")
    await channel.wait_for(1)
    first = [_text(b) for b in _results(server.requests[1])]
    second = [_text(b) for b in _results(server.requests[2])]
    assert ["not run" in t for t in first] == [False] * 4 + [True]
    assert "at most 4 tool calls are run per step" in first[-1]
    assert ["not run" in t for t in second] == [False, False, True]
    assert "already made 6 tool calls" in second[-1]
    assert gateway.metrics.quota_refusals.value(quota="step_calls") == 1
    assert gateway.metrics.quota_refusals.value(quota="turn_calls") == 1


async def test_the_workspace_quota_and_space_freed_by_hand(
    anthropic_server, make_gateway, tmp_path
) -> None:
    server = anthropic_server
    limit = 1024 * 1024
    gateway, channel = await make_gateway(server, owner=OWNER, tools={"workspace_max_bytes": limit})
    workspace = workspace_path(tmp_path / "workspaces", OWNER)
    workspace.mkdir(parents=True, exist_ok=True)
    filler = workspace / "old-export.md"
    filler.write_bytes(b"z" * limit)
    server.reply_tool_call("write_file", {"path": "notes/b.md", "content": "b" * 10_000})
    server.reply_text("could not")
    await channel.inject("dana", "write b")
    await channel.wait_for(1)
    refusal = _text(_results(server.requests[1])[0])
    assert "this workspace uses" in refusal and "workspace_max_bytes" in refusal
    assert not (workspace / "notes" / "b.md").exists()

    os.remove(filler)  # the owner frees space; the next write sees it at once
    server.reply_tool_call("write_file", {"path": "notes/b.md", "content": "b" * 10_000})
    server.reply_text("done")
    await channel.inject("dana", "write b again")
    await channel.wait_for(2)
    assert (workspace / "notes" / "b.md").stat().st_size == 10_000
    assert gateway.metrics.quota_refusals.value(quota="workspace") == 1


def test_disk_usage_leaves_out_the_recall_index(tmp_path: Path) -> None:
    (tmp_path / ".recall").mkdir()
    (tmp_path / ".recall" / "index.sqlite").write_bytes(b"i" * 5000)
    (tmp_path / ".trash" / "t" / "groups" / "g").mkdir(parents=True)
    (tmp_path / ".trash" / "t" / "groups" / "g" / "old.md").write_bytes(b"o" * 300)
    (tmp_path / "groups" / "g").mkdir(parents=True)
    (tmp_path / "groups" / "g" / "n.md").write_bytes(b"n" * 20)
    from gateway.agent.tools.quota import DiskUsage

    usage = DiskUsage()
    assert usage.used(tmp_path) == 320
    assert usage.used(tmp_path, "groups/g") == 320
    os.symlink("/", tmp_path / "groups" / "g" / "root-link")  # never followed
    assert usage.used(tmp_path, "groups/g", fresh=True) < 400
