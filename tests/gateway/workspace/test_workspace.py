"""Workspaces are seeded once from templates and never overwrite the person's files."""

from __future__ import annotations

import pytest

from gateway.workspace.seed import BOOTSTRAP_FILES, WorkspaceError, ensure_workspace


def test_first_contact_creates_every_template(tmp_path):
    workspace = ensure_workspace(tmp_path, "quinn")
    for name in BOOTSTRAP_FILES:
        assert (workspace / name).read_text().strip()
    assert (workspace / "memory").is_dir()
    assert (
        "never take destructive actions without confirmation"
        in (workspace / "AGENTS.md").read_text().lower()
    )
    heartbeat = (workspace / "HEARTBEAT.md").read_text()
    body = heartbeat.split("-->")[-1].strip()
    assert body == "", "HEARTBEAT.md must hold only comments and headings by default"
    assert not [p for p in workspace.iterdir() if p.name.endswith(".tmp")]


def test_existing_files_are_never_overwritten(tmp_path):
    workspace = tmp_path / "quinn"
    workspace.mkdir()
    (workspace / "SOUL.md").write_text("my own soul")
    ensure_workspace(tmp_path, "quinn")
    assert (workspace / "SOUL.md").read_text() == "my own soul"
    assert (workspace / "AGENTS.md").exists()


def test_a_deleted_bootstrap_file_does_not_come_back(tmp_path):
    workspace = ensure_workspace(tmp_path, "quinn")
    (workspace / "BOOTSTRAP.md").unlink()
    ensure_workspace(tmp_path, "quinn")
    assert not (workspace / "BOOTSTRAP.md").exists()


@pytest.mark.parametrize("person", ["", "..", "../x", "a/b", ".hidden", "x" * 200])
def test_unsafe_person_ids_are_refused(tmp_path, person):
    with pytest.raises(WorkspaceError):
        ensure_workspace(tmp_path, person)
