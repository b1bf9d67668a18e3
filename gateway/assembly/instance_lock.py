"""One gateway per workspaces root: a lock held for the life of `clawgate run`.

Two gateways on the same workspaces and bot token both take each pending message: the model
answers it twice and the transcript holds two answers. A port already in use used to be the
only sign, and choosing another port started the second gateway anyway. So `clawgate run`
takes an exclusive `flock` on `<root>/.gateway/gateway.lock` before anything else starts and
keeps it until the process ends; a second one is told who holds it and exits.

Why `flock`: the kernel drops the lock when the process dies however it dies (kill -9, power
loss), so no stale lock ever needs cleaning, and the file (which holds the holder's pid, for
the message) is never removed. The descriptor is close-on-exec: MCP servers and git started
by the gateway do not inherit the lock and cannot keep it after the gateway is gone.
Other commands (`pairing approve`, `memory undo`, `backup`, `clawgate chat`...) do not take it:
they share the state database and workspaces with the running gateway as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from memory.atomic import make_private_dirs

LOCK_FILE = "gateway.lock"


class AlreadyRunning(Exception):
    """Another process holds the lock; `str()` is the line to show."""

    def __init__(self, pid: int | None, root: Path) -> None:
        holder = f"pid {pid}" if pid else "pid unknown"
        super().__init__(f"clawgate is already running ({holder}) on {root}")
        self.pid = pid
        self.root = root


def lock_path(workspaces_root: Path) -> Path:
    from gateway.ops.state import state_path

    return state_path(workspaces_root).parent / LOCK_FILE


class GatewayLock:
    """`acquire()` or AlreadyRunning; `release()` (also done by the kernel at exit)."""

    def __init__(self, workspaces_root: Path) -> None:
        self.root = Path(workspaces_root)
        self.path = lock_path(self.root)
        self._fd: int | None = None

    def acquire(self) -> None:
        make_private_dirs(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise AlreadyRunning(pid, self.root) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
