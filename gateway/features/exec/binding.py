"""What an approval is bound to: the exact command, its directory, the network flag, and the
content of every workspace file it may run as a script.

An approval ("run once", "always allow this exact command") is stored with its binding's
digest and honoured only while a freshly computed binding has the same digest: change a
character of the command, the directory, the network flag, or one byte of a script it runs
(`sh backup.sh`, `python3 plot.py`, `./tidy`, `make`'s Makefile), and it asks again. An
OpenClaw advisory showed why the binding must include what runs, not only what was shown: an
approved argv was changed before it ran.

Which files count: deciding what a program will execute is the shell's and the program's
business, so when unsure this hashes every workspace file the command names: the program if
it is a path, every argument and every input redirection that names an existing workspace
file (relative to the directory, or under /workspace), and the files known programs read
without naming them (`make`: Makefile; `npm`/`yarn`/`pnpm`: package.json; `just`: justfile).
A command that is not simple (a pipe, a substitution) is split on blanks and shell
operators and each piece is tried the same way. A link is bound by where it points (inside
the workspace: the target's content). A directory is bound as a directory (its content is
not read); a file past `MAX_HASH_BYTES` by its size, change time and inode.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from gateway.features.exec.command import NotSimple, parse_simple
from gateway.features.exec.view import WORKSPACE

__all__ = ["MAX_FILES", "MAX_HASH_BYTES", "ApprovalBinding", "FileBinding", "approval_binding"]

MAX_FILES = 64
MAX_HASH_BYTES = 64 * 1024 * 1024
_IMPLICIT: dict[str, tuple[str, ...]] = {
    "make": ("GNUmakefile", "makefile", "Makefile"),
    "npm": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
    "just": ("justfile", "Justfile", ".justfile"),
}
_SPLIT = re.compile(r"[\s|;&()<>`$]+")


@dataclass(frozen=True, slots=True)
class FileBinding:
    path: str  # workspace-relative
    state: str  # "sha256:<hex>", "link:<target>", "dir", "large:<size>:<ctime>:<ino>"


@dataclass(frozen=True, slots=True)
class ApprovalBinding:
    command: str
    cwd: str  # workspace-relative, normalized ("." for the root)
    network: bool
    files: tuple[FileBinding, ...]
    digest: str  # what an approval stores and compares


def _normal_cwd(cwd: str) -> str:
    text = (cwd or ".").strip()
    if text == WORKSPACE or text.startswith(WORKSPACE + "/"):
        text = text[len(WORKSPACE) :].lstrip("/") or "."
    return posixpath.normpath(text.lstrip("/")) if text else "."


def _candidates(command: str) -> list[str]:
    parsed = parse_simple(command)
    if isinstance(parsed, NotSimple):
        words = [w.strip("'\"") for w in _SPLIT.split(command)]
        return [w for w in words if w]
    names = list(parsed.argv)
    names += [r.target for r in parsed.redirections if r.op == "<"]
    program = posixpath.basename(parsed.argv[0])
    names += list(_IMPLICIT.get(program, ()))
    return names


def _relative(name: str, cwd: str) -> str | None:
    """`name` as a workspace-relative path, or None when it cannot be one."""
    if "\x00" in name or not name:
        return None
    if name.startswith("/"):
        if not name.startswith(WORKSPACE + "/"):
            return None
        rel = name[len(WORKSPACE) + 1 :]
    else:
        rel = posixpath.join(cwd, name)
    rel = posixpath.normpath(rel)
    if rel == "." or rel.startswith("../") or rel == "..":
        return None
    return rel


def _state(workspace: Path, rel: str) -> str | None:
    path = workspace / rel
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
            real = os.path.realpath(path)
        except OSError:
            return None
        root = os.path.realpath(workspace)
        if real.startswith(root + os.sep) and os.path.isfile(real):
            inner = _state(workspace, os.path.relpath(real, root))
            return f"link:{target}:{inner}"
        return f"link:{target}"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return None
    if info.st_size > MAX_HASH_BYTES:
        return f"large:{info.st_size}:{info.st_ctime_ns}:{info.st_ino}"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return f"sha256:{digest.hexdigest()}"


def approval_binding(command: str, cwd: str, network: bool, workspace: Path) -> ApprovalBinding:
    """The binding of running `command` in `cwd` (workspace-relative) of `workspace`."""
    where = _normal_cwd(cwd)
    files: dict[str, str] = {}
    for name in _candidates(command):
        if len(files) >= MAX_FILES:
            break
        rel = _relative(name, where)
        if rel is None or rel in files:
            continue
        state = _state(workspace, rel)
        if state is not None:
            files[rel] = state
    bound = tuple(FileBinding(path, files[path]) for path in sorted(files))
    canonical = json.dumps(
        {
            "command": command,
            "cwd": where,
            "network": bool(network),
            "files": [[b.path, b.state] for b in bound],
        },
        sort_keys=True,
        ensure_ascii=True,
    )
    digest = hashlib.sha256(canonical.encode("ascii")).hexdigest()
    return ApprovalBinding(command, where, bool(network), bound, digest)
