"""The group-readable files (memory/layout.py): a private context writes a group's area or a
persona file only with the owner present and no outside text in its context, by every tool
that writes, by every name that leads there (case aliases, a symlink), and is told why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.agent.tools.base import ToolContext
from gateway.agent.tools.corrections import MemoryCorrectTool
from gateway.agent.tools.files import file_tools
from gateway.agent.tools.quota import TurnBudget
from gateway.agent.tools.registry import ToolRegistry
from gateway.workspace.paths import PathRefused, SharedWriteRefused, resolve_in_workspace
from memory.layout import Access, is_group_readable, outside_source, write_refusal

AREA = "groups/telegram--1001"
WEB = "a web_fetch result"

# (path, group-readable?) : every group's area and the persona files, nothing else.
PATHS = [
    (f"{AREA}/NOTES.md", True),
    ("groups/other-chat/NOTES.md", True),  # another group's area
    ("groups/new-chat/inbox/x.md", True),
    ("groups/loose.md", True),  # anything under groups/ could become an area
    ("AGENTS.md", True),
    ("SOUL.md", True),
    ("IDENTITY.md", True),
    ("identity.md", True),
    ("Groups/x/NOTES.md", True),
    ("GROUPS/x/n.md", True),  # aliases
    ("MEMORY.md", False),
    ("USER.md", False),
    ("TOOLS.md", False),
    ("HEARTBEAT.md", False),
    ("BOOTSTRAP.md", False),
    ("notes/IDENTITY.md", False),
    ("notes/groups/x.md", False),
    ("memory/2026-03-02.md", False),
    ("skills/x/SKILL.md", False),
    ("groups-list.md", False),
]
CONTEXTS = {
    "owner, clean": (Access(True, attended=True), None),
    "owner, tainted": (Access(True, attended=True, outside=WEB), "holds text from outside"),
    "unattended": (Access(True), "no one is present"),
    "unattended, tainted": (Access(True, outside=WEB), "no one is present"),
}


@pytest.mark.parametrize(("path", "shared"), PATHS)
@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_the_rule_by_path_and_context(path: str, shared: bool, context: str) -> None:
    access, why = CONTEXTS[context]
    assert is_group_readable(path) is shared
    refusal = write_refusal(access, path)
    if not shared or why is None:
        assert refusal is None, refusal
    else:
        assert refusal is not None and why in refusal


def test_a_refusal_says_why_and_what_the_owner_can_do() -> None:
    tainted = write_refusal(Access(True, attended=True, outside=WEB), f"{AREA}/NOTES.md")
    assert tainted is not None
    assert "a group's area" in tainted and f"({WEB})" in tainted
    for advice in ("by hand or in the panel", "say it in the group", "fresh session (/new)"):
        assert advice in tainted
    persona = write_refusal(Access(True), "SOUL.md")
    assert persona is not None and "persona file" in persona and "heartbeat" in persona


def test_groups_keep_their_own_rule() -> None:
    group = Access(False, AREA)
    assert write_refusal(group, f"{AREA}/NOTES.md") is None  # its own area, as before
    assert write_refusal(group, "IDENTITY.md") is not None
    assert write_refusal(group, "groups/other-chat/NOTES.md") is not None


def test_what_others_wrote_is_named() -> None:
    assert outside_source(f"{AREA}/NOTES.md") == "a file a group wrote"
    assert outside_source("inbox/2026-03-02/minutes.txt.md") == "a received file"
    assert outside_source("Inbox/2026-03-02/x.md") == "a received file"
    for own in ("MEMORY.md", "notes/a.md", AREA, "groups", "inbox/2026-03-02"):
        assert outside_source(own) == "", own


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / AREA).mkdir(parents=True)
    (root / AREA / "NOTES.md").write_text("practice Thursday\n")
    (root / "IDENTITY.md").write_text("# Identity\n")
    (root / "MEMORY.md").write_text("# Memory\n- pin 4471\n")
    (root / "notes").mkdir()
    os.symlink(root / AREA / "NOTES.md", root / "notes" / "band.md")
    return root


def test_a_symlink_into_a_groups_area_is_judged_where_it_leads(ws: Path) -> None:
    with pytest.raises(SharedWriteRefused, match="outside"):
        resolve_in_workspace(
            ws, "notes/band.md", private=True, write=True, attended=True, outside=WEB
        )
    assert (
        resolve_in_workspace(ws, "notes/band.md", private=True, write=True, attended=True)
        == (ws / AREA / "NOTES.md").resolve()
    )


class Counted:
    def __init__(self) -> None:
        self.shared: list[str] = []

    def quota_refused(self, kind: str) -> None:
        return None

    def tool_bytes_written(self, count: int) -> None:
        return None

    def shared_write_refused(self, reason: str) -> None:
        self.shared.append(reason)


WRITES = [
    ("write_file", {"path": f"{AREA}/NOTES.md", "content": "pin 4471"}),
    ("append_file", {"path": f"{AREA}/NOTES.md", "content": "pin 4471"}),
    ("edit_file", {"path": f"{AREA}/NOTES.md", "old_text": "Thursday", "new_text": "4471"}),
    ("delete_file", {"path": f"{AREA}/NOTES.md"}),
    ("write_file", {"path": "notes/band.md", "content": "pin 4471"}),  # the symlink
    ("write_file", {"path": "IDENTITY.md", "content": "pin 4471"}),
    ("edit_file", {"path": "IDENTITY.md", "old_text": "Identity", "new_text": "4471"}),
    ("delete_file", {"path": "IDENTITY.md"}),
    ("write_file", {"path": "groups/new-chat/NOTES.md", "content": "pin 4471"}),
]


async def test_every_file_tool_is_refused_and_counted_in_a_tainted_dm(ws: Path) -> None:
    counter = Counted()
    registry = ToolRegistry([*file_tools(), MemoryCorrectTool()])
    ctx = ToolContext(
        ws, "telegram-42:dm", True, attended=True, outside=WEB, budget=TurnBudget(counter=counter)
    )
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    for name, args in WRITES:
        outcome = await registry.run(name, args, ctx)
        assert outcome.is_error and "nothing was written" in outcome.text, (name, outcome)
    # memory_correct only ever changes memory files: refused before it looks.
    corrected = await registry.run(
        "memory_correct",
        {"path": f"{AREA}/NOTES.md", "old_text": "practice", "action": "delete"},
        ctx,
    )
    assert corrected.is_error
    assert {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()} == before
    assert counter.shared == ["outside_text"] * (len(WRITES) + 1)
    # The owner's own files are still the owner's to change.
    fine = await registry.run("append_file", {"path": "MEMORY.md", "content": "- new"}, ctx)
    assert not fine.is_error


async def test_the_owner_present_and_clean_writes_them(ws: Path) -> None:
    registry = ToolRegistry(file_tools())
    ctx = ToolContext(ws, "telegram-42:dm", True, attended=True)
    for name, args in reversed(WRITES[:3]):  # edit, append, write
        outcome = await registry.run(name, args, ctx)
        assert not outcome.is_error, (name, outcome)


async def test_reading_a_groups_file_or_a_received_one_marks_the_result(ws: Path) -> None:
    (ws / "inbox" / "2026-03-02").mkdir(parents=True)
    (ws / "inbox" / "2026-03-02" / "minutes.txt.md").write_text("minutes\n")
    registry = ToolRegistry(file_tools())
    owner = ToolContext(ws, "telegram-42:dm", True, attended=True)
    group = await registry.run("read_file", {"path": f"{AREA}/NOTES.md"}, owner)
    received = await registry.run("read_file", {"path": "inbox/2026-03-02/minutes.txt.md"}, owner)
    own = await registry.run("read_file", {"path": "MEMORY.md"}, owner)
    listing = await registry.run("list_files", {"path": "groups", "recursive": True}, owner)
    folders = await registry.run("list_files", {"path": "."}, owner)
    assert (group.untrusted, received.untrusted) == ("a file a group wrote", "a received file")
    assert own.untrusted == "" and folders.untrusted == ""  # `groups/` is the gateway's name
    assert listing.untrusted == "a file a group wrote"  # names a group chose
    # In the group itself its own notes are its own business (it writes only there anyway).
    in_group = ToolContext(ws, "telegram:group:-1001", False, area=AREA)
    assert (await registry.run("read_file", {"path": f"{AREA}/NOTES.md"}, in_group)).untrusted == ""


def test_the_panel_and_the_command_line_are_the_owners_hand(ws: Path) -> None:
    from gateway.panel.files import read_text, save_text, text_hash

    base = text_hash(read_text(ws, "IDENTITY.md", 100_000))
    save_text(ws, "IDENTITY.md", "# Identity\n- edited in the panel\n", base, 100_000)
    assert "panel" in (ws / "IDENTITY.md").read_text()
    with pytest.raises(PathRefused):  # the default is a context with no one present
        resolve_in_workspace(ws, "IDENTITY.md", private=True, write=True)
