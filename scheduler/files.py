"""Private, crash-safe files for the scheduler: 0600, written whole by temp file + rename.

`memory.atomic` does the temp file, fsync, rename and directory fsync; this module only makes
sure a new file is born 0600 (atomic_write keeps an existing file's mode, so the file is
created private first) and offers the lock that serializes read-modify-write of the schedule
file between the gateway and `clawgate schedule` running as another process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memory.atomic import atomic_write_text

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
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                             FILE_MODE))
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
