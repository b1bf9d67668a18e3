"""Crash-safe file replacement for memory files.

A memory file is the assistant's only long-term state, so a crash, a full disk or a killed process
in the middle of a write must leave either the old file or the new one, never a truncated mix.
The recipe: write a temp file next to the target, fsync it, `os.replace` it over the target
(atomic on POSIX and Windows when both are on one filesystem), then fsync the directory so the
rename itself survives a power cut.

`path` is replaced as given: if it is a symlink, the link is replaced by a regular file. Callers
that want to write through a link pass the resolved path (`gateway.workspace.paths` returns one).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "fsync_directory"]

# 0o666 is what `open(path, "w")` would use; the process umask still applies, so new files get
# the same permissions an ordinary write would have given them.
_NEW_FILE_MODE = 0o666
_CREATE_ATTEMPTS = 16


def fsync_directory(directory: Path) -> None:
    """Make a rename or create inside `directory` durable.

    Best effort: some platforms (Windows) and filesystems cannot open or fsync a directory, and
    there is nothing more a caller could do about that.
    """
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """Open a fresh temp file beside the target.

    The name starts with "." so listings and path confinement treat a leftover as internal.
    O_EXCL guarantees we never write into someone else's file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    for _ in range(_CREATE_ATTEMPTS):
        tmp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, _NEW_FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temp file in {directory}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so readers and crashes see the old or the new file, never half.

    An existing file's permission bits are kept: the owner may have made a memory file read-only
    for others, and rewriting it must not quietly widen that.
    """
    path = Path(path)
    directory = path.parent
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        old_mode = None

    fd, tmp = _create_temp(directory, path.name)
    try:
        try:
            if old_mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, old_mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if old_mode is not None and not hasattr(os, "fchmod"):
            os.chmod(tmp, old_mode)
        os.replace(tmp, path)
    except BaseException:
        # BaseException too: a cancelled task or Ctrl-C must not leave temp files behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(directory)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` as UTF-8, byte for byte (no newline translation).

    Memory files are Markdown the model edits with exact-match replacements, so what was written
    must be exactly what is read back on every platform.
    """
    atomic_write_bytes(path, text.encode("utf-8"))
