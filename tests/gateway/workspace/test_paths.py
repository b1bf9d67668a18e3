"""Workspace confinement: every way a model-supplied path could escape or reach private memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.agent.tools.base import ToolError
from gateway.workspace.paths import (
    PRIVATE_DIRS,
    PRIVATE_FILES,
    PathRefused,
    is_hidden_relpath,
    is_private_relpath,
    resolve_in_workspace,
)


def _make_workspace(base: Path) -> tuple[Path, Path]:
    """A workspace with the usual files, plus an `outside` dir next to it holding a secret."""
    ws = base / "ws"
    ws.mkdir()
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("a\n")
    (ws / "b.md").write_text("b\n")
    (ws / "USER.md").write_text("user\n")
    (ws / "MEMORY.md").write_text("memory\n")
    (ws / "memory").mkdir()
    (ws / "memory" / "2026-01-01.md").write_text("day\n")
    (ws / "sessions").mkdir()
    (ws / "sessions" / "x.jsonl").write_text("{}\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "groups" / "g").mkdir(parents=True)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    sibling = base / "ws2"
    sibling.mkdir()
    (sibling / "f").write_text("sibling\n")
    return ws, outside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return _make_workspace(tmp_path)[0]


AREA = "groups/g"  # a group's own writable area (memory.layout.group_area)


def resolve(ws: Path, p: str, *, private: bool = True, write: bool = False) -> Path:
    return resolve_in_workspace(ws, p, private=private, write=write, area=AREA)


def real(p: Path) -> Path:
    return Path(os.path.realpath(p))


# --- allowed -------------------------------------------------------------------------------


def test_relative_path_resolves_inside(ws: Path) -> None:
    assert resolve(ws, "notes/a.md") == real(ws) / "notes" / "a.md"


def test_dotdot_staying_inside_is_allowed(ws: Path) -> None:
    assert resolve(ws, "notes/../b.md") == real(ws) / "b.md"
    assert resolve(ws, "./notes/./a.md") == real(ws) / "notes" / "a.md"
    assert resolve(ws, "notes//a.md") == real(ws) / "notes" / "a.md"


def test_new_file_in_new_dir_is_allowed(ws: Path) -> None:
    assert resolve(ws, "new/deeper/file.md", write=True) == real(ws) / "new" / "deeper" / "file.md"


def test_workspace_root_is_allowed(ws: Path) -> None:
    assert resolve(ws, ".") == real(ws)


def test_unicode_names_are_allowed(ws: Path) -> None:
    assert resolve(ws, "notizen/äöü 日本.md") == real(ws) / "notizen" / "äöü 日本.md"


def test_symlink_inside_to_inside_is_allowed(ws: Path) -> None:
    (ws / "link.md").symlink_to(ws / "notes" / "a.md")
    (ws / "dirlink").symlink_to(ws / "notes", target_is_directory=True)
    assert resolve(ws, "link.md") == real(ws) / "notes" / "a.md"
    assert resolve(ws, "dirlink/a.md") == real(ws) / "notes" / "a.md"


def test_workspace_given_through_a_symlink(tmp_path: Path) -> None:
    ws, _ = _make_workspace(tmp_path)
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    assert resolve(alias, "b.md") == real(ws) / "b.md"


def test_private_files_allowed_when_private(ws: Path) -> None:
    for p in ("USER.md", "MEMORY.md", "memory/2026-01-01.md", "sessions/x.jsonl"):
        assert resolve(ws, p, private=True).is_file()
    assert resolve(ws, "MEMORY.md", private=True, write=True) == real(ws) / "MEMORY.md"


# --- refused: lexical ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "../x",
        "notes/../../x",
        "..",
        "/etc/passwd",
        "//server/share",
        "~/.ssh",
        "~",
        "~root/x",
        "C:\\x",
        "C:/x",
        "c:x",
        "\\\\server\\share",
        "notes\\a.md",
        "a\x00b",
        "a\nb",
        "a\tb",
        "a\x1bb",
        "a\x7fb",
        "a\x85b",
        "a\u2028b",
        "a\ud800b",
        ".git/config",
        ".index",
        ".trash/x",
        ".gateway",
        "notes/.hidden",
        "...",
        "x" * 2000,
    ],
)
def test_refused(ws: Path, bad: str) -> None:
    with pytest.raises(PathRefused):
        resolve(ws, bad)


def test_refusal_is_a_tool_error_with_readable_message(ws: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve(ws, "../x")
    message = str(info.value)
    assert "outside your workspace" in message
    assert "relative path" in message
    assert str(ws) not in message  # the real location is none of the model's business


def test_non_string_refused(ws: Path) -> None:
    with pytest.raises(PathRefused, match="string"):
        resolve_in_workspace(ws, 42, private=True, write=False)  # type: ignore[arg-type]


def test_sibling_with_common_prefix_refused(tmp_path: Path) -> None:
    ws, _ = _make_workspace(tmp_path)
    assert (tmp_path / "ws2" / "f").exists()
    with pytest.raises(PathRefused):
        resolve(ws, "../ws2/f")
    # ...also when the sibling is reached through a symlink inside the workspace.
    (ws / "sib").symlink_to(tmp_path / "ws2", target_is_directory=True)
    with pytest.raises(PathRefused):
        resolve(ws, "sib/f")


# --- refused: symlinks ---------------------------------------------------------------------


def test_file_symlink_to_outside_refused(tmp_path: Path) -> None:
    ws, outside = _make_workspace(tmp_path)
    (ws / "leak.md").symlink_to(outside / "secret.txt")
    with pytest.raises(PathRefused, match="outside"):
        resolve(ws, "leak.md")
    with pytest.raises(PathRefused):
        resolve(ws, "leak.md", write=True)


def test_dir_symlink_to_outside_refused(tmp_path: Path) -> None:
    ws, outside = _make_workspace(tmp_path)
    (ws / "out").symlink_to(outside, target_is_directory=True)
    for p in ("out", "out/secret.txt", "out/new.md", "out/new/deeper.md"):
        with pytest.raises(PathRefused):
            resolve(ws, p, write=True)


def test_dangling_symlink_to_outside_refused(tmp_path: Path) -> None:
    ws, outside = _make_workspace(tmp_path)
    (ws / "dangling.md").symlink_to(outside / "does-not-exist.md")
    (ws / "dangling-abs").symlink_to("/nonexistent-dir-for-test/x")
    for p in ("dangling.md", "dangling-abs", "dangling-abs/child"):
        with pytest.raises(PathRefused):
            resolve(ws, p, write=True)


def test_relative_symlink_escaping_refused(ws: Path) -> None:
    (ws / "notes" / "up").symlink_to("../../outside", target_is_directory=True)
    with pytest.raises(PathRefused):
        resolve(ws, "notes/up/secret.txt")


def test_symlink_loop_refused(ws: Path) -> None:
    (ws / "loop1").symlink_to(ws / "loop2")
    (ws / "loop2").symlink_to(ws / "loop1")
    for p in ("loop1", "loop1/x", "loop1/../../outside/secret.txt"):
        with pytest.raises(PathRefused):
            resolve(ws, p, write=True)


def test_symlink_into_hidden_dir_refused(ws: Path) -> None:
    (ws / "cfg").symlink_to(ws / ".git" / "config")
    with pytest.raises(PathRefused, match="hidden"):
        resolve(ws, "cfg")


# --- privacy -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "p",
    [
        "USER.md",
        "MEMORY.md",
        "./MEMORY.md",
        "memory/../MEMORY.md",
        "notes/../MEMORY.md",
        "Memory.md",
        "memory.md",
        "user.MD",
        "MEMORY.md.",
        "memory",
        "memory/",
        "memory/2026-01-01.md",
        "Memory/2026-01-01.md",
        "memory/new.md",
        "sessions",
        "sessions/x.jsonl",
        "SESSIONS/x.jsonl",
    ],
)
def test_private_refused_when_not_private(ws: Path, p: str) -> None:
    with pytest.raises(PathRefused, match="private"):
        resolve(ws, p, private=False)
    with pytest.raises(PathRefused):
        resolve(ws, p, private=False, write=True)


def test_private_via_symlink_refused(ws: Path) -> None:
    area = ws / AREA
    (area / "notes.md").symlink_to(ws / "MEMORY.md")
    (area / "mem").symlink_to(ws / "memory", target_is_directory=True)
    (area / "rel.md").symlink_to("../../USER.md")
    for p in ("notes.md", "mem/2026-01-01.md", "mem", "rel.md"):
        with pytest.raises(PathRefused, match="private"):
            resolve(ws, f"{AREA}/{p}", private=False)
    assert resolve(ws, f"{AREA}/notes.md", private=True) == real(ws) / "MEMORY.md"


def test_private_via_hard_link_refused(ws: Path) -> None:
    os.link(ws / "MEMORY.md", ws / AREA / "copy.md")
    os.link(ws / "memory" / "2026-01-01.md", ws / AREA / "day.md")
    for p in ("copy.md", "day.md"):
        with pytest.raises(PathRefused, match="private"):
            resolve(ws, f"{AREA}/{p}", private=False)
    assert resolve(ws, f"{AREA}/copy.md", private=True) == real(ws) / AREA / "copy.md"


def test_nested_private_names_are_ordinary(ws: Path) -> None:
    assert resolve(ws, f"{AREA}/MEMORY.md", private=False).name == "MEMORY.md"
    assert resolve(ws, f"{AREA}/memory/x.md", private=False, write=True).name == "x.md"


def test_ordinary_files_allowed_when_not_private(ws: Path) -> None:
    # Only the group's own area: the owner's ordinary notes are not the group's either.
    (ws / AREA / "a.md").write_text("a\n")
    assert resolve(ws, f"{AREA}/a.md", private=False) == real(ws) / AREA / "a.md"
    assert resolve(ws, f"{AREA}/memoryless.md", private=False, write=True).name == "memoryless.md"
    for p in ("notes/a.md", "b.md", "memoryless.md", "groups/other/x.md", "groups/g"):
        with pytest.raises(PathRefused, match="only groups/g/"):
            resolve(ws, p, private=False, write=True)
    for p in ("notes/a.md", "b.md", "groups/other/x.md", "GROUPS/g/a.md"):
        with pytest.raises(PathRefused, match="only groups/g/"):
            resolve(ws, p, private=False)


def test_sessions_read_only_even_when_private(ws: Path) -> None:
    assert resolve(ws, "sessions/x.jsonl", private=True).is_file()
    for p in ("sessions/x.jsonl", "sessions/new.jsonl", "Sessions/x.jsonl", "sessions"):
        with pytest.raises(PathRefused, match="read-only"):
            resolve(ws, p, private=True, write=True)
    (ws / "log").symlink_to(ws / "sessions", target_is_directory=True)
    with pytest.raises(PathRefused, match="read-only"):
        resolve(ws, "log/x.jsonl", private=True, write=True)


def test_is_private_relpath() -> None:
    assert PRIVATE_FILES == ("USER.md", "MEMORY.md", "INSTRUCTIONS.md")
    assert PRIVATE_DIRS == ("memory",)
    for p in (
        "INSTRUCTIONS.md",
        "instructions.md",
        "USER.md",
        "MEMORY.md",
        "memory",
        "memory/a.md",
        "./MEMORY.md",
        "Memory.md",
        "sessions/x.jsonl",
        Path("memory") / "x" / "y.md",
    ):
        assert is_private_relpath(p), p
    for p in (".", "notes/MEMORY.md", "memoryx/a.md", "README.md", "notes/memory/a.md"):
        assert not is_private_relpath(p), p


def test_is_hidden_relpath() -> None:
    assert is_hidden_relpath(".git/config")
    assert is_hidden_relpath("a/.trash/b")
    assert not is_hidden_relpath("a/b.md")
    assert not is_hidden_relpath(".")


# --- properties ----------------------------------------------------------------------------


_SEGMENTS = st.one_of(
    st.sampled_from(
        [
            ".",
            "..",
            "...",
            "a",
            "b.md",
            "notes",
            "~",
            "",
            "C:",
            "MEMORY.md",
            "memory",
            "sessions",
            "USER.md",
            ".git",
            "ws2",
            "outside",
            "secret.txt",
            "out",
            "leak.md",
            "dangling",
            "inner",
            "Memory.md",
            "groups",
            "g",
            "AGENTS.md",
            "x\x00",
            "é",
            "日本",
        ]
    ),
    st.text(min_size=0, max_size=8),
)
_SEPARATORS = st.sampled_from(["/", "\\", "//", "/./", "/../"])


@st.composite
def model_paths(draw: st.DrawFn) -> str:
    segments = draw(st.lists(_SEGMENTS, min_size=0, max_size=7))
    path = ""
    for i, seg in enumerate(segments):
        path += (draw(_SEPARATORS) if i else "") + seg
    prefix = draw(st.sampled_from(["", "", "", "/", "~/", "./", "../", "C:\\", "\\\\srv\\"]))
    return prefix + path


@pytest.fixture(scope="module")
def hostile_ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workspace full of traps: symlinks out (file, dir, dangling), in, and onto private data."""
    ws, outside = _make_workspace(tmp_path_factory.mktemp("prop"))
    (ws / "out").symlink_to(outside, target_is_directory=True)
    (ws / "leak.md").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "nope" / "deeper")
    (ws / "inner").symlink_to(ws / "notes", target_is_directory=True)
    (ws / "mem").symlink_to(ws / "memory", target_is_directory=True)
    (ws / "secret.txt").symlink_to("../outside/secret.txt")
    (ws / AREA / "m").symlink_to(ws / "memory", target_is_directory=True)
    (ws / AREA / "up").symlink_to(ws / "notes", target_is_directory=True)
    return ws, outside


def _assert_confined(ws: Path, path: str, *, private: bool, write: bool) -> None:
    try:
        result = resolve_in_workspace(ws, path, private=private, write=write, area=AREA)
    except PathRefused:
        return
    root = real(ws)
    assert result.is_absolute()
    assert result.is_relative_to(root), (path, result)
    assert real(result) == result, (path, result)  # nothing left for the OS to redirect
    rel = result.relative_to(root)
    assert not is_hidden_relpath(rel)
    if not private:
        assert not is_private_relpath(rel), (path, result)
        # Default deny: a group writes only inside its own area, reads only that, the
        # persona files and the folders leading to its area.
        inside = rel.parts[:2] == tuple(AREA.split("/"))
        if write:
            assert inside and len(rel.parts) > 2, (path, result)
        else:
            assert (
                inside
                or rel.parts in ((), ("groups",))
                or (len(rel.parts) == 1 and rel.parts[0] in ("AGENTS.md", "SOUL.md", "IDENTITY.md"))
            ), (path, result)
    if write:
        assert not rel.parts or rel.parts[0].casefold() != "sessions"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=model_paths(), private=st.booleans(), write=st.booleans())
def test_property_never_outside(
    hostile_ws: tuple[Path, Path], path: str, private: bool, write: bool
) -> None:
    ws, _ = hostile_ws
    _assert_confined(ws, path, private=private, write=write)


@settings(max_examples=300, deadline=None)
@given(path=st.text(max_size=40), private=st.booleans())
def test_property_arbitrary_text_never_outside(
    hostile_ws: tuple[Path, Path], path: str, private: bool
) -> None:
    ws, _ = hostile_ws
    _assert_confined(ws, path, private=private, write=False)


@settings(max_examples=200, deadline=None)
@given(tail=st.lists(st.sampled_from(["secret.txt", "..", ".", "x", "deeper", "nope"]), max_size=4))
def test_property_through_outside_symlinks(hostile_ws: tuple[Path, Path], tail: list[str]) -> None:
    ws, outside = hostile_ws
    for head in ("out", "leak.md", "dangling", "secret.txt"):
        path = "/".join([head, *tail])
        try:
            result = resolve_in_workspace(ws, path, private=True, write=True)
        except PathRefused:
            continue
        assert result.is_relative_to(real(ws))
        assert not result.is_relative_to(real(outside))


def test_workspace_inside_hidden_directory_works(tmp_path: Path) -> None:
    # Only components below the workspace count as hidden; ~/.clawgate/workspaces/x is fine.
    ws = tmp_path / ".clawgate" / "workspaces" / "ada"
    ws.mkdir(parents=True)
    (ws / "b.md").write_text("b\n")
    assert resolve(ws, "b.md") == real(ws) / "b.md"
