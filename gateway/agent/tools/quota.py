"""Quotas on what one turn's tool calls may do: disk per area, bytes per turn, calls per step.

Why: a model follows whatever text it read last, and in a group anyone can write that text.
Four steps of one group mention (write "x" to 20 files, then replace "x" by 100 x's three
times) grew a workspace by 20 MB in under a second. So every turn carries a `TurnBudget`:

- the workspace may use at most `workspace_bytes` of disk (its files, history, trash and
  transcripts; not the rebuildable recall index), and a group's own area (`groups/<chat>/`,
  plus what it deleted into the trash) at most `group_area_bytes`;
- the tool calls of one turn may put at most `turn_write_bytes` into files (a whole file for
  write_file, the added text for append_file, the replacement text for edit_file);
- one model step may ask for at most `step_calls` tool calls, one turn for `turn_calls`.

Each limit is checked before anything is written (an amplifying edit is refused from its
predicted size, never after), is refused with a message that tells the model what happened and
what to do, and is counted (`QuotaCounter`, the gateway's metrics). Defaults are far above what
a person's assistant needs, so only a runaway or manipulated model meets them.

A received file's size is not known before it is written (a platform's declared size is the
sender's word, and often absent), so the media step asks `disk_room` how much may still be
added and streams the file to disk under that cap: a file with no declared size is checked as
strictly as one with, and an area already over its quota takes nothing more.

Disk use is measured by walking the directory; a walk is reused for `DiskUsage.ttl` seconds
and our own writes are added to it as they happen, and a refusal is always re-checked with a
fresh walk (the owner may have freed space since).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from gateway.agent.tools.base import ToolError
from memory.layout import RECALL_DIR, TRASH_DIR

QuotaKind = Literal["workspace", "group_area", "turn_write", "step_calls", "turn_calls"]
QUOTA_KINDS: tuple[QuotaKind, ...] = (
    "workspace",
    "group_area",
    "turn_write",
    "step_calls",
    "turn_calls",
)
# Not counted against the workspace: derived from the rest, rebuilt at will.
UNCOUNTED_DIRS = frozenset({RECALL_DIR})


@dataclass(frozen=True, slots=True)
class Quotas:
    """The limits ([tools] in the settings; docs/configuration.md, "Quotas")."""

    workspace_bytes: int = 1024 * 1024 * 1024
    group_area_bytes: int = 10 * 1024 * 1024
    turn_write_bytes: int = 16 * 1024 * 1024
    step_calls: int = 32
    turn_calls: int = 200


class QuotaCounter(Protocol):
    """Where refusals and written bytes are counted (the gateway's metrics)."""

    def quota_refused(self, kind: QuotaKind) -> None: ...

    def tool_bytes_written(self, count: int) -> None: ...

    def shared_write_refused(self, reason: str) -> None:
        """A private context's write of a group-readable file was refused (memory/layout.py:
        "unattended" or "outside_text")."""


def size_text(count: int) -> str:
    """Bytes for people and models: 10 MiB, 512 KiB, 900 bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            value = count / size
            return (
                f"{value:.0f} {unit}"
                if value >= 10 or value == int(value)
                else f"{value:.1f} {unit}"
            )
    return f"{count} bytes"


def tree_bytes(root: Path, skip: frozenset[str] = frozenset()) -> int:
    """Apparent size of every file under `root` (symlinks not followed; names in `skip` are
    left out at the top level). A missing root is 0."""
    total = 0
    stack = [(root, True)]
    while stack:
        directory, top = stack.pop()
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    if top and entry.name in skip:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((Path(entry.path), False))
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def area_bytes(workspace: Path, area: str) -> int:
    """A group's area and what it deleted (the trash keeps `.trash/<time>/<area>/...`)."""
    total = tree_bytes(workspace / area)
    try:
        with os.scandir(workspace / TRASH_DIR) as stamps:
            for stamp in stamps:
                if stamp.is_dir(follow_symlinks=False):
                    total += tree_bytes(Path(stamp.path) / area)
    except OSError:
        pass
    return total


@dataclass(slots=True)
class _Measured:
    bytes: int
    at: float


class DiskUsage:
    """Disk use per workspace and per group area, shared by every turn of a gateway.

    Thread-safe: the file tools call it from worker threads."""

    def __init__(self, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._measured: dict[tuple[Path, str], _Measured] = {}

    def used(self, workspace: Path, area: str = "", *, fresh: bool = False) -> int:
        key = (workspace, area)
        now = self.clock()
        with self._lock:
            known = self._measured.get(key)
            if known is not None and not fresh and now - known.at < self.ttl:
                return known.bytes
        total = area_bytes(workspace, area) if area else tree_bytes(workspace, UNCOUNTED_DIRS)
        with self._lock:
            self._measured[key] = _Measured(total, now)
        return total

    def add(self, workspace: Path, area: str, delta: int) -> None:
        with self._lock:
            known = self._measured.get((workspace, area))
            if known is not None:
                known.bytes = max(0, known.bytes + delta)


@dataclass(frozen=True, slots=True)
class Room:
    """Bytes that may still be added to a workspace (`bytes` 0 or less: none), and the quota
    that leaves the least."""

    bytes: int
    kind: QuotaKind


@dataclass(slots=True)
class TurnBudget:
    """One turn's share of the quotas (a fresh one per turn; see the module doc)."""

    quotas: Quotas = field(default_factory=Quotas)
    usage: DiskUsage = field(default_factory=DiskUsage)
    counter: QuotaCounter | None = None
    calls: int = 0
    written: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call_refusal(self, position: int, name: str) -> str | None:
        """Whether the tool call at `position` (0-based) of this step may run: None, or the
        error result the model gets instead. Counts the call when it may run."""
        quotas = self.quotas
        if position >= quotas.step_calls:
            self._refused("step_calls")
            return (
                f"{name}: not run: at most {quotas.step_calls} tool calls are run per step "
                f"and this step asked for more. Call fewer tools at once; the first "
                f"{quotas.step_calls} ran."
            )
        if self.calls >= quotas.turn_calls:
            self._refused("turn_calls")
            return (
                f"{name}: not run: this turn already made {quotas.turn_calls} tool calls, "
                "the most one message may use. Answer the person with what you have, or "
                "tell them what is left to do."
            )
        self.calls += 1
        return None

    def check_write(
        self, tool: str, workspace: Path, area: str, *, authored: int, growth: int
    ) -> None:
        """Refuse (ToolError, nothing written) a write that would pass a quota. `authored`:
        the bytes this call puts into the file; `growth`: how much bigger the file gets."""
        quotas = self.quotas
        with self._lock:
            if self.written + authored > quotas.turn_write_bytes:
                self._refused("turn_write")
                raise ToolError(
                    f"{tool}: refused, nothing was written: this turn's tool calls have already "
                    f"written {size_text(self.written)} and this one would add "
                    f"{size_text(authored)}, past the {size_text(quotas.turn_write_bytes)} one "
                    "message may write. Write less, or continue in the next message."
                )
        if growth <= 0:
            return
        if area:
            self._check_disk(
                tool,
                workspace,
                area,
                growth,
                quotas.group_area_bytes,
                "group_area",
                f"this group's area ({area}/)",
                "Shorten or overwrite files there (files deleted there stay in "
                "the trash and still count until the owner empties it), or ask "
                "the owner to raise [tools] group_area_max_bytes.",
            )
        self._check_disk(
            tool,
            workspace,
            "",
            growth,
            quotas.workspace_bytes,
            "workspace",
            "this workspace",
            "Shorten files, or ask the owner to free space "
            "(the trash, old transcripts) or raise [tools] workspace_max_bytes.",
        )

    def _check_disk(
        self,
        tool: str,
        workspace: Path,
        area: str,
        growth: int,
        limit: int,
        kind: QuotaKind,
        what: str,
        advice: str,
    ) -> None:
        used = self.usage.used(workspace, area)
        if used + growth <= limit:
            return
        used = self.usage.used(workspace, area, fresh=True)  # never refuse on a stale count
        if used + growth <= limit:
            return
        self._refused(kind)
        raise ToolError(
            f"{tool}: refused, nothing was written: {what} uses {size_text(used)} "
            f"of its {size_text(limit)} quota and this would add "
            f"{size_text(growth)}. {advice}"
        )

    def disk_room(self, workspace: Path, area: str, *, wanted: int) -> Room:
        """How much may still be added under the disk quotas (this group's area, when there
        is one, and the workspace), for a write whose size is known only once it is made.
        A count that leaves less than `wanted` is measured again first."""
        rooms = [self._room(workspace, "", self.quotas.workspace_bytes, "workspace", wanted)]
        if area:
            rooms.append(
                self._room(workspace, area, self.quotas.group_area_bytes, "group_area", wanted)
            )
        return min(rooms, key=lambda room: room.bytes)

    def _room(self, workspace: Path, area: str, limit: int, kind: QuotaKind, wanted: int) -> Room:
        left = limit - self.usage.used(workspace, area)
        if left < wanted:
            left = limit - self.usage.used(workspace, area, fresh=True)
        return Room(left, kind)

    def no_room(self, room: Room) -> None:
        """Count a write refused because `room` was too small (the metrics)."""
        self._refused(room.kind)

    def wrote(self, workspace: Path, area: str, *, authored: int, growth: int) -> None:
        """Account for a write that happened."""
        with self._lock:
            self.written += authored
        self.usage.add(workspace, "", growth)
        if area:
            self.usage.add(workspace, area, growth)
        if self.counter is not None:
            self.counter.tool_bytes_written(authored)

    def _refused(self, kind: QuotaKind) -> None:
        if self.counter is not None:
            self.counter.quota_refused(kind)

    def shared_write_refused(self, reason: str) -> None:
        """Count a refused write of a group-readable file (gateway/agent/tools/files.py)."""
        if self.counter is not None:
            self.counter.shared_write_refused(reason)
