"""The panel's file editor: list, read and save workspace files safely.

Every path goes through `resolve_in_workspace`, the resolver the assistant's file tools use,
as a private (owner) context: no `..`, no absolute paths, no hidden files (.git, .trash),
no symlink out of the workspace, and sessions/ is read-only.

A save carries the SHA-256 of the text the editor started from (the base). If the file on disk
no longer has that hash (a hand edit in a shell, or the assistant wrote it during a turn), the
save is refused with both versions, instead of silently overwriting someone's change.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from gateway.workspace.paths import resolve_in_workspace
from gateway.workspace.seed import SESSIONS_DIR
from memory.atomic import atomic_write_text, make_private_dirs

MAX_LISTED = 2000


class EditConflict(Exception):
    """The file changed since the editor loaded it."""

    def __init__(self, current: str, current_hash: str) -> None:
        super().__init__("the file changed on disk since you opened it")
        self.current = current
        self.current_hash = current_hash


class FileRefused(Exception):
    """Not a file the panel may read or write; `str()` says why."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str
    size: int
    modified: float


def text_hash(text: str | None) -> str:
    """The base hash of a file's text; "" stands for "the file does not exist"."""
    return "" if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def list_files(workspace: Path) -> list[FileEntry]:
    """Visible workspace files (what the file tools see), sessions/ excluded, sorted."""
    found: list[FileEntry] = []
    stack = [(workspace, "")]
    while stack and len(found) < MAX_LISTED:
        directory, prefix = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            rel = f"{prefix}{entry.name}"
            if entry.is_dir():
                if rel != SESSIONS_DIR:
                    stack.append((Path(entry.path), rel + "/"))
            elif entry.is_file():
                st = entry.stat()
                found.append(FileEntry(rel, st.st_size, st.st_mtime))
    return sorted(found, key=lambda f: (f.path.count("/"), f.path.lower()))


def _resolve(workspace: Path, rel: str, *, write: bool) -> Path:
    try:
        # The owner's own hand: may change what groups read too (memory/layout.py).
        return resolve_in_workspace(workspace, rel, private=True, write=write, attended=True)
    except Exception as exc:  # PathRefused carries the reason
        raise FileRefused(getattr(exc, "reason", str(exc))) from exc


def read_text(workspace: Path, rel: str, max_bytes: int) -> str | None:
    """The file's text, None if it does not exist yet; FileRefused if not a readable text."""
    path = _resolve(workspace, rel, write=False)
    if path.is_dir():
        raise FileRefused("that is a folder")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileRefused(exc.strerror or "cannot be read") from exc
    if len(data) > max_bytes:
        raise FileRefused(f"larger than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused("not UTF-8 text") from exc


def save_text(workspace: Path, rel: str, text: str, base_hash: str, max_bytes: int) -> Path:
    """Write `text` if the file still has `base_hash`; EditConflict otherwise."""
    text = text.replace("\r\n", "\n")  # browsers send textarea lines with CRLF
    if len(text.encode("utf-8")) > max_bytes:
        raise FileRefused(f"larger than {max_bytes:,} bytes")
    path = _resolve(workspace, rel, write=True)
    current = read_text(workspace, rel, max_bytes * 4)
    if text_hash(current) != base_hash:
        raise EditConflict(current or "", text_hash(current))
    make_private_dirs(path.parent)  # 0700 for every directory created, not only the leaf
    atomic_write_text(path, text)
    return path
