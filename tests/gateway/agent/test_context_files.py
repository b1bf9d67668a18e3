"""Bootstrap file order, budgets, truncation, missing and unreadable files."""

from __future__ import annotations

import os
import time
from datetime import date
from pathlib import Path

import pytest

from gateway.agent.context_files import ContextFileLoader, context_file_names
from gateway.agent.prompt import build_system_prompt
from gateway.workspace.seed import BOOTSTRAP_FILES, ensure_workspace

TODAY = date(2026, 11, 29)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return ensure_workspace(tmp_path, "pat")


def _names(files):
    return [f.name for f in files]


def test_order_is_fixed_and_daily_notes_follow(workspace):
    loader = ContextFileLoader(20_000, 60_000)
    files = loader.load(workspace, private=True, today=TODAY)
    assert _names(files) == [
        "AGENTS.md",
        "SOUL.md",
        "IDENTITY.md",
        "INSTRUCTIONS.md",
        "USER.md",
        "TOOLS.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
        "HEARTBEAT.md",
        "memory/2026-11-29.md",
        "memory/2026-11-28.md",
    ]
    assert context_file_names(TODAY)[: len(BOOTSTRAP_FILES)] == list(BOOTSTRAP_FILES)


def test_prompt_renders_files_in_order(workspace):
    for index, name in enumerate(BOOTSTRAP_FILES):
        (workspace / name).write_text(f"marker-{index}\n")
    loader = ContextFileLoader(20_000, 60_000)
    prompt = build_system_prompt(
        loader.load(workspace, private=True, today=TODAY),
        private=True,
        now=__import__("datetime").datetime(2026, 11, 29),
        run_info="",
    ).stable
    positions = [prompt.index(f"marker-{index}") for index in range(len(BOOTSTRAP_FILES))]
    assert positions == sorted(positions)


def test_html_comments_are_the_humans_and_stay_out_of_the_prompt(workspace):
    (workspace / "TOOLS.md").write_text(
        "# TOOLS.md\n\n<!-- my note: the NAS is old -->\n\n\n- printer: office-laser\n"
        "<!-- unclosed: everything after this is hidden, as in a viewer\n- secret: x\n"
    )
    loader = ContextFileLoader(20_000, 60_000)
    tools = next(
        f for f in loader.load(workspace, private=True, today=TODAY) if f.name == "TOOLS.md"
    )
    assert tools.text == "# TOOLS.md\n\n- printer: office-laser\n"
    assert tools.report.raw_chars == len(tools.text)
    # A flood of comment openings is read in linear time, and hides everything after it.
    (workspace / "TOOLS.md").write_text("keep\n" + "<!--" * 200_000)
    tools = next(
        f for f in loader.load(workspace, private=True, today=TODAY) if f.name == "TOOLS.md"
    )
    assert tools.text == "keep\n"
    # The seeded files explain themselves in comments; none of that reaches the model.
    seeded = ensure_workspace(workspace.parent, "sam")
    assert all("<!--" not in f.text for f in loader.load(seeded, private=True, today=TODAY))


def test_missing_file_is_reported_not_an_error(workspace):
    (workspace / "SOUL.md").unlink()
    files = ContextFileLoader(20_000, 60_000).load(workspace, private=True, today=TODAY)
    soul = next(f for f in files if f.name == "SOUL.md")
    assert soul.report.status == "missing"
    prompt = build_system_prompt(
        files, private=True, now=__import__("datetime").datetime.now(), run_info=""
    ).stable
    assert "## SOUL.md\n(missing" in prompt


def test_oversized_file_keeps_head_and_tail_with_a_marker(workspace):
    body = "".join(f"line {n:05d}\n" for n in range(5_000))  # 55,000 characters
    (workspace / "MEMORY.md").write_text(body)
    files = ContextFileLoader(10_000, 60_000).load(workspace, private=True, today=TODAY)
    memory = next(f for f in files if f.name == "MEMORY.md")
    assert memory.report.status == "truncated"
    assert memory.report.raw_chars == len(body)
    assert memory.text.startswith(body[:7_000])
    assert memory.text.endswith(body[-2_000:])
    assert 'read_file(path="MEMORY.md")' in memory.text
    assert len(memory.text) <= 10_000
    assert memory.report.injected_chars == len(memory.text)


def test_total_budget_limits_later_files(workspace):
    for name in BOOTSTRAP_FILES:
        (workspace / name).write_text("x" * 3_000)
    files = ContextFileLoader(5_000, 10_000).load(workspace, private=True, today=TODAY)
    injected = sum(f.report.injected_chars for f in files)
    assert injected <= 10_000
    statuses = {f.name: f.report.status for f in files}
    assert statuses["AGENTS.md"] == "loaded"
    assert statuses["HEARTBEAT.md"] == "over_budget"
    assert any(s == "truncated" for s in statuses.values())


def test_binary_and_non_utf8_files_are_reported(workspace):
    (workspace / "TOOLS.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (workspace / "SOUL.md").write_bytes(b"caf\xe9 latin-1")
    files = {
        f.name: f
        for f in ContextFileLoader(20_000, 60_000).load(workspace, private=True, today=TODAY)
    }
    assert files["TOOLS.md"].report.status == "unreadable"
    assert "binary" in files["TOOLS.md"].report.note
    assert files["SOUL.md"].report.status == "unreadable"
    assert "UTF-8" in files["SOUL.md"].report.note


def test_directory_in_place_of_a_file_is_unreadable_not_a_crash(workspace):
    (workspace / "TOOLS.md").unlink()
    (workspace / "TOOLS.md").mkdir()
    files = {
        f.name: f
        for f in ContextFileLoader(20_000, 60_000).load(workspace, private=True, today=TODAY)
    }
    assert files["TOOLS.md"].report.status == "unreadable"


def test_private_files_are_withheld_outside_private_sessions(workspace):
    # A group loads the persona and its own notes: nothing private, no TOOLS or HEARTBEAT.
    (workspace / "memory" / "2026-11-29.md").write_text("today")
    (workspace / "groups" / "g1").mkdir(parents=True)
    (workspace / "groups" / "g1" / "NOTES.md").write_text("group notes")
    loader = ContextFileLoader(20_000, 60_000)
    files = loader.load(workspace, private=False, today=TODAY, area="groups/g1")
    assert [f.name for f in files] == ["AGENTS.md", "SOUL.md", "IDENTITY.md", "groups/g1/NOTES.md"]
    assert files[-1].text == "group notes"
    # Asked for by name, private files are still withheld, never opened.
    names = ["USER.md", "MEMORY.md", "memory/2026-11-29.md", "TOOLS.md", "SOUL.md"]
    files = loader.load(workspace, private=False, today=TODAY, names=names, area="groups/g1")
    withheld = {f.name for f in files if f.report.status == "withheld"}
    assert withheld == {"USER.md", "MEMORY.md", "memory/2026-11-29.md", "TOOLS.md"}
    assert all(f.text == "" for f in files if f.name in withheld)


def test_hand_edits_are_seen_on_the_next_load_even_with_the_same_size(workspace):
    loader = ContextFileLoader(20_000, 60_000)
    path = workspace / "MEMORY.md"
    path.write_text("colour: blue\n")
    first = {f.name: f.text for f in loader.load(workspace, private=True, today=TODAY)}
    path.write_text("colour: pink\n")  # same size, probably the same timestamp tick
    second = {f.name: f.text for f in loader.load(workspace, private=True, today=TODAY)}
    assert "blue" in first["MEMORY.md"] and "pink" in second["MEMORY.md"]

    # An old, settled file may be served from cache; an in-place edit still shows up.
    old = time.time() - 60
    os.utime(path, (old, old))
    loader.load(workspace, private=True, today=TODAY)
    path.write_text("colour: teal\n")
    third = {f.name: f.text for f in loader.load(workspace, private=True, today=TODAY)}
    assert "teal" in third["MEMORY.md"]
