"""Private, crash-safe files for the scheduler: 0600, written whole by temp file + rename.

`memory.atomic` does the temp file, fsync, rename and directory fsync; this module makes sure
a new file is born 0600 (atomic_write keeps an existing file's mode, so the file is created
private first), appends and replaces many state files at once as a group commit (`commit`), and
offers the lock that serializes read-modify-write of the schedule file between the gateway and
`clawgate schedule` running as another process.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from memory.atomic import atomic_write_text, fsync_directory

FILE_MODE = 0o600


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically; the file is 0600 afterwards."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    if mode is None:
        # Born private: an empty file the atomic write then replaces, keeping its mode.
        # A crash right here leaves an empty file, which every reader treats as "no jobs".
        with contextlib.suppress(FileExistsError):  # another writer was first: still 0600
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))
    elif mode != FILE_MODE:
        os.chmod(path, FILE_MODE)
    atomic_write_text(path, text)


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """An exclusive advisory lock on `directory` (flock on the directory itself, so no lock
    file is left behind). Blocks until any other holder, in any process, lets go."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _syncfs(directory: Path) -> bool:
    """Flush the whole filesystem holding `directory` (Linux `syncfs`); False if unavailable."""
    if _LIBC is None or not hasattr(_LIBC, "syncfs"):
        return False
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    try:
        if _LIBC.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs failed: {os.strerror(err)}")
    finally:
        os.close(fd)
    return True


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()
GROUP_COMMIT_MIN = 4  # below this many files, one fsync each is cheaper than a syncfs


def commit(appends: list[tuple[Path, str]], replaces: list[tuple[Path, str]]) -> None:
    """Append to some files and replace others, all durable when this returns (0600).

    Appends need no rename (renaming over an existing file makes ext4 flush it: about 2.5 ms
    each on the test machine), so a claim is an append. With several files this is a group
    commit: everything is written, the filesystem is flushed once (`syncfs`), replacements are
    renamed into place, and it is flushed once more; otherwise each file is fsync'd. A replace
    is atomic (old or new file, never half); an append interrupted by a crash leaves at most a
    torn last line, which the reader drops.
    """
    group = len(appends) + len(replaces) >= GROUP_COMMIT_MIN and _LIBC is not None
    temps: list[tuple[Path, Path]] = []
    synced: list[int] = []
    try:
        for path, text in appends:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            try:
                _write_all(fd, text)
                if not group:
                    os.fsync(fd)
            finally:
                os.close(fd)
        for path, text in replaces:
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
            temps.append((tmp, path))
            try:
                _write_all(fd, text)
                if not group:
                    os.fsync(fd)
            finally:
                os.close(fd)
        directories = {path.parent for path, _ in appends} | {path.parent for _, path in temps}
        devices: dict[int, Path] = {}
        for directory in directories:
            devices.setdefault(os.stat(directory).st_dev, directory)
        if group:
            group = all(_syncfs(d) for d in devices.values())
            if not group:  # no syncfs after all: fsync what was written
                for path in [p for p, _ in appends] + [t for t, _ in temps]:
                    _fsync_path(path)
        for tmp, path in temps:
            os.replace(tmp, path)
        synced.append(1)
        if group:
            for directory in devices.values():
                _syncfs(directory)
        else:
            for directory in directories:
                fsync_directory(directory)
    except BaseException:
        if not synced:
            for tmp, _ in temps:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        raise


def _write_all(fd: int, text: str) -> None:
    data = memoryview(text.encode("utf-8"))
    while data:
        data = data[os.write(fd, data) :]


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
