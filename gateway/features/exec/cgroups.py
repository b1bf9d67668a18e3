"""A cgroup per run, where the gateway may make one: a bound on the sandbox's processes and
total memory that holds whoever runs the gateway.

Why it is needed at all: RLIMIT_NPROC is not enforced for processes whose user is root on
the host (the kernel exempts the initial user outright), and a gateway run as root maps the
sandbox's user to root. Measured here: as root, a fork bomb under RLIMIT_NPROC 32 filled the
machine's pid space. As any other user RLIMIT_NPROC holds, counted per user namespace (so a
fork bomb in one sandbox does not stop another sandbox of the same uid; also measured). So a
root gateway needs the `pids` controller, and `Sandbox.open` refuses to run as root without
one; where a cgroup can be made, every run gets one whatever the user: `pids.max` bounds the
processes and the memory controller bounds the sandbox's memory as a whole (RLIMIT_AS only
bounds each process).

Where: cgroup v1 `pids`/`memory` hierarchies below the gateway's own cgroup, or cgroup v2
when the gateway's cgroup is the root of its namespace (a container's) or a delegated one
whose `cgroup.subtree_control` already enables the controllers. Each run's group is
`<own>/clawgate-exec-<pid>/<run>`; bubblewrap is started blocked (`--block-fd`), it and the
sandbox's first process are moved in, and only then does the command start, so every process
of the command is inside from its first instruction.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cgroups", "RunCgroup", "release_into"]

_V1_ROOT = Path("/sys/fs/cgroup")
_REMOVE_SECONDS = 2.0


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for cgroup v2)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


@dataclass(frozen=True, slots=True)
class Cgroups:
    """Where run cgroups are made: one parent per controller hierarchy."""

    pids_parent: Path
    memory_parent: Path | None
    version: int

    @classmethod
    def detect(cls) -> Cgroups | None:
        own = _own_paths()
        tag = f"clawgate-exec-{os.getpid()}"
        if "pids" in own:  # cgroup v1
            pids_base = _V1_ROOT / "pids" / own["pids"].lstrip("/")
            if not _writable_dir(pids_base):
                return None
            memory_parent = None
            if "memory" in own:
                memory_base = _V1_ROOT / "memory" / own["memory"].lstrip("/")
                if _writable_dir(memory_base):
                    memory_parent = memory_base / tag
            return cls._made(cls(pids_base / tag, memory_parent, 1))
        if "" in own and (_V1_ROOT / "cgroup.controllers").exists():  # pure cgroup v2
            base = _V1_ROOT / own[""].lstrip("/")
            try:
                enabled = (base / "cgroup.subtree_control").read_text(encoding="ascii").split()
            except OSError:
                return None
            if own[""] == "/" and "pids" not in enabled:
                with contextlib.suppress(OSError):
                    (base / "cgroup.subtree_control").write_text("+pids +memory", encoding="ascii")
                with contextlib.suppress(OSError):
                    enabled = (base / "cgroup.subtree_control").read_text(encoding="ascii").split()
            if "pids" not in enabled or not _writable_dir(base):
                return None
            return cls._made(cls(base / tag, base / tag if "memory" in enabled else None, 2))
        return None

    @staticmethod
    def _made(found: Cgroups) -> Cgroups | None:
        for parent in {
            found.pids_parent.parent,
            *([found.memory_parent.parent] if found.memory_parent else []),
        }:
            _sweep(parent)
        try:
            found.pids_parent.mkdir(exist_ok=True)
            if found.memory_parent is not None and found.memory_parent != found.pids_parent:
                with contextlib.suppress(OSError):
                    found.memory_parent.mkdir(exist_ok=True)
            if found.version == 2:
                with contextlib.suppress(OSError):
                    (found.pids_parent / "cgroup.subtree_control").write_text(
                        "+pids +memory" if found.memory_parent else "+pids", encoding="ascii"
                    )
        except OSError:
            return None
        return found

    def for_run(self, name: str, processes: int, memory_bytes: int) -> RunCgroup:
        """The group one run will get (made by `RunCgroup.prepare`)."""
        dirs = [self.pids_parent / name]
        if self.memory_parent is not None and self.memory_parent / name != dirs[0]:
            dirs.append(self.memory_parent / name)
        memory = (self.memory_parent / name) if self.memory_parent is not None else None
        return RunCgroup(tuple(dirs), processes, memory, memory_bytes, self.version)

    def remove(self) -> None:
        for parent in {self.pids_parent, self.memory_parent} - {None}:
            with contextlib.suppress(OSError):
                assert parent is not None
                parent.rmdir()


def _sweep(parent: Path) -> None:
    """Remove the empty groups a gateway that is gone left behind (a kill -9)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            name = entry.name
            if not name.startswith("clawgate-exec-") or not name[14:].isdigit():
                continue
            if Path(f"/proc/{name[14:]}").exists():
                continue
            with contextlib.suppress(OSError):
                for run in entry.iterdir():
                    if run.is_dir():
                        with contextlib.suppress(OSError):
                            run.rmdir()
                entry.rmdir()


@dataclass(frozen=True, slots=True)
class RunCgroup:
    dirs: tuple[Path, ...]
    processes: int
    memory: Path | None
    memory_bytes: int
    version: int

    def prepare(self) -> None:
        """Make the group and set its limits (OSError when the pids group cannot be made)."""
        self.dirs[0].mkdir()
        (self.dirs[0] / "pids.max").write_text(str(self.processes), encoding="ascii")
        for folder in self.dirs[1:]:
            with contextlib.suppress(OSError):
                folder.mkdir()
        if self.memory is not None:
            limit = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
            with contextlib.suppress(OSError):
                (self.memory / limit).write_text(str(self.memory_bytes), encoding="ascii")
            if self.version == 2:
                with contextlib.suppress(OSError):
                    (self.memory / "memory.swap.max").write_text("0", encoding="ascii")

    def add(self, pid: int) -> None:
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(pid), encoding="ascii")

    def _pids(self) -> list[int]:
        try:
            text = (self.dirs[0] / "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def remove(self) -> bool:
        """Kill what is left in it and remove it; False if it was still busy."""
        end = time.monotonic() + _REMOVE_SECONDS
        while True:
            pids = self._pids()
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                break
            if time.monotonic() > end:
                return False
            time.sleep(0.005)
        ok = True
        for folder in reversed(self.dirs):
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        return ok


def release_into(group: RunCgroup, outer: int, info_fd: int, block_fd: int) -> None:
    """Move the blocked sandbox (bubblewrap and its first process, whose pid bubblewrap
    writes to `info_fd`) into `group`, then let the command start (`block_fd`). A sandbox
    that failed before telling its pid is let go as it is; it runs nothing."""
    info = b""
    while not info.rstrip().endswith(b"}"):
        chunk = os.read(info_fd, 4096)
        if not chunk:
            break
        info += chunk
    pids = [outer]
    with contextlib.suppress(ValueError, TypeError, KeyError):
        pids.append(int(json.loads(info)["child-pid"]))
    for pid in pids:
        with contextlib.suppress(OSError):
            group.add(pid)
    with contextlib.suppress(OSError):
        os.write(block_fd, b"go")
