"""Where the running panels listen, for `clawgate panel url` in another process.

With `[panel] port = 0` a panel takes any free port, and the command read only the setting:
it printed a link to port 0. So each process serving a panel (`clawgate run`, the terminal
chat) writes the port it bound to `<state dir>/panels/<pid>` (0600) and removes the file when
the panel stops. A record whose process is gone (kill -9 leaves it) is skipped and removed
by the next reader; what a record says is checked (a port number and nothing else), and the
command still asks the panel itself whether it answers there before printing a link to it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from memory.atomic import atomic_write_text, make_private_dirs, read_bounded

PANELS_DIR = "panels"
_MAX_RECORD_BYTES = 32


def record_port(state_dir: Path, port: int, *, pid: int | None = None) -> Path:
    """Record that this process (`pid`) serves a panel on `port`; the file to `forget`."""
    directory = make_private_dirs(state_dir / PANELS_DIR)
    path = directory / str(os.getpid() if pid is None else pid)
    atomic_write_text(path, f"{port}\n")
    return path


def forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def running_ports(state_dir: Path) -> list[int]:
    """The ports of the panels whose processes still run, the most recently started first."""
    directory = state_dir / PANELS_DIR
    try:
        entries = sorted(directory.iterdir(), key=_started, reverse=True)
    except OSError:
        return []
    ports: list[int] = []
    for path in entries:
        pid, port = _parse(path)
        if pid is None or port is None:
            continue  # not one of ours, or torn: left alone
        if not _alive(pid):
            forget(path)
            continue
        if port not in ports:
            ports.append(port)
    return ports


def _parse(path: Path) -> tuple[int | None, int | None]:
    if not path.name.isdigit() or int(path.name) == 0:
        return None, None
    try:
        text = read_bounded(path, _MAX_RECORD_BYTES).decode("ascii").strip()
    except (OSError, ValueError):
        return None, None
    if not text.isdigit() or not 0 < int(text) < 65536:
        return None, None
    return int(path.name), int(text)


def _started(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # another user's process
    except (ProcessLookupError, OverflowError):
        return False
    return True
