"""Git never runs a workspace's own code: the flags, environment and config reset for that.

A repository's `.git/config` and `.git/hooks/` are data written by whoever produced the
workspace, and a restored backup is someone else's bytes. Git runs programs named there:
`core.fsmonitor` at every status/add/commit, hooks after a commit (`--no-verify` skips only
pre-commit and commit-msg), filters and diff drivers named in the config. Two locks:

1. every git call overrides the settings that run programs (`SAFE_CONFIG`) and ignores the
   system-wide config (`safe_env`); private modes come from the umask the caller sets;
2. a workspace that arrives from outside (restore) gets a fresh `.git/config` written by us,
   without its hooks or attribute overrides (`reset_git_config`), so a filter or a driver that
   `-c` cannot list is never defined.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["GIT_UNSAFE_PARTS", "SAFE_CONFIG", "reset_git_config", "safe_config_args", "safe_env"]

SAFE_CONFIG = (
    "core.fsmonitor=false",  # a hook path or a command: never
    "core.hooksPath=/dev/null",  # no hook at all (post-commit, post-checkout, ...)
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "core.askPass=true",
    "credential.helper=",
    "core.sshCommand=false",
    "protocol.allow=never",  # versioning never talks to a remote
    "core.sharedRepository=0600",  # objects and refs private to the service user
)
# Paths inside `.git/` that a restore drops (relative to the git dir).
GIT_UNSAFE_PARTS = ("config", "hooks", "info/attributes")
_FRESH_CONFIG = (
    "[core]\n"
    "\trepositoryformatversion = {version}\n"
    "\tfilemode = true\n"
    "\tbare = false\n"
    "\tlogallrefupdates = true\n"
    "\tsharedRepository = 0600\n"
)


def safe_config_args() -> list[str]:
    """`-c key=value` pairs to put before every git subcommand."""
    args: list[str] = []
    for item in SAFE_CONFIG:
        args += ["-c", item]
    return args


def safe_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git call: no system config or attributes, no prompts, and none of
    the variables that would point git at another repository or program."""
    env = dict(os.environ if base is None else base)
    for name in (
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_EXTERNAL_DIFF",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "GIT_EDITOR",
        "GIT_PAGER",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    ):
        env.pop(name, None)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_ATTR_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def reset_git_config(git_dir: Path) -> None:
    """Replace `git_dir`'s config by a fresh one of ours; drop its hooks and attributes.

    The object format is kept (a sha256 repository stays readable); nothing else survives.
    """
    config = git_dir / "config"
    sha256 = False
    if config.is_file() and not config.is_symlink():
        with open(config, "rb") as handle:  # a restored config may be any size: its head
            head = handle.read(1024 * 1024)
        text = head.decode("utf-8", "replace").lower().replace(" ", "").replace("\t", "")
        sha256 = "objectformat=sha256" in text
    for part in GIT_UNSAFE_PARTS:
        path = git_dir / part
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    fresh = _FRESH_CONFIG.format(version=1 if sha256 else 0)
    if sha256:
        fresh += "[extensions]\n\tobjectformat = sha256\n"
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(fresh)
