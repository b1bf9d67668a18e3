"""Workspace confinement: the one place that decides whether a path stays inside a workspace.

Paths come from a language model, which may be confused or manipulated by whatever text it read
last, so every check here assumes a hostile input. The rules, in order:

1. Lexical: the string must be a plain relative POSIX path (no absolute, home, drive or UNC
   forms, no backslashes, no control characters) whose components are not hidden (".x").
2. Real: the workspace and the target are resolved with `os.path.realpath` (for a target that
   does not exist yet, the deepest existing parent is resolved and the rest kept lexically) and
   the target must be inside the workspace by path components, never by string prefix.
   Any symlink on the way, dangling or not, counts only by where it really leads.
3. Privacy: outside a private session the owner's memory (USER.md, MEMORY.md, memory/) and the
   transcripts (sessions/) are refused, judged on both the name as given and the resolved name,
   case-insensitively, so aliases and links cannot reach them.
4. sessions/ is append-only history owned by the gateway: tools may read it (privately) but
   never write it.
5. skills/ holds instructions that private sessions follow (gateway/capabilities/), so only a
   private session may create, change or delete anything under it. (Interim: the workspace
   layout module will own this rule with the other instruction files.)

A race in which someone with shell access swaps a directory for a symlink between this check and
the actual open is out of scope: tools are the only writers the model controls, and no tool can
create symlinks.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from gateway.agent.tools.base import ToolError

__all__ = [
    "INSTRUCTION_DIRS",
    "PRIVATE_DIRS",
    "PRIVATE_FILES",
    "READ_ONLY_DIRS",
    "SESSIONS_DIR",
    "PathRefused",
    "is_hidden_relpath",
    "is_private_relpath",
    "resolve_in_workspace",
]

PRIVATE_FILES: tuple[str, ...] = ("USER.md", "MEMORY.md")
PRIVATE_DIRS: tuple[str, ...] = ("memory",)
SESSIONS_DIR = "sessions"
# Instructions followed in private sessions: never written from a shared one.
INSTRUCTION_DIRS: tuple[str, ...] = ("skills",)
READ_ONLY_DIRS: tuple[str, ...] = (SESSIONS_DIR,)

MAX_PATH_CHARS = 1024

_DRIVE = re.compile(r"^[A-Za-z]:")
# Cc: C0/C1 controls (NUL, newline, ESC...); Cs: lone surrogates, which cannot name a real UTF-8
# file; Zl/Zp: line/paragraph separators, which would break the one-path-per-line tool output.
_BAD_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
_HINT = "Use a relative path inside your workspace, for example 'notes/ideas.md'."


class PathRefused(ToolError):
    """A path the model gave is not allowed; the message tells it why and what to do instead."""

    def __init__(self, user_path: object, reason: str) -> None:
        shown = user_path if isinstance(user_path, str) and len(user_path) <= 200 else "<path>"
        super().__init__(f"path {shown!r} refused: {reason}. {_HINT}")
        self.user_path = user_path
        self.reason = reason


def _fold(name: str) -> str:
    """Compare names the way a case-insensitive, normalizing filesystem would.

    macOS and Windows treat `Memory.md`, `MEMORY.md` and (Windows) `MEMORY.md.` as one file, so
    the privacy rules must too, even on Linux where they are different files.
    """
    return unicodedata.normalize("NFC", name).casefold().rstrip(". ")


_PRIVATE_FILES_FOLDED = frozenset(_fold(n) for n in PRIVATE_FILES)
_PRIVATE_DIRS_FOLDED = frozenset(_fold(n) for n in (*PRIVATE_DIRS, SESSIONS_DIR))
_READ_ONLY_FOLDED = frozenset(_fold(n) for n in READ_ONLY_DIRS)
_INSTRUCTION_FOLDED = frozenset(_fold(n) for n in INSTRUCTION_DIRS)


def _parts(rel: Path | PurePosixPath | str) -> tuple[str, ...]:
    normalized = os.path.normpath(str(rel)).replace("\\", "/")
    return tuple(p for p in normalized.split("/") if p not in ("", "."))


def is_private_relpath(rel: Path | PurePosixPath | str) -> bool:
    """Whether a workspace-relative path is something only the owner's private session may see.

    True for the top-level PRIVATE_FILES, anything under PRIVATE_DIRS and anything under
    sessions/ (transcripts of private chats are as private as the memory distilled from them).
    Names are compared case-insensitively. Only the top-level files are private: a
    `notes/MEMORY.md` is an ordinary note.
    """
    parts = _parts(rel)
    if not parts:
        return False
    first = _fold(parts[0])
    if first in _PRIVATE_DIRS_FOLDED:
        return True
    return len(parts) == 1 and first in _PRIVATE_FILES_FOLDED


def is_hidden_relpath(rel: Path | PurePosixPath | str) -> bool:
    """Whether any component is a dot-name: internal state such as .git, .trash or .gateway."""
    return any(p.startswith(".") for p in _parts(rel) if p != "..")


def _is_read_only(parts: tuple[str, ...]) -> bool:
    return bool(parts) and _fold(parts[0]) in _READ_ONLY_FOLDED


def _check_lexical(user_path: str) -> tuple[str, ...]:
    """Refuse what is wrong with the string itself, before touching the filesystem."""
    if not user_path or not user_path.strip():
        raise PathRefused(user_path, "the path is empty")
    if len(user_path) > MAX_PATH_CHARS:
        raise PathRefused(user_path, f"the path is longer than {MAX_PATH_CHARS} characters")
    for ch in user_path:
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            raise PathRefused(user_path, "the path contains control or invalid characters")
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
    return parts


def _check_rules(user_path: str, parts: tuple[str, ...], *, private: bool, write: bool) -> None:
    if not private and is_private_relpath("/".join(parts)):
        raise PathRefused(
            user_path, "private memory and transcripts are only available in the owner's DMs"
        )
    if write and _is_read_only(parts):
        raise PathRefused(user_path, "sessions/ holds transcripts and is read-only")
    if write and not private and parts and _fold(parts[0]) in _INSTRUCTION_FOLDED:
        raise PathRefused(
            user_path, "skills/ holds instructions and can only be changed in the owner's DMs"
        )


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


def resolve_in_workspace(workspace: Path, user_path: str, *, private: bool, write: bool) -> Path:
    """Turn a model-supplied path into an absolute real path inside `workspace`, or refuse.

    The returned path has every symlink resolved, so callers act on the file the checks judged,
    not on a name that could point somewhere else. `write=True` additionally refuses read-only
    areas. Raises PathRefused (a ToolError) with a message meant for the model.
    """
    if not isinstance(user_path, str):
        raise PathRefused(user_path, "the path must be a string")
    lexical = _check_lexical(user_path)
    lexical_norm = _parts("/".join(lexical) or ".")
    if lexical_norm and lexical_norm[0] == "..":
        raise PathRefused(user_path, "it points outside your workspace")
    _check_rules(user_path, lexical_norm, private=private, write=write)

    root = Path(os.path.realpath(workspace))
    target = Path(os.path.realpath(root.joinpath(*lexical))) if lexical else root
    if not target.is_relative_to(root):
        raise PathRefused(user_path, "it points outside your workspace (possibly via a symlink)")
    rel = target.relative_to(root)
    if _has_symlink_or_parent_ref(root, rel):
        raise PathRefused(user_path, "it goes through a symlink that cannot be resolved")
    if is_hidden_relpath(rel):
        raise PathRefused(user_path, "it leads to a hidden or internal file")
    _check_rules(user_path, rel.parts, private=private, write=write)
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
