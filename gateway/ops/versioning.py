"""Versioned workspaces: every workspace is a git repository, one commit per change.

We drive the `git` binary through `asyncio` subprocesses (no library: git is everywhere, its
CLI is stable, and a subprocess never blocks the event loop). Every call names the repository
explicitly (`--git-dir`, `--work-tree`), so a workspace that sits inside another repository
never touches it. If git is missing, versioning is off after one warning and every method
returns None; nothing else changes.

Not versioned (see IGNORED): `.recall/` (the derived recall index and its embedding cache,
rebuildable from the files), `sessions/` (append-only transcripts: they are their own history,
and committing them would make every turn a commit), `.trash/` (what `delete_file` moved away:
the history already keeps the deleted file), the heartbeat timer's bookkeeping
(`.clawgate-heartbeat.json`) and atomic-write temp files.

Commits are cheap when nothing changed: the stat fingerprint (path, size, mtime) of the
versioned files is compared with the one taken at the last commit, and git runs only if it
differs. Commit subjects read `turn: MEMORY.md, memory/2025-06-01.md`; the body names the
reason, the session and the turn id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from gateway.ops.git_safety import safe_config_args, safe_env
from memory.atomic import atomic_write_text
from memory.layout import GIT_DIR, UNVERSIONED_DIRS, UNVERSIONED_FILES

log = logging.getLogger(__name__)

IGNORED = (
    *(f"/{name}/" for name in UNVERSIONED_DIRS if name != GIT_DIR),
    *(f"/{name}" for name in UNVERSIONED_FILES),
    ".*.tmp",
    "*.sqlite-wal",
    "*.sqlite-shm",
)
GITIGNORE = "# Written by clawgate: derived or append-only data that is not versioned.\n" + "".join(
    f"{pattern}\n" for pattern in IGNORED
)
_SKIP_DIRS = set(UNVERSIONED_DIRS)  # memory.layout
_SKIP_FILES = set(UNVERSIONED_FILES)  # the heartbeat timer's own bookkeeping
REASONS = (
    "init",
    "turn",
    "flush",
    "compaction",
    "heartbeat",
    "hand edit",
    "panel edit",
    "undo",
    "restore",
    "clone",
    "schedule",
    "tidy",
    "consolidate",
)
SUBJECT_FILES = 4
# A workspace this small is fingerprinted on the event loop (about 0.1 ms, less than the hop to
# a worker thread); a larger one in a thread, so a big workspace never stalls other sessions.
INLINE_FINGERPRINT_FILES = 256
Fingerprint = frozenset[tuple[str, int, int]]


class VersioningError(Exception):
    """A versioning command cannot do what was asked; `str()` says why, in one line."""


class UnknownRevision(VersioningError):
    """The revision named does not exist (a mistake in the command, not a failure)."""


@dataclass(frozen=True, slots=True, order=True)
class Change:
    """A file an undo changed on disk, and how: "deleted" (the undone change had created
    it), "restored" (brought back to its earlier text) or "recreated" (it had deleted it)."""

    path: str
    kind: str


def undo_words(changes: list[Change]) -> str:
    """'deleted notes/todo.md; restored MEMORY.md': what an undo did, in words a person
    checks against what they meant to undo."""
    parts = []
    for kind in ("deleted", "recreated", "restored"):
        paths = [change.path for change in changes if change.kind == kind]
        if paths:
            parts.append(f"{kind} {', '.join(paths)}")
    return "; ".join(parts)


_UNDO_KINDS = {"A": "recreated", "D": "deleted"}


@dataclass(frozen=True, slots=True)
class Commit:
    rev: str
    date: str
    subject: str
    files: tuple[str, ...] = ()


def fingerprint(workspace: Path) -> Fingerprint:
    """(relative path, size, mtime) of every file that would be versioned."""
    found: set[tuple[str, int, int]] = set()
    stack = [workspace]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIP_DIRS or directory != workspace:
                    stack.append(Path(entry.path))
                continue
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                continue
            if entry.name in _SKIP_FILES and directory == workspace:
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                rel = os.path.relpath(entry.path, workspace)
                found.add((rel, st.st_size, st.st_mtime_ns))
    return frozenset(found)


class Versioning:
    """Commits workspace changes. One instance per process (the Gateway or a CLI command)."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        git: str | None = None,
        author: tuple[str, str] = ("clawgate", "clawgate@localhost"),
        on_commit: object = None,
    ) -> None:
        self.git = git or shutil.which("git")
        self.author = author
        self.enabled = enabled and self.git is not None
        if enabled and self.git is None:
            log.warning(
                "git not found on PATH: workspace versioning is off "
                "(install git to get history and `clawgate memory undo`)"
            )
        self._locks: dict[Path, asyncio.Lock] = {}
        self._seen: dict[Path, Fingerprint] = {}
        # Called with the reason after each commit (the Gateway counts them in metrics).
        self.on_commit = on_commit

    # --- git plumbing ------------------------------------------------------------------------

    async def _git(
        self, workspace: Path, *args: str, check: bool = True, stdin: bytes | None = None
    ) -> tuple[int, str]:
        assert self.git is not None
        name, email = self.author
        # The workspace's own config never runs code (gateway/ops/git_safety.py), and what git
        # writes (objects, index, restored files) is private whatever our umask (umask 077).
        command = [
            self.git,
            f"--git-dir={workspace / '.git'}",
            f"--work-tree={workspace}",
            *safe_config_args(),
            "-c",
            f"user.name={name}",
            "-c",
            f"user.email={email}",
            "-c",
            "core.quotepath=off",
            "-c",
            "commit.gpgsign=false",
            *args,
        ]
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=workspace,
            env=safe_env(),
            umask=0o077,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin)
        code = proc.returncode or 0
        if check and code != 0:
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise VersioningError(
                f"git {args[0]} failed in {workspace}: {message[-1] if message else code}"
            )
        return code, out.decode("utf-8", "replace")

    def _lock(self, workspace: Path) -> asyncio.Lock:
        return self._locks.setdefault(workspace, asyncio.Lock())

    # --- API -------------------------------------------------------------------------------

    async def ensure_repo(self, workspace: Path) -> bool:
        """Make `workspace` a repository (first use: init, .gitignore, initial commit)."""
        if not self.enabled:
            return False
        workspace = Path(workspace).resolve()
        if (workspace / ".git").exists():
            return True
        async with self._lock(workspace):
            if (workspace / ".git").exists():
                return True
            await self._git(workspace, "init", "-q", "--template=")  # no sample hooks
            ignore = workspace / ".gitignore"
            if not ignore.exists():
                await asyncio.to_thread(atomic_write_text, ignore, GITIGNORE)
            await self._commit_locked(workspace, "init", "", "", "workspace created")
        return True

    async def commit(
        self, workspace: Path, reason: str, *, session: str = "", turn: str = "", note: str = ""
    ) -> str | None:
        """Commit whatever changed in `workspace`; the new revision, or None if nothing did.

        Never raises: a failing git is logged and versioning carries on at the next change.
        """
        if not self.enabled:
            return None
        workspace = Path(workspace).resolve()
        try:
            if not (workspace / ".git").exists():
                await self.ensure_repo(workspace)
            async with self._lock(workspace):
                return await self._commit_locked(workspace, reason, session, turn, note)
        except (VersioningError, OSError) as exc:
            log.warning("workspace commit (%s) failed: %s", reason, exc)
            return None

    async def _commit_locked(
        self, workspace: Path, reason: str, session: str, turn: str, note: str
    ) -> str | None:
        seen = self._seen.get(workspace)
        if seen is not None and len(seen) <= INLINE_FINGERPRINT_FILES:
            current = fingerprint(workspace)
        else:
            current = await asyncio.to_thread(fingerprint, workspace)
        if seen == current:
            return None
        await self._git(workspace, "add", "-A")
        _, status = await self._git(
            workspace, "status", "--porcelain", "-z", "--untracked-files=no"
        )
        changed = _changed_paths(status)
        if not changed:
            self._seen[workspace] = current
            return None
        subject = f"{reason}: {_summary(changed)}"
        body = [f"Reason: {reason}"]
        if session:
            body.append(f"Session: {session}")
        if turn:
            body.append(f"Turn: {turn}")
        if note:
            body.append(note)
        body.append("")
        body.extend(f"{code} {path}" for code, path in changed)
        message = subject + "\n\n" + "\n".join(body) + "\n"
        await self._git(
            workspace, "commit", "-q", "--no-verify", "-F", "-", stdin=message.encode("utf-8")
        )
        _, rev = await self._git(workspace, "rev-parse", "--short", "HEAD")
        self._seen[workspace] = current
        log.info("committed %s in %s: %s", rev.strip(), workspace.name, subject)
        if callable(self.on_commit):
            self.on_commit(reason)
        return rev.strip()

    async def log(self, workspace: Path, *, limit: int = 20, since: str = "") -> list[Commit]:
        workspace = self._require(workspace)
        args = [
            "log",
            f"-n{limit}",
            "--name-only",
            "--date=iso-strict",
            "--format=%x1e%h%x1f%ad%x1f%s",
        ]
        if since:
            args.append(f"--since={since}")
        _, out = await self._git(workspace, *args)
        commits = []
        for block in out.split("\x1e")[1:]:
            head, _, names = block.partition("\n")
            rev, date, subject = head.split("\x1f", 2)
            files = tuple(line for line in names.splitlines() if line.strip())
            commits.append(Commit(rev, date, subject, files))
        return commits

    async def diff(self, workspace: Path, rev: str = "") -> str:
        """The change made by `rev` (default: the last commit), as a unified diff."""
        workspace = self._require(workspace)
        rev = rev or "HEAD"
        _verify_rev(rev)
        await self._resolve(workspace, rev)
        _, out = await self._git(
            workspace,
            "show",
            "--no-ext-diff",
            "--no-textconv",
            "--format=commit %h%n%ad%n%n    %s%n",
            "--date=iso-strict",
            rev,
            "--",
        )
        return out

    async def undo(self, workspace: Path, rev: str = "", *, to: bool = False) -> list[Change]:
        """Undo the change made by `rev` (default: the last one), or with `to` restore every
        versioned file as it was at `rev`. Records the result as an "undo" commit and returns
        the files that changed on disk, and how (`undo_words` says it).
        """
        workspace = self._require(workspace)
        await self.commit(workspace, "hand edit", note="uncommitted changes found before undo")
        rev = rev or "HEAD"
        _verify_rev(rev)
        async with self._lock(workspace):
            full = await self._resolve(workspace, rev)
            _, subject = await self._git(workspace, "log", "-1", "--format=%h %s", full)
            if to:
                await self._git(
                    workspace, "restore", f"--source={full}", "--staged", "--worktree", "--", "."
                )
                note = f"Restored every versioned file as of {subject.strip()}"
            else:
                code, _ = await self._git(
                    workspace, "rev-parse", "--verify", "-q", f"{full}^", check=False
                )
                if code != 0:
                    raise VersioningError(
                        f"{rev} is the workspace's first commit: there is nothing before it"
                    )
                code, _ = await self._git(workspace, "revert", "--no-commit", full, check=False)
                if code != 0:
                    await self._git(workspace, "revert", "--abort", check=False)
                    raise VersioningError(
                        f"cannot undo {subject.strip()} on its own: later changes touched the "
                        f"same lines. Use `--to {rev}^` to restore the files as they were "
                        f"before it (this also drops the later changes)"
                    )
                note = f"Reverted {subject.strip()}"
            _, status = await self._git(
                workspace, "status", "--porcelain", "-z", "--untracked-files=no"
            )
            changed = [
                Change(path, _UNDO_KINDS.get(code, "restored"))
                for code, path in _changed_paths(status)
            ]
            self._seen.pop(workspace, None)
            await self._commit_locked(workspace, "undo", "", "", note)
        return changed

    async def _resolve(self, workspace: Path, rev: str) -> str:
        """The full hash of `rev`, or a one-line error that points at `memory log`."""
        code, full = await self._git(
            workspace, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False
        )
        if code != 0 or not full.strip():
            raise UnknownRevision(
                f"no revision {rev!r} in {workspace.name}: pick one from `clawgate memory log`"
            )
        return full.strip()

    async def head(self, workspace: Path) -> Commit | None:
        if not self.enabled or not (Path(workspace) / ".git").exists():
            return None
        items = await self.log(workspace, limit=1)
        return items[0] if items else None

    def _require(self, workspace: Path) -> Path:
        if not self.enabled:
            raise VersioningError(
                "workspace versioning is off: git is not installed (or versioning.enabled is false)"
            )
        workspace = Path(workspace).resolve()
        if not (workspace / ".git").exists():
            raise VersioningError(
                f"{workspace} is not versioned yet (no .git): it becomes a "
                f"repository at its first turn"
            )
        return workspace


def _verify_rev(rev: str) -> None:
    if rev.startswith("-"):
        raise UnknownRevision(f"not a revision: {rev!r}")


def _changed_paths(porcelain_z: str) -> list[tuple[str, str]]:
    """[(status letter, path)] from `git status --porcelain -z` of the index."""
    changed: list[tuple[str, str]] = []
    parts = porcelain_z.split("\0")
    index = 0
    while index < len(parts):
        item = parts[index]
        index += 1
        if len(item) < 4:
            continue
        code, path = item[:2].strip() or "M", item[3:]
        if code.startswith(("R", "C")):
            index += 1  # the source path of a rename follows
        changed.append((code[0], path))
    return changed


def _summary(changed: list[tuple[str, str]]) -> str:
    names = [path for _, path in changed]
    shown = ", ".join(names[:SUBJECT_FILES])
    more = len(names) - SUBJECT_FILES
    return shown + (f" and {more} more" if more > 0 else "")
