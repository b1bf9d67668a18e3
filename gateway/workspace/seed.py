"""Per-person workspace directories, created on first contact from shipped templates.

A workspace is the assistant's whole brain as plain files: copying the directory clones the
assistant. Seeding never overwrites anything, and runs only once per workspace, so a file the
person deleted on purpose (BOOTSTRAP.md after the first run, say) does not come back.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from memory.atomic import make_private_dirs
from memory.layout import BOOTSTRAP_FILES, MEMORY_DIR, SEEDED_MARKER, SESSIONS_DIR

__all__ = [
    "BOOTSTRAP_FILES",
    "MEMORY_DIR",
    "SEEDED_MARKER",
    "SESSIONS_DIR",
    "WorkspaceError",
    "ensure_workspace",
    "workspace_path",
]

_PERSON_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class WorkspaceError(Exception):
    pass


def workspace_path(root: Path, person_id: str) -> Path:
    """The directory of one person. Person ids are single safe path components by design."""
    if not _PERSON_ID.match(person_id) or ".." in person_id:
        raise WorkspaceError(f"invalid person id {person_id!r}")
    return root / person_id


def ensure_workspace(root: Path, person_id: str) -> Path:
    """Create the person's workspace if needed and seed it once from the templates."""
    path = workspace_path(root, person_id)
    make_private_dirs(path / MEMORY_DIR)  # 0700, the root and the workspace included
    make_private_dirs(path / SESSIONS_DIR)
    marker = path / SEEDED_MARKER
    if marker.exists():
        return path
    templates = resources.files("gateway.workspace") / "templates"
    for name in BOOTSTRAP_FILES:
        _create_exclusive(path / name, (templates / name).read_text(encoding="utf-8"))
    # The marker goes last: a crash while seeding re-seeds only the files still missing.
    _create_exclusive(
        marker,
        json.dumps({"person": person_id, "created_at": datetime.now(UTC).isoformat()}) + "\n",
    )
    return path


def _create_exclusive(target: Path, text: str) -> None:
    """Write a complete file at `target` unless something already exists there.

    Linking a finished temp file into place is atomic and fails if the name is taken, so a
    person's file is never overwritten and never seen half-written.
    """
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, target)
    finally:
        os.unlink(tmp)
