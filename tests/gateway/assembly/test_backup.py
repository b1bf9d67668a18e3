"""Backup of a live workspace, restore that refuses to clobber, unsafe archives, clone."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

from gateway.assembly.backup import BackupError, backup, clone, restore
from gateway.cli.main import main


def tree(root: Path, skip: tuple[str, ...] = (".recall",)) -> dict[str, str]:
    """relative path -> content hash (SQLite files: hash of their rows)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel.parts[0] in skip or path.name.endswith(("-wal", "-shm")):
            continue
        if path.read_bytes()[:16] == b"SQLite format 3\x00":
            db = sqlite3.connect(path)
            rows = db.execute("SELECT * FROM notes ORDER BY id").fetchall()
            db.close()
            found[str(rel)] = repr(rows)
        else:
            found[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def live_workspace(root: Path, name: str = "ana") -> tuple[Path, sqlite3.Connection]:
    ws = root / name
    (ws / "memory").mkdir(parents=True)
    (ws / "sessions").mkdir()
    (ws / "MEMORY.md").write_text("- likes tea\n")
    (ws / "memory" / "2026-01-02.md").write_text("- met Ben\n")
    (ws / "sessions" / "ana_dm.jsonl").write_text('{"role": "user", "text": "hi"}\n')
    (ws / ".recall").mkdir()
    (ws / ".recall" / "index.sqlite").write_bytes(b"derived")
    # A database in WAL mode with uncheckpointed writes held open, as a running gateway has.
    db = sqlite3.connect(ws / "tasks.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.executemany("INSERT INTO notes (text) VALUES (?)", [(f"n{i}",) for i in range(50)])
    db.commit()
    return ws, db


def test_backup_of_a_live_workspace_restores_to_an_identical_tree(tmp_path):
    ws, db = live_workspace(tmp_path / "workspaces")
    assert (ws / "tasks.sqlite-wal").stat().st_size > 0  # the rows live in the WAL for now
    try:
        report = backup(tmp_path / "out" / "b.tar.gz", [ws])
        assert report.databases == 1 and report.workspaces == ["ana"]
        with tarfile.open(tmp_path / "out" / "b.tar.gz") as tar:
            names = tar.getnames()
        assert not any(".recall" in n or n.endswith("-wal") for n in names)

        restored = restore(tmp_path / "out" / "b.tar.gz", tmp_path / "elsewhere")
        assert restored.workspaces == ["ana"]
        assert tree(tmp_path / "elsewhere" / "ana") == tree(ws)
    finally:
        db.close()


def test_restore_refuses_to_clobber_and_force_moves_the_old_one_aside(tmp_path):
    root = tmp_path / "workspaces"
    ws, db = live_workspace(root)
    db.close()
    archive = tmp_path / "b.tar.gz"
    backup(archive, [ws])
    (ws / "MEMORY.md").write_text("- changed since the backup\n")

    with pytest.raises(BackupError, match="refusing to overwrite"):
        restore(archive, root)
    assert (ws / "MEMORY.md").read_text() == "- changed since the backup\n"

    assert main(["restore", str(archive), "--root", str(root)]) == 2  # --force would do

    report = restore(archive, root, force=True)
    assert (ws / "MEMORY.md").read_text() == "- likes tea\n"
    [aside] = report.moved_aside
    assert aside.parent == root / ".trash"
    assert (aside / "MEMORY.md").read_text() == "- changed since the backup\n"

    restore(archive, root, rename="ana-copy")
    assert (root / "ana-copy" / "MEMORY.md").read_text() == "- likes tea\n"


def _archive_with(tmp_path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        manifest = json.dumps({"format": "clawgate-backup", "version": 1}).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


@pytest.mark.parametrize(
    "name", ["workspaces/ana/../../escape.md", "/etc/evil", "workspaces/../x.md", "elsewhere/x.md"]
)
def test_restore_refuses_paths_outside_the_root(tmp_path, name):
    archive = _archive_with(tmp_path, tarfile.TarInfo(name), b"boom")
    with pytest.raises(BackupError, match="refusing archive"):
        restore(archive, tmp_path / "root")
    assert not (tmp_path / "escape.md").exists()
    assert not (tmp_path / "root").exists() or not any((tmp_path / "root").iterdir())


def test_restore_refuses_links(tmp_path):
    link = tarfile.TarInfo("workspaces/ana/MEMORY.md")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(BackupError, match="link"):
        restore(_archive_with(tmp_path, link), tmp_path / "root")


def test_backup_all_includes_the_state_database_and_cli_round_trip(tmp_path, monkeypatch, capsys):
    root = tmp_path / "workspaces"
    live_workspace(root, "ana")[1].close()
    live_workspace(root, "ben")[1].close()
    (root / ".gateway").mkdir()
    state = sqlite3.connect(root / ".gateway" / "state.db")
    state.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    state.execute("INSERT INTO notes (text) VALUES ('approved ana')")
    state.commit()
    state.close()
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(root))

    assert main(["backup", "--all", "--output", str(tmp_path / "all.tar.gz")]) == 0
    assert "2 workspace(s)" in capsys.readouterr().out
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "new-root"))
    assert main(["restore", str(tmp_path / "all.tar.gz")]) == 0
    new_root = tmp_path / "new-root"
    assert tree(new_root / "ana") == tree(root / "ana")
    assert tree(new_root / "ben") == tree(root / "ben")
    assert tree(new_root / ".gateway") == tree(root / ".gateway")


def test_clone_copies_the_assistant_under_a_new_name(tmp_path):
    root = tmp_path / "workspaces"
    ws, db = live_workspace(root)
    db.close()
    (ws / ".clawgate-workspace").write_text('{"person": "ana"}\n')
    target = clone(root, "ana", "ana-work", sessions=False)
    assert (target / "MEMORY.md").read_text() == "- likes tea\n"
    assert not any((target / "sessions").iterdir())
    assert not (target / ".recall").exists()
    marker = json.loads((target / ".clawgate-workspace").read_text())
    assert marker["person"] == "ana-work" and marker["cloned_from"] == "ana"
    with pytest.raises(BackupError, match="already exists"):
        clone(root, "ana", "ana-work")
