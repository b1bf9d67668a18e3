"""Backup, restore and clone of workspaces: consistent copies while the gateway runs.

An archive is a `.tar.gz` with this layout:

    manifest.json                 format, version, creation time, workspace names
    workspaces/<name>/...         each workspace, its `.git` history included
    gateway/state.db              the gateway state database (`--all` only)

Consistency without stopping the gateway: every file is read whole into memory before it is
written to the archive (Markdown files are replaced atomically, so a read sees the old or the
new file; transcripts only grow, and a torn last line is skipped on load), and every SQLite
database is copied through SQLite's online backup API, never as raw bytes. Left out: the
derived recall index (`.recall/`, rebuilt from the files on first use), SQLite `-wal`/`-shm`
side files, atomic-write temp files, git lock files and symlinks.

Restoring never overwrites anything unless forced: then the replaced workspace (or state
database) is moved to `<root>/.trash/` rather than deleted. Archive members are checked before
anything is extracted: absolute paths, `..`, links and device files are refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from gateway.ops.git_safety import GIT_UNSAFE_PARTS, reset_git_config
from gateway.stores.database import STATE_DIR, STATE_FILE
from gateway.workspace.seed import SEEDED_MARKER, SESSIONS_DIR, WorkspaceError, workspace_path
from memory.atomic import BrokenFile, loads_bounded, make_private_dirs, make_private_tree
from memory.layout import DERIVED_DIRS as LAYOUT_DERIVED_DIRS
from memory.layout import TRASH_DIR

FORMAT = "clawgate-backup"
VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1024 * 1024  # ours is a few hundred bytes
WORKSPACES = "workspaces"
STATE_ARCNAME = "gateway/state.db"
DERIVED_DIRS = set(LAYOUT_DERIVED_DIRS)
TRASH = TRASH_DIR
SQLITE_HEADER = b"SQLite format 3\x00"
SKIP_SUFFIXES = ("-wal", "-shm", "-journal", ".lock")


class BackupError(Exception):
    """A backup, restore or clone cannot proceed; `str()` says why and what to do."""


class BackupMistake(BackupError):
    """Not doable as asked: another name, --force, --as, --root or the right archive would
    do (the command line's exit status 2; a BackupError is a failure, 1)."""


@dataclass
class BackupReport:
    output: Path
    workspaces: list[str] = field(default_factory=list)
    files: int = 0
    databases: int = 0
    state: bool = False
    skipped: list[str] = field(default_factory=list)


@dataclass
class RestoreReport:
    workspaces: list[str] = field(default_factory=list)
    state: bool = False
    moved_aside: list[Path] = field(default_factory=list)


# --- reading a live workspace ----------------------------------------------------------------


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def sqlite_snapshot(path: Path) -> bytes:
    """A consistent copy of a live SQLite database (WAL included) via the backup API."""
    with tempfile.TemporaryDirectory(prefix="clawgate-backup-") as tmp:
        target = Path(tmp) / "copy.db"
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            dest = sqlite3.connect(target)
            try:
                source.backup(dest)
            finally:
                dest.close()
        finally:
            source.close()
        return target.read_bytes()


def _walk(workspace: Path, skip_sessions: bool = False) -> Iterator[tuple[Path, str | None]]:
    """(file, reason to skip or None) for everything under `workspace`, sorted."""
    for directory, dirs, files in os.walk(workspace):
        here = Path(directory)
        top = here == workspace
        dirs.sort()
        for name in list(dirs):
            if top and (name in DERIVED_DIRS or (skip_sessions and name == SESSIONS_DIR)):
                dirs.remove(name)
            elif (here / name).is_symlink():
                dirs.remove(name)
                yield here / name, "symlink"
        for name in sorted(files):
            path = here / name
            if path.is_symlink():
                yield path, "symlink"
            elif name.endswith(SKIP_SUFFIXES) or (name.startswith(".") and name.endswith(".tmp")):
                continue
            else:
                yield path, None


def _read_member(path: Path) -> tuple[bytes, bool]:
    """The bytes to archive for `path`, and whether they came through the SQLite backup API."""
    if _is_sqlite(path):
        return sqlite_snapshot(path), True
    return path.read_bytes(), False


def _add_bytes(tar: tarfile.TarFile, arcname: str, data: bytes, mode: int, mtime: float) -> None:
    info = tarfile.TarInfo(arcname)
    info.size = len(data)
    info.mode = mode & 0o777
    info.mtime = int(mtime)
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, arcname: str, mtime: float) -> None:
    info = tarfile.TarInfo(arcname)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = int(mtime)  # TarInfo's default is 0: restored, it read as 1970
    tar.addfile(info)


# --- backup -----------------------------------------------------------------------------------


def list_workspaces(root: Path) -> list[Path]:
    """Person directories under the workspaces root (names like person ids, not dot dirs)."""
    if not root.is_dir():
        return []
    found = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.is_symlink():
            with contextlib.suppress(WorkspaceError):
                workspace_path(root, child.name)
                found.append(child)
    return found


def backup(output: Path, workspaces: list[Path], *, state_db: Path | None = None) -> BackupReport:
    """Write `workspaces` (and the state database, if given) to the archive `output`.

    The archive appears atomically: a failed backup leaves no partial file behind.
    """
    output = Path(output)
    report = BackupReport(output)
    names = [ws.name for ws in workspaces]
    if len(set(names)) != len(names):
        raise BackupMistake("two workspaces with the same name cannot share one archive")
    for ws in workspaces:
        if not ws.is_dir():
            raise BackupMistake(f"no workspace at {ws}")
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with tarfile.open(tmp_name, "w:gz") as tar:
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "created_at": datetime.now(UTC).isoformat(),
                "workspaces": names,
                "state": state_db is not None and state_db.exists(),
            }
            _add_bytes(
                tar,
                MANIFEST,
                json.dumps(manifest, indent=1).encode(),
                0o644,
                datetime.now(UTC).timestamp(),
            )
            for ws in workspaces:
                _backup_workspace(tar, ws, report)
            if state_db is not None and state_db.exists():
                st = state_db.stat()
                _add_bytes(tar, STATE_ARCNAME, sqlite_snapshot(state_db), st.st_mode, st.st_mtime)
                report.state = True
                report.databases += 1
        os.replace(tmp_name, output)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return report


def _backup_workspace(tar: tarfile.TarFile, ws: Path, report: BackupReport) -> None:
    base = f"{WORKSPACES}/{ws.name}"
    _add_dir(tar, base, ws.stat().st_mtime)
    report.workspaces.append(ws.name)
    for path, skip in _walk(ws):
        rel = path.relative_to(ws).as_posix()
        if skip:
            report.skipped.append(f"{ws.name}/{rel} ({skip})")
            continue
        if _git_unsafe(rel):
            continue  # restore writes a fresh git config; hooks never travel
        try:
            st = path.stat()
            data, was_db = _read_member(path)
        except FileNotFoundError:
            continue  # removed while we walked (a temp file, a rotated lock)
        _add_bytes(tar, f"{base}/{rel}", data, st.st_mode, st.st_mtime)
        report.files += 1
        report.databases += was_db


def _git_unsafe(rel: str) -> bool:
    return any(
        rel == f".git/{part}" or rel.startswith(f".git/{part}/") for part in GIT_UNSAFE_PARTS
    )


# --- restore ----------------------------------------------------------------------------------


def _check_member(member: tarfile.TarInfo) -> tuple[str, str]:
    """("workspace", name) / ("state", "") / ("manifest", "") for a safe member; else raise."""
    name = member.name
    path = PurePosixPath(name)
    if (
        not name
        or name.startswith(("/", "\\"))
        or "\\" in name
        or ".." in path.parts
        or ":" in path.parts[0]
        or "\x00" in name
    ):
        raise BackupError(f"refusing archive: unsafe member path {name!r}")
    if not (member.isfile() or member.isdir()):
        raise BackupError(f"refusing archive: {name!r} is a link or device, not a file")
    if name == MANIFEST:
        return ("manifest", "")
    if name == STATE_ARCNAME:
        return ("state", "")
    parts = path.parts
    if len(parts) >= 2 and parts[0] == WORKSPACES:
        try:
            workspace_path(Path("."), parts[1])
        except WorkspaceError as exc:
            raise BackupError(f"refusing archive: bad workspace name in {name!r}") from exc
        return ("workspace", parts[1])
    raise BackupError(f"refusing archive: unexpected member {name!r}")


def read_manifest(archive: Path) -> dict[str, object]:
    try:
        tar = tarfile.open(archive, "r:gz")  # noqa: SIM115 - closed by the `with` below
    except tarfile.ReadError as exc:  # not a .tar.gz at all: the wrong file was named
        raise BackupMistake(f"{archive} is not a clawgate backup (not a .tar.gz archive)") from exc
    with tar:
        try:
            handle = tar.extractfile(MANIFEST)
        except KeyError as exc:
            raise BackupMistake(f"{archive} is not a clawgate backup (no {MANIFEST})") from exc
        raw = handle.read(MAX_MANIFEST_BYTES + 1) if handle else b"{}"
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BackupError(f"{archive}: its {MANIFEST} is over {MAX_MANIFEST_BYTES:,} bytes")
    try:
        data = loads_bounded(raw, max_depth=8)  # a crafted archive is someone else's bytes
    except BrokenFile as exc:
        raise BackupError(f"{archive}: its {MANIFEST} cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BackupMistake(f"{archive} is not a clawgate backup")
    return data


def restore(
    archive: Path, root: Path, *, force: bool = False, rename: str = "", with_state: bool = True
) -> RestoreReport:
    """Unpack `archive` under the workspaces `root`.

    Refuses if a workspace (or the state database) already exists, unless `force`: then the
    existing one is moved to `<root>/.trash/`. `rename` restores a one-workspace archive
    under another name.
    """
    archive, root = Path(archive), Path(root)
    if not archive.is_file():
        raise BackupMistake(f"no archive {archive}")
    try:
        read_manifest(archive)
        with tarfile.open(archive, "r:gz") as tar:
            return _restore_from(tar, root, force=force, rename=rename, with_state=with_state)
    except (tarfile.TarError, EOFError, OSError, json.JSONDecodeError) as exc:
        raise BackupError(f"cannot restore {archive}: {exc}") from exc


def _restore_from(
    tar: tarfile.TarFile, root: Path, *, force: bool, rename: str, with_state: bool
) -> RestoreReport:
    members = tar.getmembers()
    kinds = [_check_member(m) for m in members]
    names = sorted({name for kind, name in kinds if kind == "workspace"})
    has_state = with_state and any(kind == "state" for kind, _ in kinds)
    if rename:
        if len(names) != 1:
            raise BackupMistake("--as needs an archive with exactly one workspace")
        workspace_path(root, rename)  # validates the new name
    targets = {name: root / (rename or name) for name in names}
    state_target = root / STATE_DIR / STATE_FILE
    clashes = [str(t) for t in targets.values() if t.exists()]
    if has_state and state_target.exists():
        clashes.append(str(state_target))
    if clashes and not force:
        raise BackupMistake(
            f"refusing to overwrite {', '.join(clashes)}: restore elsewhere "
            f"(--root), under another name (--as), or pass --force to replace (the "
            f"current one is moved to {root / TRASH})"
        )
    make_private_dirs(root)
    report = RestoreReport()
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".restore-"))
    try:
        wanted = [
            m
            for m, (kind, _) in zip(members, kinds, strict=True)
            if kind == "workspace" or (kind == "state" and has_state)
        ]
        tar.extractall(staging, members=wanted, filter="data")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        for name in names:
            # Someone else's git config and hooks could run code at our next commit.
            git_dir = staging / WORKSPACES / name / ".git"
            if git_dir.is_dir():
                reset_git_config(git_dir)
        make_private_tree(staging)  # an archive's modes are someone else's (0644, 0755)
        _no_epoch_times(staging)
        for name, target in targets.items():
            if target.exists():
                report.moved_aside.append(_move_aside(target, root, stamp))
            os.replace(staging / WORKSPACES / name, target)
            report.workspaces.append(target.name)
        if has_state:
            make_private_dirs(state_target.parent)
            for side in _sqlite_family(state_target):
                if side.exists():
                    report.moved_aside.append(_move_aside(side, root, stamp))
            os.replace(staging / STATE_ARCNAME, state_target)
            report.state = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def _no_epoch_times(top: Path) -> None:
    """Directories an older clawgate archived without a time (1970 once restored) get the
    time of the restore: `ls -l` and the panel's "last activity" then read sensibly."""
    now = datetime.now(UTC).timestamp()
    for folder, _, _ in os.walk(top):
        with contextlib.suppress(OSError):
            if os.stat(folder).st_mtime < 86_400:
                os.utime(folder, (now, now))


def _sqlite_family(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _move_aside(path: Path, root: Path, stamp: str) -> Path:
    trash = root / TRASH
    make_private_dirs(trash)
    target = trash / f"{path.name}.replaced-{stamp}"
    counter = 1
    while target.exists():
        counter += 1
        target = trash / f"{path.name}.replaced-{stamp}-{counter}"
    os.replace(path, target)
    return target


# --- clone ------------------------------------------------------------------------------------


def clone(root: Path, source: str, new: str, *, sessions: bool = True) -> Path:
    """Copy workspace `source` to a new workspace `new` (the same assistant, a new name).

    History (`.git`) comes along; `sessions=False` leaves the conversations behind. The
    derived recall index is not copied (it rebuilds). The workspace marker names the clone.
    """
    src = workspace_path(root, source)
    dst = workspace_path(root, new)
    if not src.is_dir():
        raise BackupMistake(f"no workspace {source!r} under {root}")
    if dst.exists():
        raise BackupMistake(f"{dst} already exists: choose another name")
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".clone-{new}-"))
    try:
        for path, skip in _walk(src, skip_sessions=not sessions):
            if skip:
                continue
            target = staging / path.relative_to(src)
            make_private_dirs(target.parent)
            try:
                data, _ = _read_member(path)
                mode = path.stat().st_mode
            except FileNotFoundError:
                continue
            target.write_bytes(data)
            os.chmod(target, mode & 0o700)
        (staging / SESSIONS_DIR).mkdir(exist_ok=True)
        if (staging / ".git").is_dir():
            reset_git_config(staging / ".git")
        marker = {"person": new, "cloned_from": source, "created_at": datetime.now(UTC).isoformat()}
        (staging / SEEDED_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
        os.replace(staging, dst)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dst
