"""File tools, the registry and atomic writes, exercised the way the agent loop calls them."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gateway.agent.conversation import ToolSpec
from gateway.agent.tools import ToolContext, ToolError, ToolOutcome, ToolRegistry, file_tools
from gateway.agent.tools.args import run_checked
from gateway.agent.tools.files import MAX_LIST_ENTRIES, MAX_READ_CHARS
from memory.atomic import atomic_write_bytes, atomic_write_text


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("alpha\nbeta\n")
    (ws / "USER.md").write_text("name: Ada\n")
    (ws / "MEMORY.md").write_text("likes tea\n")
    (ws / "memory").mkdir()
    (ws / "memory" / "2026-01-01.md").write_text("day one\n")
    (ws / "sessions").mkdir()
    (ws / "sessions" / "x.jsonl").write_text("{}\n")
    (ws / ".git").mkdir()
    (tmp_path / "outside.txt").write_text("secret\n")
    return ws


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="dm:owner", private=True, max_file_bytes=1000)


@pytest.fixture
def group(ws: Path) -> ToolContext:
    (ws / "groups" / "g1").mkdir(parents=True)
    (ws / "groups" / "g1" / "n.md").write_text("group note\n")
    return ToolContext(
        workspace=ws, session_key="group:1", private=False, max_file_bytes=1000, area="groups/g1"
    )


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(file_tools())


async def call(name: str, ctx: ToolContext, **args: Any) -> str:
    tool = {t.spec.name: t for t in file_tools()}[name]
    return await run_checked(tool, args, ctx)


async def refused(name: str, ctx: ToolContext, match: str, **args: Any) -> str:
    with pytest.raises(ToolError, match=match) as info:
        await call(name, ctx, **args)
    return str(info.value)


def no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*.tmp")]


# --- specs ---------------------------------------------------------------------------------


def test_specs_are_complete() -> None:
    names = [t.spec.name for t in file_tools()]
    assert names == [
        "read_file",
        "write_file",
        "edit_file",
        "append_file",
        "list_files",
        "delete_file",
    ]
    for tool in file_tools():
        spec = tool.spec
        assert isinstance(spec, ToolSpec)
        assert len(spec.description) > 40
        params = spec.parameters
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop.get("description")


# --- read_file -----------------------------------------------------------------------------


async def test_read_whole_file(ctx: ToolContext) -> None:
    assert await call("read_file", ctx, path="notes/a.md") == "alpha\nbeta\n"


async def test_read_paged(ctx: ToolContext, ws: Path) -> None:
    (ws / "long.md").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call("read_file", ctx, path="long.md", start_line=3, max_lines=2)
    assert out.startswith("line 3\nline 4\n")
    assert "lines 3-4 of 10" in out
    assert "start_line=5" in out
    tail = await call("read_file", ctx, path="long.md", start_line=9)
    assert tail.startswith("line 9\nline 10\n")
    assert "end of file" in tail
    await refused("read_file", ctx, "past the end", path="long.md", start_line=11)


async def test_read_caps_characters_by_whole_lines(ws: Path) -> None:
    big = ToolContext(ws, "dm", True, max_file_bytes=10_000_000)
    line = "x" * 999
    (ws / "wide.md").write_text((line + "\n") * 200)
    out = await call("read_file", big, path="wide.md")
    assert len(out) <= MAX_READ_CHARS + 200
    assert "start_line=91" in out
    (ws / "one.md").write_text("y" * (MAX_READ_CHARS + 10))
    out = await call("read_file", big, path="one.md")
    assert "cut after" in out


async def test_read_empty_file(ctx: ToolContext, ws: Path) -> None:
    (ws / "empty.md").write_text("")
    assert "empty" in await call("read_file", ctx, path="empty.md")


async def test_read_refusals(ctx: ToolContext, ws: Path) -> None:
    (ws / "big.md").write_text("x" * 1001)
    (ws / "bin.dat").write_bytes(b"abc\x00def")
    (ws / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    await refused("read_file", ctx, "1000-byte limit", path="big.md")
    await refused("read_file", ctx, "binary", path="bin.dat")
    await refused("read_file", ctx, "not UTF-8", path="latin1.md")
    await refused("read_file", ctx, "no such file", path="missing.md")
    await refused("read_file", ctx, "directory", path="notes")
    await refused("read_file", ctx, "outside", path="../outside.txt")


async def test_read_argument_errors(ctx: ToolContext) -> None:
    await refused("read_file", ctx, "missing required argument 'path'")
    await refused("read_file", ctx, "'path' must be a string", path=3)
    await refused("read_file", ctx, "'start_line' must be an integer", path="x", start_line="2")
    await refused("read_file", ctx, "'start_line' must be an integer", path="x", start_line=True)
    await refused("read_file", ctx, "between 1", path="x", max_lines=0)
    await refused("read_file", ctx, "unknown argument", path="x", lines=3)


async def test_read_private_only_in_private(ctx: ToolContext, group: ToolContext) -> None:
    assert await call("read_file", ctx, path="MEMORY.md") == "likes tea\n"
    assert await call("read_file", ctx, path="sessions/x.jsonl") == "{}\n"
    for p in ("MEMORY.md", "USER.md", "memory/2026-01-01.md", "sessions/x.jsonl", "Memory.md"):
        await refused("read_file", group, "private", path=p)


# --- write_file ----------------------------------------------------------------------------


async def test_write_creates_with_parents(ctx: ToolContext, ws: Path) -> None:
    out = await call("write_file", ctx, path="projects/new/plan.md", content="héllo\n")
    assert out == "wrote 6 characters to projects/new/plan.md"
    assert (ws / "projects" / "new" / "plan.md").read_bytes() == "héllo\n".encode()
    assert no_temp_files(ws)


async def test_write_overwrites_exactly(ctx: ToolContext, ws: Path) -> None:
    await call("write_file", ctx, path="notes/a.md", content="a\r\nb")
    assert (ws / "notes" / "a.md").read_bytes() == b"a\r\nb"
    assert await call("read_file", ctx, path="notes/a.md") == "a\r\nb"


async def test_write_through_inside_symlink_keeps_link(ctx: ToolContext, ws: Path) -> None:
    (ws / "link.md").symlink_to(ws / "notes" / "a.md")
    await call("write_file", ctx, path="link.md", content="via link\n")
    assert (ws / "link.md").is_symlink()
    assert (ws / "notes" / "a.md").read_text() == "via link\n"


async def test_write_refusals(ctx: ToolContext, group: ToolContext, ws: Path) -> None:
    await refused("write_file", ctx, "1000-byte limit", path="x.md", content="é" * 501)
    await refused("write_file", ctx, "NUL", path="x.md", content="a\x00b")
    await refused("write_file", ctx, "Unicode", path="x.md", content="a\ud800")
    await refused("write_file", ctx, "read-only", path="sessions/x.jsonl", content="{}")
    await refused("write_file", ctx, "directory", path="notes", content="x")
    await refused("write_file", ctx, "a parent is a file", path="notes/a.md/x.md", content="x")
    await refused("write_file", ctx, "hidden", path=".git/config", content="x")
    await refused("write_file", ctx, "absolute", path="/tmp/x", content="x")
    await refused("write_file", group, "private", path="MEMORY.md", content="x")
    await refused("write_file", group, "private", path="memory/new.md", content="x")
    await refused("write_file", ctx, "missing required argument 'content'", path="x.md")
    assert (ws / "MEMORY.md").read_text() == "likes tea\n"
    assert not (ws / "x.md").exists()


async def test_write_exactly_at_limit(ctx: ToolContext, ws: Path) -> None:
    await call("write_file", ctx, path="full.md", content="x" * 1000)
    assert (ws / "full.md").stat().st_size == 1000


# --- edit_file -----------------------------------------------------------------------------


async def test_edit_single(ctx: ToolContext, ws: Path) -> None:
    out = await call("edit_file", ctx, path="notes/a.md", old_text="beta", new_text="gamma")
    assert out == "replaced 1 occurrence in notes/a.md"
    assert (ws / "notes" / "a.md").read_text() == "alpha\ngamma\n"


async def test_edit_not_found_and_multiple(ctx: ToolContext, ws: Path) -> None:
    (ws / "rep.md").write_text("x y x y x\n")
    msg = await refused("edit_file", ctx, "not found", path="rep.md", old_text="z", new_text="w")
    assert "rep.md" in msg
    msg = await refused(
        "edit_file", ctx, "matches 3 times", path="rep.md", old_text="x", new_text="w"
    )
    assert "replace_all" in msg
    assert (ws / "rep.md").read_text() == "x y x y x\n"
    out = await call("edit_file", ctx, path="rep.md", old_text="x", new_text="w", replace_all=True)
    assert out == "replaced 3 occurrences in rep.md"
    assert (ws / "rep.md").read_text() == "w y w y w\n"


async def test_edit_argument_errors(ctx: ToolContext) -> None:
    await refused(
        "edit_file", ctx, "must not be empty", path="notes/a.md", old_text="", new_text="x"
    )
    await refused("edit_file", ctx, "identical", path="notes/a.md", old_text="a", new_text="a")
    await refused(
        "edit_file",
        ctx,
        "true or false",
        path="notes/a.md",
        old_text="a",
        new_text="b",
        replace_all="yes",
    )
    await refused(
        "edit_file", ctx, "missing required argument 'new_text'", path="notes/a.md", old_text="a"
    )
    await refused("edit_file", ctx, "no such file", path="nope.md", old_text="a", new_text="b")


async def test_edit_result_size_limit(ctx: ToolContext, ws: Path) -> None:
    (ws / "grow.md").write_text("a" * 10)
    await refused(
        "edit_file",
        ctx,
        "byte limit",
        path="grow.md",
        old_text="a",
        new_text="b" * 200,
        replace_all=True,
    )
    assert (ws / "grow.md").read_text() == "a" * 10


# --- append_file ---------------------------------------------------------------------------


async def test_append_adds_newline_and_creates(ctx: ToolContext, ws: Path) -> None:
    (ws / "log.md").write_text("first")
    await call("append_file", ctx, path="log.md", content="second\n")
    assert (ws / "log.md").read_text() == "first\nsecond\n"
    await call("append_file", ctx, path="log.md", content="third\n")
    assert (ws / "log.md").read_text() == "first\nsecond\nthird\n"
    out = await call("append_file", ctx, path="new/fresh.md", content="hi")
    assert "new/fresh.md" in out
    assert (ws / "new" / "fresh.md").read_text() == "hi"
    assert no_temp_files(ws)


async def test_append_limits(ctx: ToolContext, group: ToolContext, ws: Path) -> None:
    (ws / "almost.md").write_text("x" * 995)
    await refused("append_file", ctx, "byte limit", path="almost.md", content="yyyyyy")
    assert (ws / "almost.md").read_text() == "x" * 995
    await refused("append_file", ctx, "must not be empty", path="almost.md", content="")
    await refused("append_file", ctx, "read-only", path="sessions/x.jsonl", content="{}")
    await refused("append_file", group, "private", path="memory/2026-01-01.md", content="x")
    (ws / "bin.dat").write_bytes(b"\x00")
    await refused("append_file", ctx, "binary", path="bin.dat", content="x")


async def test_concurrent_appends_lose_nothing(ctx: ToolContext, ws: Path) -> None:
    await asyncio.gather(
        *(call("append_file", ctx, path="many.md", content=f"{i}\n") for i in range(20))
    )
    assert sorted((ws / "many.md").read_text().split()) == sorted(str(i) for i in range(20))


# --- list_files ----------------------------------------------------------------------------


async def test_list_root_private(ctx: ToolContext) -> None:
    out = await call("list_files", ctx)
    assert "MEMORY.md  (10 bytes)" in out
    assert "memory/" in out.splitlines()
    assert "notes/" in out.splitlines()
    assert ".git" not in out


async def test_list_hides_private_when_not_private(group: ToolContext, ws: Path) -> None:
    # A group sees its own area and the persona files, nothing else of the owner's.
    (ws / "AGENTS.md").write_text("be kind\n")
    (ws / "groups" / "g1" / "alias.md").symlink_to(ws / "MEMORY.md")
    (ws / "groups" / "g1" / "out.md").symlink_to(ws.parent / "outside.txt")
    (ws / "groups" / "g2").mkdir()
    out = await call("list_files", group, recursive=True)
    lines = out.splitlines()
    assert "groups/g1/n.md  (11 bytes)" in lines
    assert "AGENTS.md  (8 bytes)" in lines
    for hidden in (
        "MEMORY",
        "USER",
        "memory",
        "sessions",
        ".git",
        "alias",
        "out.md",
        "notes",
        "g2",
    ):
        assert hidden not in out, hidden
    await refused("list_files", group, "private", path="memory")
    await refused("list_files", group, "only groups/g1/", path="notes")


async def test_list_recursive_and_subdir(ctx: ToolContext) -> None:
    out = await call("list_files", ctx, path="notes")
    assert out.splitlines() == ["Contents of notes/:", "notes/a.md  (11 bytes)"]
    out = await call("list_files", ctx, recursive=True)
    assert "memory/2026-01-01.md  (8 bytes)" in out
    assert "sessions/x.jsonl  (3 bytes)" in out


async def test_list_errors_and_empty(ctx: ToolContext, ws: Path) -> None:
    (ws / "void").mkdir()
    assert "empty" in await call("list_files", ctx, path="void")
    await refused("list_files", ctx, "no such folder", path="nowhere")
    await refused("list_files", ctx, "is a file", path="notes/a.md")
    await refused("list_files", ctx, "true or false", recursive=1)


async def test_list_is_bounded(ctx: ToolContext, ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(MAX_LIST_ENTRIES + 20):
        (many / f"f{i:04d}.md").write_text("")
    out = await call("list_files", ctx, path="many")
    lines = out.splitlines()
    assert len(lines) == MAX_LIST_ENTRIES + 2
    assert "stopped after" in lines[-1]


async def test_list_does_not_follow_dir_symlink_loops(ctx: ToolContext, ws: Path) -> None:
    (ws / "notes" / "self").symlink_to(ws / "notes", target_is_directory=True)
    out = await call("list_files", ctx, recursive=True)
    assert "notes/self/" in out.splitlines()
    assert "notes/self/a.md" not in out


# --- delete_file ---------------------------------------------------------------------------


async def test_delete_moves_to_trash_and_is_recoverable(ctx: ToolContext, ws: Path) -> None:
    (ws / "BOOTSTRAP.md").write_text("first run\n")
    out = await call("delete_file", ctx, path="BOOTSTRAP.md")
    assert not (ws / "BOOTSTRAP.md").exists()
    trashed = list((ws / ".trash").rglob("BOOTSTRAP.md"))
    assert len(trashed) == 1
    assert trashed[0].read_text() == "first run\n"
    assert trashed[0].relative_to(ws).as_posix() in out
    # Restoring is a plain rename back.
    trashed[0].rename(ws / "BOOTSTRAP.md")
    assert (ws / "BOOTSTRAP.md").read_text() == "first run\n"


async def test_delete_keeps_relative_path_and_never_overwrites_trash(
    ctx: ToolContext, ws: Path
) -> None:
    for content in ("one", "two"):
        (ws / "notes" / "tmp.md").write_text(content)
        await call("delete_file", ctx, path="notes/tmp.md")
    trashed = sorted((ws / ".trash").rglob("tmp.md"))
    assert sorted(p.read_text() for p in trashed) == ["one", "two"]
    assert all(p.parent.name == "notes" for p in trashed)


async def test_delete_symlink_removes_link_not_target(ctx: ToolContext, ws: Path) -> None:
    (ws / "link.md").symlink_to(ws / "notes" / "a.md")
    await call("delete_file", ctx, path="link.md")
    assert not (ws / "link.md").is_symlink()
    assert (ws / "notes" / "a.md").read_text() == "alpha\nbeta\n"


async def test_delete_refusals(ctx: ToolContext, group: ToolContext, ws: Path) -> None:
    await refused("delete_file", ctx, "folder", path="notes")
    await refused("delete_file", ctx, "no such file", path="ghost.md")
    await refused("delete_file", ctx, "read-only", path="sessions/x.jsonl")
    await refused("delete_file", group, "private", path="MEMORY.md")
    await refused("delete_file", ctx, "hidden", path=".trash")
    await refused("delete_file", ctx, "outside", path="../outside.txt")
    assert (ws / "MEMORY.md").exists()
    assert (ws / "sessions" / "x.jsonl").exists()


# --- atomic writes -------------------------------------------------------------------------


def test_atomic_write_replace_failure_keeps_old(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "MEMORY.md"
    target.write_text("old\n")

    def boom(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


async def test_tool_write_failure_keeps_old(ctx: ToolContext, ws: Path, monkeypatch) -> None:
    def boom(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    await refused("write_file", ctx, "No space left", path="notes/a.md", content="new")
    await refused("append_file", ctx, "No space left", path="notes/a.md", content="new")
    monkeypatch.undo()
    assert (ws / "notes" / "a.md").read_text() == "alpha\nbeta\n"
    assert sorted(p.name for p in (ws / "notes").iterdir()) == ["a.md"]


def test_atomic_write_keeps_owner_bits_and_drops_the_rest(tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    target.write_text("x")
    target.chmod(0o640)
    atomic_write_bytes(target, b"y")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # never group-readable
    target.chmod(0o400)
    atomic_write_bytes(target, b"z")
    assert stat.S_IMODE(target.stat().st_mode) == 0o400  # read-only stays read-only
    assert target.read_bytes() == b"z"


def test_atomic_write_new_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "n.md", "hé")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "n.md").stat().st_mode) == 0o600
    assert (tmp_path / "n.md").read_bytes() == "hé".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]


# --- registry ------------------------------------------------------------------------------


class _Echo:
    spec = ToolSpec("echo", "Echo text back for tests.", {"type": "object", "properties": {}})

    def __init__(self, result: Any = "ok", exc: BaseException | None = None) -> None:
        self.result, self.exc = result, exc

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if self.exc is not None:
            raise self.exc
        return self.result


async def test_registry_runs_tools(registry: ToolRegistry, ctx: ToolContext) -> None:
    assert registry.names()[0] == "read_file"
    assert [s.name for s in registry.specs()] == registry.names()
    outcome = await registry.run("read_file", {"path": "notes/a.md"}, ctx)
    assert outcome == ToolOutcome("alpha\nbeta\n", False)


async def test_registry_errors(registry: ToolRegistry, ctx: ToolContext) -> None:
    unknown = await registry.run("rm_rf", {}, ctx)
    assert unknown.is_error
    assert "read_file" in unknown.text and "delete_file" in unknown.text
    refused_ = await registry.run("read_file", {"path": "../outside.txt"}, ctx)
    assert refused_.is_error and "outside" in refused_.text
    bad_args = await registry.run("read_file", ["x"], ctx)  # type: ignore[arg-type]
    assert bad_args.is_error


async def test_registry_contains_crashes(ctx: ToolContext, caplog) -> None:
    registry = ToolRegistry([_Echo(exc=KeyError("boom"))])
    with caplog.at_level(logging.ERROR):
        outcome = await registry.run("echo", {}, ctx)
    assert outcome == ToolOutcome("internal error in tool echo: KeyError", True)
    assert "echo" in caplog.text
    wrong = await ToolRegistry([_Echo(result=123)]).run("echo", {}, ctx)
    assert wrong.is_error


async def test_registry_lets_cancellation_through(ctx: ToolContext) -> None:
    with pytest.raises(asyncio.CancelledError):
        await ToolRegistry([_Echo(exc=asyncio.CancelledError())]).run("echo", {}, ctx)


async def test_registry_caps_output(ctx: ToolContext) -> None:
    outcome = await ToolRegistry([_Echo(result="x" * 150_000)]).run("echo", {}, ctx)
    assert not outcome.is_error
    assert outcome.text.startswith("x" * 100_000 + "\n[output truncated")
    assert "150000" in outcome.text


def test_registry_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        ToolRegistry([_Echo(), _Echo()])
