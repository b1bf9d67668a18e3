"""Memory tools, their place in the gateway (owner's DMs only), the CLI and the settings."""

from __future__ import annotations

import json
from datetime import date

import pytest

from gateway.agent.tools.args import run_checked
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.agent.tools.memory_tools import MemoryGetTool, MemorySearchTool, memory_tools
from gateway.cli.main import main
from gateway.config.settings import ConfigError
from gateway.workspace.seed import ensure_workspace
from memory.service import MemoryOptions, MemoryService
from tests.fakes.embedder import FakeEmbedder


def _service(embedder=None) -> MemoryService:
    return MemoryService(
        lambda: embedder or FakeEmbedder(),
        MemoryOptions(watch=False),
        today=lambda: date(2026, 11, 29),
    )


def _plant(ws):
    (ws / "MEMORY.md").write_text("# Memory\n- The boat is called Saudade.\n")
    (ws / "memory" / "2026-03-01.md").write_text("- Renewed the passport; number X9981.\n")
    (ws / "notes.md").write_text("not memory\n")


@pytest.fixture
def ws(tmp_path):
    ws = ensure_workspace(tmp_path / "workspaces", "owner")
    _plant(ws)
    return ws


async def test_memory_search_tool_lists_results(ws):
    service = _service()
    tool = MemorySearchTool(service)
    out = await run_checked(
        tool,
        {"query": "what is the boat called", "max_results": 2},
        ToolContext(ws, "owner:dm", True),
    )
    assert "MEMORY.md lines 1-2" in out and "Saudade" in out and "mode: hybrid" in out
    await (await service.index_for(ws)).wait_for_vectors()
    out = await run_checked(
        tool,
        {"query": "what is the boat called", "max_results": 2},
        ToolContext(ws, "owner:dm", True),
    )
    assert "best match line 2" in out  # once embedded, line vectors point at the boat's line
    await service.close()


async def test_memory_search_tool_refuses_outside_private_and_bad_args(ws):
    service = _service()
    tool = MemorySearchTool(service)
    with pytest.raises(ToolError, match="direct messages"):
        await run_checked(tool, {"query": "boat"}, ToolContext(ws, "tg:group:1", False))
    with pytest.raises(ToolError, match="max_results"):
        await run_checked(
            tool, {"query": "boat", "max_results": 0}, ToolContext(ws, "owner:dm", True)
        )
    with pytest.raises(ToolError, match="unknown"):
        await run_checked(tool, {"query": "boat", "path": "x"}, ToolContext(ws, "owner:dm", True))
    await service.close()


async def test_memory_search_tool_says_when_unavailable(ws):
    class Broken(MemoryService):
        async def search(self, *args, **kwargs):
            raise RuntimeError("disk on fire")

    tool = MemorySearchTool(Broken(lambda: None))
    with pytest.raises(ToolError, match="unavailable"):
        await run_checked(tool, {"query": "boat"}, ToolContext(ws, "owner:dm", True))


async def test_keyword_only_tool_output_says_so(ws):
    service = MemoryService(lambda: None, MemoryOptions(watch=False))
    out = await run_checked(
        MemorySearchTool(service), {"query": "passport"}, ToolContext(ws, "owner:dm", True)
    )
    assert "X9981" in out and "keyword-only" in out
    await service.close()


async def test_memory_get_reads_memory_files_only(ws):
    tool = MemoryGetTool()
    ctx = ToolContext(ws, "owner:dm", True)
    out = await run_checked(tool, {"path": "MEMORY.md", "from_line": 2, "lines": 1}, ctx)
    assert out.startswith("2: - The boat is called Saudade.") and "end of file" in out
    with pytest.raises(ToolError, match="not a memory file"):
        await run_checked(tool, {"path": "notes.md"}, ctx)
    with pytest.raises(ToolError, match="refused"):
        await run_checked(tool, {"path": "../x/MEMORY.md"}, ctx)
    with pytest.raises(ToolError, match="direct messages"):
        await run_checked(tool, {"path": "MEMORY.md"}, ToolContext(ws, "g", False))


async def test_memory_get_shows_transcript_dialogue(ws):
    (ws / "sessions" / "owner_dm-00000000.jsonl").write_text(
        '{"type":"session","key":"owner:dm"}\n{"type":"user","text":"hi there"}\n'
        '{"type":"delivery","ok":true}\n{"type":"assistant","text":"hello"}\n'
    )
    out = await run_checked(
        MemoryGetTool(),
        {"path": "sessions/owner_dm-00000000.jsonl"},
        ToolContext(ws, "owner:dm", True),
    )
    assert out.splitlines()[:2] == ["2: User: hi there", "4: Assistant: hello"]


def _tool_names(request: dict) -> list[str]:
    return [tool["name"] for tool in request.get("tools", [])]


async def test_dm_has_memory_tools_and_group_does_not(anthropic_server, make_gateway, tmp_path):
    service = _service()
    _, channel = await make_gateway(
        anthropic_server, owner="fakechat-alice", memory_service=service
    )
    _plant(ensure_workspace(tmp_path / "workspaces", "fakechat-alice"))
    anthropic_server.reply_tool_call("memory_search", {"query": "name of the boat"})
    anthropic_server.reply_text("It is Saudade.")
    await channel.inject("alice", "what's my boat called?")
    await channel.wait_for(1)
    assert channel.texts() == ["It is Saudade."]
    dm_requests = list(anthropic_server.requests)
    assert {"memory_search", "memory_get"} <= set(_tool_names(dm_requests[0]))
    assert "Saudade" in json.dumps(dm_requests[-1]["messages"][-1])

    await channel.inject("alice", "hello group", chat_type="group", chat_id="g1")
    await channel.wait_for(2)
    group_request = anthropic_server.requests[-1]
    names = _tool_names(group_request)
    assert names and "memory_search" not in names and "memory_get" not in names


def test_cli_index_search_status(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLAWGATE_MEMORY__EMBEDDER", "none")
    ws = ensure_workspace(tmp_path / "workspaces", "owner")
    _plant(ws)
    assert main(["memory", "index", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    # USER.md, MEMORY.md, INSTRUCTIONS.md and the note
    assert "indexed 4 files" in out and "keyword-only" in out
    assert (
        main(
            ["memory", "search", "passport X9981", "--workspace", str(ws), "--json", "--limit", "1"]
        )
        == 0
    )
    captured = capsys.readouterr()
    results = json.loads(captured.out)
    assert len(results) == 1 and set(results[0]) == {
        "path",
        "start_line",
        "end_line",
        "score",
        "snippet",
        "source",
    }
    assert results[0]["path"] == "memory/2026-03-01.md" and results[0]["source"] == "memory"
    assert "keyword-only" in captured.err
    assert main(["memory", "status", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "files:      4" in out and "keyword-only" in out and "dirty:      no" in out
    (ws / "MEMORY.md").write_text("changed\n")
    assert main(["memory", "status", "--workspace", str(ws)]) == 0
    assert "dirty:      yes" in capsys.readouterr().out


def test_cli_search_missing_workspace_is_one_line(tmp_path, capsys):
    assert main(["memory", "search", "x", "--workspace", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err


def test_invalid_memory_setting_is_one_line(make_settings):
    with pytest.raises(ConfigError, match=r"memory\.embedder"):
        make_settings(memory={"embedder": "magic"})


def test_memory_tools_names():
    assert [t.spec.name for t in memory_tools(_service())] == ["memory_search", "memory_get"]


async def test_memory_search_tool_fuses_other_phrasings(ws):
    service = MemoryService(lambda: None, MemoryOptions(watch=False))
    tool = MemorySearchTool(service)
    ctx = ToolContext(ws, "owner:dm", True)
    alone = await run_checked(tool, {"query": "travel document"}, ctx)
    assert "X9981" not in alone
    both = await run_checked(
        tool, {"query": "travel document", "queries": ["passport number"]}, ctx
    )
    assert "memory/2026-03-01.md" in both and "X9981" in both
    with pytest.raises(ToolError, match="'queries' must be a list"):
        await run_checked(tool, {"query": "boat", "queries": "passport"}, ctx)
    with pytest.raises(ToolError, match="at most 3"):
        await run_checked(tool, {"query": "boat", "queries": ["a", "b", "c", "d"]}, ctx)
    await service.close()
