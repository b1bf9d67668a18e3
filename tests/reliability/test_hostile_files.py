"""Hostile files: a workspace's own git config never runs code; everything stays private.

A restored backup is someone else's bytes. Its `.git/config` can name a program git runs
(`core.fsmonitor`, a filter, a diff driver) and `.git/hooks/` holds programs git runs after
a commit (`--no-verify` skips only the pre-commit and commit-msg hooks).
"""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

from gateway.assembly.backup import backup, restore
from gateway.ops.versioning import Versioning
from gateway.workspace.seed import ensure_workspace


def _plant_hostile_git(ws: Path, marker: Path) -> None:
    with (ws / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}.fsmonitor #\n")
    hook = ws / ".git" / "hooks" / "post-commit"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {marker}.hook\n")
    hook.chmod(0o755)


def _planted(marker: Path) -> list[str]:
    return [p.name for p in marker.parent.glob(marker.name + ".*")]


async def test_a_workspace_git_config_never_runs_code_at_commit(tmp_path):
    versioning = Versioning()
    ws = ensure_workspace(tmp_path / "workspaces", "ana")
    await versioning.ensure_repo(ws)
    marker = tmp_path / "pwned"
    _plant_hostile_git(ws, marker)
    (ws / "MEMORY.md").write_text("- changed\n")
    assert await versioning.commit(ws, "turn")
    assert await versioning.log(ws) and await versioning.diff(ws)
    assert _planted(marker) == []


async def test_restore_drops_git_config_and_hooks_from_a_crafted_backup(tmp_path):
    versioning = Versioning()
    source = tmp_path / "elsewhere"
    ws = ensure_workspace(source, "ana")
    await versioning.ensure_repo(ws)
    marker = tmp_path / "pwned"
    _plant_hostile_git(ws, marker)
    archive = tmp_path / "crafted.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # crafted: written by hand, config included
        tar.add(ws, arcname="workspaces/ana")
        manifest = tmp_path / "manifest.json"
        manifest.write_text('{"format": "clawgate-backup", "version": 1, "workspaces": ["ana"]}')
        tar.add(manifest, arcname="manifest.json")
    root = tmp_path / "workspaces"
    restore(archive, root)
    restored = root / "ana"
    assert "fsmonitor" not in (restored / ".git" / "config").read_text()
    assert not any((restored / ".git" / "hooks").glob("*"))
    (restored / "MEMORY.md").write_text("- after restore\n")
    assert await versioning.commit(restored, "turn")
    assert len(await versioning.log(restored)) == 2  # history came along
    assert _planted(marker) == []
    # Our own backups do not carry them either.
    with tarfile.open(backup(tmp_path / "b.tar.gz", [ws]).output) as tar:
        names = tar.getnames()
    assert "workspaces/ana/.git/HEAD" in names
    assert not [n for n in names if n.endswith(".git/config") or "/.git/hooks/" in n]


def _loose_modes(root: Path) -> list[str]:
    """Everything under `root` that is not 0700 (directories) or 0600 (files; git's objects
    are 0400 by design, which is as private)."""
    loose = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink():
            continue
        want = (0o700,) if path.is_dir() else (0o600, 0o400)
        if mode not in want:
            loose.append(f"{path.relative_to(root)} {oct(mode)}")
    return loose


async def test_everything_under_the_workspaces_root_is_private_with_umask_022(
    anthropic_server, make_gateway, tmp_path
):
    from gateway.config.memory import build_memory_service

    old = os.umask(0o022)
    try:
        gateway, channel = await make_gateway(
            anthropic_server,
            owner="fakechat-alice",
            memory={"embedder": "none", "watch": False},
            memory_service=lambda settings: build_memory_service(settings.memory),
        )
        anthropic_server.reply_tool_call(
            "write_file", {"path": "memory/2026-11-30.md", "content": "- bought a boat\n"}
        )
        anthropic_server.reply_tool_call(
            "write_file", {"path": "notes/deep/idea.md", "content": "- an idea\n"}
        )
        anthropic_server.reply_tool_call("memory_search", {"query": "boat"})
        anthropic_server.reply_text("Noted.")
        await channel.inject("alice", "I bought a boat")
        await channel.wait_for(1)
        await gateway.lanes.drain()
        ws = tmp_path / "workspaces" / "fakechat-alice"
        assert (ws / ".recall" / "index.sqlite").exists() and (ws / ".git" / "objects").is_dir()
        assert await gateway.versioning.undo(ws)  # files restored by `memory undo`
        root = tmp_path / "workspaces"
        report = backup(
            tmp_path / "backups" / "b.tar.gz", [ws], state_db=root / ".gateway" / "state.db"
        )
        restore(report.output, tmp_path / "restored")
    finally:
        os.umask(old)
    assert (root / ".gateway" / "state.db").exists()
    assert _loose_modes(root) == []
    assert _loose_modes(tmp_path / "restored") == []
    assert stat.S_IMODE(report.output.stat().st_mode) == 0o600
