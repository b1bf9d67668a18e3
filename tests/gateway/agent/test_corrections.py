"""Corrections: find a fact across the memory files, replace, strike or delete it (tools,
through the real gateway and the scripted fake model, and the CLI); recall no longer returns
a struck fact."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import date

import pytest

from gateway.agent.tools.args import run_checked
from gateway.agent.tools.base import ToolContext, ToolError
from gateway.agent.tools.corrections import MemoryCorrectTool, MemoryFindTool
from gateway.agent.tools.quota import Quotas, TurnBudget
from gateway.cli.main import main
from gateway.ops.versioning import Versioning
from gateway.workspace.seed import ensure_workspace
from memory.corrections import (
    CorrectionError,
    correct_text,
    find_in_files,
    is_struck,
    written_lines,
)
from memory.service import MemoryOptions, MemoryService
from tests.fakes.embedder import FakeEmbedder

OWNER = "fakechat-alice"
WHEN = "2026-11-29"


def _ws(tmp_path):
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    (ws / "MEMORY.md").write_text("# Memory\n- Alice lives in Munich.\n- Alice likes tea.\n")
    (ws / "USER.md").write_text("# User\n- Home address: Lindwurmstrasse 5, Munich\n")
    (ws / "memory" / "2026-03-01.md").write_text("- Alice moved to Munich last year.\n")
    (ws / "notes.md").write_text("- Munich trip ideas\n")  # not a memory file
    return ws


def _ctx(ws, private: bool = True, budget: TurnBudget | None = None) -> ToolContext:
    return ToolContext(ws, "dm:alice", private, 1 << 20, budget=budget)


# --- the text operations -------------------------------------------------------------------


def test_replace_strike_delete_keep_the_list_marker() -> None:
    text = "# M\n- Alice lives in Munich.\n- Alice likes tea.\n"
    replaced, line = correct_text(
        text, "lives in Munich", "replace", new_text="Alice lives in Berlin.", when=WHEN
    )
    assert line == 2 and "- Alice lives in Berlin.\n" in replaced and "Munich" not in replaced
    struck, _ = correct_text(
        text,
        "lives in Munich",
        "strike",
        new_text="Alice lives in Berlin.",
        when=WHEN,
        reason="moved",
    )
    assert (
        "- ~~Alice lives in Munich.~~ (superseded 2026-11-29: moved)\n- Alice lives in "
        "Berlin.\n" in struck
    )
    assert is_struck(struck.splitlines()[1]) and not is_struck(struck.splitlines()[2])
    deleted, _ = correct_text(text, "likes tea", "delete", when=WHEN)
    assert deleted == "# M\n- Alice lives in Munich.\n"


def test_the_quoted_part_is_replaced_within_its_line() -> None:
    """Issue 38 item 7: quoting part of a line replaced only that part; the line's subject
    ("Alex takes") was lost when the new text took the whole line's place."""
    text = "# M\n- Alex takes genmaicha tea, no sugar\n"
    struck, line = correct_text(
        text, "genmaicha tea, no sugar", "strike", new_text="sencha tea, one sugar", when=WHEN
    )
    assert (
        struck
        == (
            "# M\n- ~~Alex takes genmaicha tea, no sugar~~ (superseded 2026-11-29)\n"
            "- Alex takes sencha tea, one sugar\n"
        )
        and line == 2
    )
    replaced, _ = correct_text(text, "genmaicha", "replace", new_text="sencha", when=WHEN)
    assert replaced == "# M\n- Alex takes sencha tea, no sugar\n"
    # The whole corrected line given (as a model often writes it) is not doubled.
    whole, _ = correct_text(
        text, "genmaicha tea", "replace", new_text="Alex takes sencha tea, no sugar", when=WHEN
    )
    assert whole == "# M\n- Alex takes sencha tea, no sugar\n"
    assert written_lines(struck, 2, "strike", "sencha tea, one sugar") == [
        "- ~~Alex takes genmaicha tea, no sugar~~ (superseded 2026-11-29)",
        "- Alex takes sencha tea, one sugar",
    ]
    assert written_lines(replaced, 2, "replace", "sencha") == ["- Alex takes sencha tea, no sugar"]
    assert written_lines("# M\n", 2, "delete") == []


def test_ambiguous_stale_or_bad_requests_change_nothing() -> None:
    text = "- Alice lives in Munich.\n- Bob lives in Munich.\n"
    with pytest.raises(CorrectionError, match="on 2 lines"):
        correct_text(text, "lives in Munich", "delete", when=WHEN)
    assert (
        correct_text(text, "lives in Munich", "delete", line=2, when=WHEN)[0]
        == "- Alice lives in Munich.\n"
    )
    with pytest.raises(CorrectionError, match="does not contain"):
        correct_text(text, "Alice", "delete", line=2, when=WHEN)
    with pytest.raises(CorrectionError, match="not in the file"):
        correct_text(text, "Paris", "delete", when=WHEN)
    with pytest.raises(CorrectionError, match="needs new_text"):
        correct_text(text, "Alice", "replace", when=WHEN)
    with pytest.raises(CorrectionError, match="one line"):
        correct_text(text, "Alice\n- Bob", "delete", when=WHEN)
    struck, _ = correct_text(text, "Alice", "strike", when=WHEN)
    with pytest.raises(CorrectionError, match="already struck"):
        correct_text(struck, "Alice", "strike", when=WHEN)


def test_find_reads_memory_files_only_and_never_follows_symlinks(tmp_path) -> None:
    ws = _ws(tmp_path)
    outside = tmp_path / "secret.md"
    outside.write_text("- Munich secret\n")
    os.symlink(outside, ws / "memory" / "link.md")
    found = find_in_files(ws, "munich")
    assert [(f.path, f.line) for f in found] == [
        ("MEMORY.md", 2),
        ("USER.md", 2),
        ("memory/2026-03-01.md", 1),
    ]
    assert find_in_files(ws, "Alice Munich lives")[0].path == "MEMORY.md"  # words, any order


# --- the tools -----------------------------------------------------------------------------


async def test_tools_correct_every_copy_within_confinement_and_quotas(tmp_path) -> None:
    ws = _ws(tmp_path)
    find, correct = MemoryFindTool(), MemoryCorrectTool(lambda: date(2026, 11, 29))
    listing = await run_checked(find, {"text": "Munich"}, _ctx(ws))
    assert "MEMORY.md:2:" in listing and "USER.md:2:" in listing and "notes.md" not in listing
    out = await run_checked(
        correct,
        {
            "path": "MEMORY.md",
            "old_text": "Alice lives in Munich",
            "action": "strike",
            "new_text": "Alice lives in Berlin.",
            "reason": "moved to Berlin",
        },
        _ctx(ws),
    )
    assert out == (
        "struck line 2 of MEMORY.md and wrote the new fact under it; it now reads:\n"
        "- ~~Alice lives in Munich.~~ (superseded 2026-11-29: moved to Berlin)\n"
        "- Alice lives in Berlin."
    )
    assert (
        "~~Alice lives in Munich.~~ (superseded 2026-11-29: moved to Berlin)"
        in (ws / "MEMORY.md").read_text()
    )
    assert "[struck]" in await run_checked(find, {"text": "Munich"}, _ctx(ws))
    for path, args in [
        ("AGENTS.md", {}),
        ("notes.md", {}),
        ("../x.md", {}),
        ("sessions/dm.jsonl", {}),
    ]:
        with pytest.raises(ToolError):
            await run_checked(
                correct, {"path": path, "old_text": "x", "action": "delete", **args}, _ctx(ws)
            )
    with pytest.raises(ToolError, match=r"private|owner"):
        await run_checked(find, {"text": "Munich"}, _ctx(ws, private=False))
    tiny = TurnBudget(Quotas(turn_write_bytes=10))
    before = (ws / "USER.md").read_text()
    with pytest.raises(ToolError, match="refused, nothing was written"):
        await run_checked(
            correct,
            {
                "path": "USER.md",
                "old_text": "Lindwurmstrasse",
                "action": "replace",
                "new_text": "- Home address: Torstrasse 1, Berlin",
            },
            _ctx(ws, budget=tiny),
        )
    assert (ws / "USER.md").read_text() == before


async def test_recall_does_not_return_a_struck_fact(tmp_path) -> None:
    ws = _ws(tmp_path)
    service = MemoryService(
        lambda: FakeEmbedder(), MemoryOptions(watch=False), today=lambda: date(2026, 11, 29)
    )
    try:
        await service.sync(ws)
        hits = (await service.search(ws, "where does Alice live Munich")).results
        assert any("lives in Munich" in r.snippet for r in hits)
        await run_checked(
            MemoryCorrectTool(lambda: date(2026, 11, 29)),
            {
                "path": "MEMORY.md",
                "old_text": "lives in Munich",
                "action": "strike",
                "new_text": "Alice lives in Berlin.",
                "reason": "moved",
            },
            _ctx(ws),
        )
        await service.sync(ws)
        hits = (await service.search(ws, "where does Alice live Munich")).results
        assert not any("lives in Munich" in r.snippet for r in hits)
        assert any("lives in Berlin" in r.snippet for r in hits)
    finally:
        await service.close()


async def test_the_model_corrects_through_the_gateway(openai_server, make_gateway, tmp_path):
    _, channel = await make_gateway(openai_server, owner=OWNER)
    ws = _ws(tmp_path)
    openai_server.reply_tool_call("memory_find", {"text": "Munich"})
    openai_server.reply_tool_calls(
        [
            (
                "memory_correct",
                {
                    "path": "MEMORY.md",
                    "old_text": "lives in Munich",
                    "action": "strike",
                    "new_text": "Alice lives in Berlin.",
                    "reason": "moved to Berlin",
                },
                None,
            ),
            (
                "memory_correct",
                {"path": "USER.md", "old_text": "Lindwurmstrasse", "action": "delete"},
                None,
            ),
        ]
    )
    openai_server.reply_text("Updated: you live in Berlin now.")
    await channel.inject("alice", "that's wrong, I moved to Berlin; forget the old address")
    await channel.wait_for(1)
    assert channel.texts() == ["Updated: you live in Berlin now."]
    assert "MEMORY.md:2:" in json.dumps(openai_server.requests[1]["messages"])
    memory_md = (ws / "MEMORY.md").read_text()
    assert "~~Alice lives in Munich.~~" in memory_md and "- Alice lives in Berlin." in memory_md
    assert "Lindwurmstrasse" not in (ws / "USER.md").read_text()
    # A group never has the correction tools.
    openai_server.reply_text("ok")
    await channel.inject("alice", "hi all", chat_type="group", chat_id="g1")
    await channel.wait_for(2)
    names = {t["function"]["name"] for t in openai_server.requests[-1]["tools"]}
    assert names and not names & {"memory_find", "memory_correct"}


# --- the command line ----------------------------------------------------------------------


def test_cli_find_correct_and_undo(tmp_path, monkeypatch, capsys) -> None:
    ws = _ws(tmp_path)
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    assert main(["memory", "find", "Munich", "--workspace", str(ws), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in found] == ["MEMORY.md", "USER.md", "memory/2026-03-01.md"]
    asyncio.run(Versioning().ensure_repo(ws))
    code = main(
        [
            "memory",
            "correct",
            "MEMORY.md",
            "lives in Munich",
            "--to",
            "Alice lives in Berlin.",
            "--reason",
            "moved",
            "--workspace",
            str(ws),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "struck line 2 of MEMORY.md" in out.out
    assert "~~Alice lives in Munich.~~" in (ws / "MEMORY.md").read_text()
    assert main(["memory", "correct", "AGENTS.md", "x", "--workspace", str(ws)]) != 0
    assert "not a memory file" in capsys.readouterr().err
    assert main(["memory", "correct", "MEMORY.md", "Paris", "--workspace", str(ws)]) != 0
    assert "nothing was written" in capsys.readouterr().err
    assert "undo" in out.out
    assert main(["memory", "undo", "--workspace", str(ws)]) == 0
    assert "- Alice lives in Munich." in (ws / "MEMORY.md").read_text()
    assert "~~" not in (ws / "MEMORY.md").read_text()


def test_cli_correct_keeps_the_subject_and_prints_the_result(tmp_path, monkeypatch, capsys) -> None:
    """Issue 38 item 7, as the owner typed it."""
    ws = ensure_workspace(tmp_path / "workspaces", OWNER)
    (ws / "MEMORY.md").write_text("# Memory\n- Alex takes genmaicha tea, no sugar\n")
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    code = main(
        [
            "memory",
            "correct",
            "MEMORY.md",
            "genmaicha tea, no sugar",
            "--to",
            "sencha tea, one sugar",
            "--workspace",
            str(ws),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    today = date.today().isoformat()
    assert out.out.splitlines()[:3] == [
        "struck line 2 of MEMORY.md; it now reads:",
        f"  - ~~Alex takes genmaicha tea, no sugar~~ (superseded {today})",
        "  - Alex takes sencha tea, one sugar",
    ]
    assert (ws / "MEMORY.md").read_text().endswith("- Alex takes sencha tea, one sugar\n")
    code = main(
        [
            "memory",
            "correct",
            "MEMORY.md",
            "one sugar",
            "--action",
            "replace",
            "--to",
            "two sugars",
            "--workspace",
            str(ws),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.splitlines()[:3] == [
        "replaced line 3 of MEMORY.md:",
        "  was: - Alex takes sencha tea, one sugar",
        "  now: - Alex takes sencha tea, two sugars",
    ]
