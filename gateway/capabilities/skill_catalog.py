"""Finding skills: `skills/<name>/SKILL.md` in a workspace and in the optional shared directory.

Which skills a conversation gets is decided here, by where they live:
- a workspace's own skills (`skills/`): in that workspace's private chats (its owner's DMs);
- the shared directory's skills: in every workspace's private chats, unless the workspace has
  a skill of the same name (its own wins);
- a group chat: only the group's own skills, `groups/<chat>/skills/` in its own area (which
  it may write, and which nothing more private follows); never the owner's nor the shared
  ones. The owner's skills are instructions their private chats follow, so a group may not
  read or change them (memory/layout.py).

A broken skill is skipped with a warning logged once per version of the file; the scan never
raises. Parsed files are cached by (mtime, size, inode), so an unchanged skill costs one lstat
(a scan of 20 skills: ~0.3 ms on the 2-core test machine); a file changed within the last two
seconds is not cached, as for the context files (a same-size edit within one mtime tick).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import gateway.workspace.paths as paths
from gateway.agent.context_files import RACY_WINDOW_NS
from gateway.capabilities.contexts import ContextKind
from gateway.capabilities.skill_file import SKILL_FILE, Skill, SkillProblem, Source, parse_skill
from gateway.config.skills import SkillsSettings

log = logging.getLogger(__name__)

SKILLS_DIR = "skills"
# Folders looked at per directory: a bound on the cost of a turn, not a practical limit.
MAX_SKILL_FOLDERS = 500


@dataclass(frozen=True, slots=True)
class SkillScan:
    skills: tuple[Skill, ...] = ()  # usable, sorted by name
    problems: tuple[SkillProblem, ...] = ()
    shadowed: tuple[Skill, ...] = field(default=())  # shared skills a workspace skill replaces
    root: str = SKILLS_DIR  # workspace-relative folder of the "workspace" skills


EMPTY_SCAN = SkillScan()


class SkillCatalog:
    """Scans skill folders; one catalog serves every workspace of a gateway."""

    def __init__(self, settings: SkillsSettings, *, warn: bool = True) -> None:
        self.settings = settings
        self.warn = warn  # log broken skills (the gateway); a report prints them itself
        self._cache: dict[str, tuple[tuple[int, int, int], Skill | SkillProblem]] = {}
        self._warned: set[tuple[Path, str]] = set()

    def for_context(self, workspace: Path, kind: ContextKind, area: str = "") -> SkillScan:
        """The skills a conversation of this kind in `workspace` may see (`area`: a group's)."""
        if not self.settings.enabled:
            return EMPTY_SCAN
        if kind == "group":
            return self.scan_group(workspace, area) if area else EMPTY_SCAN
        return self.scan(workspace)

    def scan_group(self, workspace: Path, area: str) -> SkillScan:
        """A group's own skills, in its area: nothing of the owner's, nothing shared."""
        root = f"{area}/{SKILLS_DIR}"
        skills, problems = self._scan_dir(workspace / root, "workspace", workspace, area)
        return SkillScan(tuple(sorted(skills, key=lambda s: s.name)), tuple(problems), (), root)

    def scan(self, workspace: Path | None) -> SkillScan:
        """Every skill of `workspace` (if given) and of the shared directory, validated."""
        own: tuple[list[Skill], list[SkillProblem]] = ([], [])
        if workspace is not None:
            own = self._scan_dir(workspace / SKILLS_DIR, "workspace", workspace, None)
        shared_dir = self.settings.shared_dir
        shared = self._scan_dir(shared_dir, "shared", None, None) if shared_dir else ([], [])
        names = {skill.name for skill in own[0]}
        kept_shared = [s for s in shared[0] if s.name not in names]
        shadowed = tuple(s for s in shared[0] if s.name in names)
        skills = tuple(sorted([*own[0], *kept_shared], key=lambda s: (s.name, s.source)))
        return SkillScan(skills, tuple([*own[1], *shared[1]]), shadowed)

    def _scan_dir(
        self, directory: Path, source: Source, workspace: Path | None, area: str | None
    ) -> tuple[list[Skill], list[SkillProblem]]:
        skills: list[Skill] = []
        problems: list[SkillProblem] = []
        try:
            with os.scandir(directory) as listing:
                entries = sorted(
                    (e for e in listing if not e.name.startswith(".")), key=lambda e: e.name
                )
            folders = [e for e in entries if e.is_dir()]
        except FileNotFoundError:
            return skills, problems
        except OSError as exc:
            problems.append(SkillProblem(directory, source, f"cannot list: {exc.strerror}"))
            return skills, self._warn(problems)
        if len(folders) > MAX_SKILL_FOLDERS:
            problems.append(
                SkillProblem(
                    directory,
                    source,
                    f"{len(folders)} folders; only the first {MAX_SKILL_FOLDERS} are read",
                )
            )
        dir_linked = workspace is not None and directory.is_symlink()
        for entry in folders[:MAX_SKILL_FOLDERS]:
            path = os.path.join(entry.path, SKILL_FILE)
            item = self._load(
                path, source, workspace, area, linked=dir_linked or entry.is_symlink()
            )
            (skills if isinstance(item, Skill) else problems).append(item)  # type: ignore[arg-type]
        return skills, self._warn(problems)

    def _load(
        self,
        name: str,
        source: Source,
        workspace: Path | None,
        area: str | None,
        *,
        linked: bool,
    ) -> Skill | SkillProblem:
        """One SKILL.md (a str path: this runs for every skill on every turn, so it is lean)."""
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            return SkillProblem(Path(name), source, f"the folder has no {SKILL_FILE}")
        except OSError as exc:
            return SkillProblem(Path(name), source, f"cannot read: {exc.strerror}")
        if workspace is not None and (linked or stat.S_ISLNK(st.st_mode)):
            path = Path(name)
            # The model opens a workspace skill with read_file, so a linked one must pass the
            # same confinement (no symlink out of the workspace or, for a group, out of its
            # area; no hidden names). Plain files need no check: nothing on the way is a link.
            rel = path.relative_to(workspace).as_posix()
            try:
                paths.resolve_in_workspace(
                    workspace, rel, private=area is None, write=False, area=area or ""
                )
                st = path.stat()
            except paths.PathRefused as exc:
                return SkillProblem(path, source, exc.reason)
            except OSError as exc:
                return SkillProblem(path, source, f"cannot read: {exc.strerror}")
        elif stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(name)
            except OSError as exc:
                return SkillProblem(Path(name), source, f"cannot read: {exc.strerror}")
        if not stat.S_ISREG(st.st_mode):
            return SkillProblem(Path(name), source, f"{SKILL_FILE} is not a regular file")
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(name)
        if cached and cached[0] == signature:
            return cached[1]
        try:
            result = parse_skill(
                Path(name), source, description_max_chars=self.settings.description_max_chars
            )
        except Exception as exc:  # parse_skill is total; a broken skill never fails a turn
            result = SkillProblem(Path(name), source, f"cannot be read ({type(exc).__name__})")
        if time.time_ns() - st.st_mtime_ns > RACY_WINDOW_NS:
            self._cache[name] = (signature, result)
        return result

    def _warn(self, problems: list[SkillProblem]) -> list[SkillProblem]:
        for problem in problems:
            key = (problem.path, problem.message)
            if self.warn and key not in self._warned:
                self._warned.add(key)
                log.warning("skill skipped: %s: %s", _shown(problem.path), problem.message)
        return problems


def _shown(path: Path) -> str:
    """A short path for messages: from the skills directory on."""
    parts = path.parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == SKILLS_DIR:
            return os.path.join(*parts[index:])
    return str(path)
