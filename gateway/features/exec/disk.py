"""How much a command adds to the workspace: watched while it runs, measured after.

RLIMIT_FSIZE bounds one file; a command writing many files is bounded by this watch: the
filesystem's used bytes and inodes are sampled (statvfs, a microsecond each) while it runs,
and the run is stopped once they grew past its budget. Other writers on the same filesystem
count too, so the watch can only stop a run early, never let one through; afterwards the
workspace is walked (`tree_bytes`) for the exact growth the run is charged with.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DiskSample", "tree_bytes"]


def tree_bytes(root: Path, skip: frozenset[str] = frozenset()) -> int:
    """Apparent size of every regular file under `root`, links not followed, names in
    `skip` left out at the top level. What cannot be read counts as nothing."""
    total = 0
    stack = [str(root)]
    top = True
    while stack:
        path = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            top = False
            continue
        for entry in entries:
            if top and entry.name in skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                total += info.st_size
        top = False
    return total


@dataclass(frozen=True, slots=True)
class DiskSample:
    """The used bytes and inodes of the filesystem holding a path."""

    used_bytes: int
    used_inodes: int

    @classmethod
    def of(cls, path: Path) -> DiskSample:
        st = os.statvfs(path)
        return cls((st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree)

    def grown_past(self, later: DiskSample, max_bytes: int, max_inodes: int) -> str | None:
        """ "disk" or "files" when `later` grew past a budget since this sample, else None."""
        if later.used_bytes - self.used_bytes > max_bytes:
            return "disk"
        if later.used_inodes - self.used_inodes > max_inodes:
            return "files"
        return None
