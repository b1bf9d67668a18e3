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

from gateway.ops.backup import backup, restore
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
