"""Workspace confinement: the one place that decides whether a path stays inside a workspace.

Paths come from a language model, which may be confused or manipulated by whatever text it read
last, so every check here assumes a hostile input. The rules, in order:

1. Lexical: the string must be a plain relative POSIX path (no absolute, home, drive or UNC
   forms, no backslashes, no control characters, no bidirectional controls that make a name
   read differently from what it is) whose components are not hidden (".x") and fit a file
   system (at most 255 bytes each).
2. Real: the workspace and the target are resolved with `os.path.realpath` (for a target that
   does not exist yet, the deepest existing parent is resolved and the rest kept lexically) and
   the target must be inside the workspace by path components, never by string prefix.
   Any symlink on the way, dangling or not, counts only by where it really leads.
3. Access: what the context may read or write is asked of `memory.layout` (the one place
   that knows the workspace layout and the access rule), on both the name as given and the
   resolved name, so aliases and links cannot reach past it. Outside private contexts a
   second name (hard link) of a private file is refused too. A private context's write of a
   group-readable file that the rule refuses now (no owner present, outside text in the
   context) is a `SharedWriteRefused`, so the tools can count and log it.

A race in which someone with shell access swaps a directory for a symlink between this check and
the actual open is out of scope: tools are the only writers the model controls, and no tool can
create symlinks.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from gateway.tool_errors import ToolError
from gateway.workspace.names import BAD_CATEGORIES, BIDI_CONTROLS
from memory.layout import (
    PRIVATE_DIRS,
    PRIVATE_FILES,
    SESSIONS_DIR,
    Access,
    is_private_relpath,
    leads_to_area,
    read_refusal,
    shared_write_refusal,
    write_refusal,
)

__all__ = [
    "PRIVATE_DIRS",
    "PRIVATE_FILES",
    "SESSIONS_DIR",
    "PathRefused",
    "SharedWriteRefused",
    "is_hidden_relpath",
    "is_private_relpath",
    "resolve_in_workspace",
]

MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255  # NAME_MAX of ext4, xfs, btrfs, tmpfs, APFS: one path component

_DRIVE = re.compile(r"^[A-Za-z]:")
_HINT = "Use a relative path inside your workspace, for example 'notes/ideas.md'."


class PathRefused(ToolError):
    """A path the model gave is not allowed; the message tells it why and what to do instead."""

    def __init__(self, user_path: object, reason: str) -> None:
        super().__init__(f"path {_shown(user_path)!r} refused: {reason}. {_HINT}")
        self.user_path = user_path
        self.reason = reason


def _shown(user_path: object) -> str:
    return user_path if isinstance(user_path, str) and len(user_path) <= 200 else "<path>"


class SharedWriteRefused(PathRefused):
    """A private context may not write this group-readable file now (memory.layout's
    `shared_write_refusal`); `unattended` tells the two reasons apart (no owner present, or
    outside text in the context). The message says why and what the owner can do instead."""

    def __init__(self, user_path: object, reason: str, *, unattended: bool) -> None:
        ToolError.__init__(self, f"nothing was written to {_shown(user_path)!r}: {reason}.")
        self.user_path = user_path
        self.reason = reason
        self.unattended = unattended


def _parts(rel: Path | PurePosixPath | str) -> tuple[str, ...]:
    normalized = os.path.normpath(str(rel)).replace("\\", "/")
    return tuple(p for p in normalized.split("/") if p not in ("", "."))


def is_hidden_relpath(rel: Path | PurePosixPath | str) -> bool:
    """Whether any component is a dot-name: internal state such as .git, .trash or .gateway."""
    return any(p.startswith(".") for p in _parts(rel) if p != "..")


def _check_lexical(user_path: str) -> tuple[str, ...]:
    """Refuse what is wrong with the string itself, before touching the filesystem."""
    if not user_path or not user_path.strip():
        raise PathRefused(user_path, "the path is empty")
    if len(user_path) > MAX_PATH_CHARS:
        raise PathRefused(user_path, f"the path is longer than {MAX_PATH_CHARS} characters")
    for ch in user_path:
        if unicodedata.category(ch) in BAD_CATEGORIES:
            raise PathRefused(user_path, "the path contains control or invalid characters")
        if ch in BIDI_CONTROLS:
            raise PathRefused(
                user_path,
                "the path contains a bidirectional control character "
                "(it would make the name read differently from what "
                "it is)",
            )
    if "\\" in user_path:
        raise PathRefused(user_path, "backslashes are not allowed; separate folders with '/'")
    if user_path.startswith("/"):
        raise PathRefused(user_path, "absolute paths are not allowed")
    if user_path.startswith("~"):
        raise PathRefused(user_path, "home-directory paths ('~') are not allowed")
    if _DRIVE.match(user_path):
        raise PathRefused(user_path, "drive-letter paths are not allowed")
    parts = tuple(p for p in user_path.split("/") if p)
    for part in parts:
        if part.startswith(".") and part not in (".", ".."):
            raise PathRefused(user_path, f"hidden or internal names like {part!r} are off limits")
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathRefused(
                user_path,
                f"a file or folder name is longer than {MAX_NAME_BYTES} "
                "bytes, the most a file system allows; use a shorter "
                "name",
            )
    return parts


def _check_rules(user_path: str, parts: tuple[str, ...], access: Access, *, write: bool) -> None:
    shared = shared_write_refusal(access, parts) if write else None
    if shared is not None:
        raise SharedWriteRefused(user_path, shared, unattended=not access.attended)
    reason = write_refusal(access, parts) if write else read_refusal(access, parts)
    if reason is not None:
        raise PathRefused(user_path, reason)


def _has_symlink_or_parent_ref(workspace: Path, rel: Path) -> bool:
    """Catch what `realpath` leaves unresolved, which only happens for symlink loops."""
    if ".." in rel.parts:
        return True
    current = workspace
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            return True
    return False


def resolve_in_workspace(
    workspace: Path,
    user_path: str,
    *,
    private: bool,
    write: bool,
    area: str = "",
    attended: bool = False,
    outside: str = "",
) -> Path:
    """Turn a model-supplied path into an absolute real path inside `workspace`, or refuse.

    The returned path has every symlink resolved, so callers act on the file the checks judged,
    not on a name that could point somewhere else. `write=True` additionally refuses read-only
    areas. `area` is a group's own writable area (`memory.layout.group_area`); outside private
    contexts nothing else is writable. `attended` and `outside` (private contexts) decide the
    group-readable files: see `memory.layout.Access`; the default is a context with no one
    present. Raises PathRefused (a ToolError) with a message meant for the model.
    """
    access = Access(private, "" if private else area, attended, outside)
    if not isinstance(user_path, str):
        raise PathRefused(user_path, "the path must be a string")
    lexical = _check_lexical(user_path)
    try:
        return _resolve_checked(workspace, user_path, lexical, access, private=private, write=write)
    except PathRefused:
        raise
    except OSError as exc:  # the whole path too long for the system, a loop, an I/O error
        raise PathRefused(user_path, f"it cannot be used here ({exc.strerror or exc})") from None


def _resolve_checked(
    workspace: Path,
    user_path: str,
    lexical: tuple[str, ...],
    access: Access,
    *,
    private: bool,
    write: bool,
) -> Path:
    lexical_norm = _parts("/".join(lexical) or ".")
    if lexical_norm and lexical_norm[0] == "..":
        raise PathRefused(user_path, "it points outside your workspace")
    _check_rules(user_path, lexical_norm, access, write=write)

    root = Path(os.path.realpath(workspace))
    target = Path(os.path.realpath(root.joinpath(*lexical))) if lexical else root
    if not target.is_relative_to(root):
        raise PathRefused(user_path, "it points outside your workspace (possibly via a symlink)")
    rel = target.relative_to(root)
    if _has_symlink_or_parent_ref(root, rel):
        raise PathRefused(user_path, "it goes through a symlink that cannot be resolved")
    if is_hidden_relpath(rel):
        raise PathRefused(user_path, "it leads to a hidden or internal file")
    _check_rules(user_path, rel.parts, access, write=write)
    if leads_to_area(access, rel.parts) and target.exists() and not target.is_dir():
        raise PathRefused(user_path, "it is not this group's area")
    if not private:
        _check_hard_link(root, target, user_path)
    return target


def _check_hard_link(root: Path, target: Path, user_path: str) -> None:
    """Refuse a second name (hard link) for a private file.

    Tools cannot create hard links, but the owner might have, and a group chat must not read
    MEMORY.md through `notes/copy.md` just because the two names share an inode.
    """
    try:
        st = target.stat()
    except OSError:
        return
    if st.st_nlink < 2 or not target.is_file():
        return
    candidates = [root / name for name in PRIVATE_FILES]
    for directory in (*PRIVATE_DIRS, SESSIONS_DIR):
        base = root / directory
        if base.is_dir() and not base.is_symlink():
            candidates.extend(p for p in base.rglob("*") if p.is_file())
    for candidate in candidates:
        try:
            other = candidate.stat()
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise PathRefused(user_path, "it is another name for a private file")
