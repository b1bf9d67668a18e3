"""Which commands run without asking: `[exec] allow` entries matched against parsed commands.

An entry is words, written as a simple command is (quotes allowed): `"ls"` allows `ls` with
any further literal arguments, `"git status"` allows `git status` and `git status --short`
but not `git log`, and a final `$` word means exactly: `"git status $"` allows only
`git status` itself. The program is compared as written: `"ls"` does not allow `/bin/ls` or
`./ls` (a workspace file called ls), and `"/usr/bin/ls"` allows only that spelling.

A command matches only if it is a simple command (command.py says what that is), its words
begin with an entry's words, and every redirection writes or reads a file inside the
workspace (or /dev/null, or duplicates a descriptor). Anything else asks.

Programs that run other programs from their arguments would make any entry as wide as a
shell: shells, `env`, `sudo`, `xargs`, `timeout`, `nice`, `eval`, `exec`, `command` and the
like never match, whatever the entries say (and an entry naming one is refused), also by
another path (`/usr/bin/env`). Interpreters and tools that run code from their options
(`python3`, `node`, `git`, `find`, `make`, `sed`, `awk`, `tar`...) may be entries only with
at least one more word (`"python3 plot.py"`, `"git status"`), since alone they would allow
`python3 -c ANYTHING`. A prefix still lets further literal arguments through: list an exact
entry (`$`) where an option could do harm.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.features.exec.command import NotSimple, SimpleCommand, parse_simple
from gateway.features.exec.view import WORKSPACE

__all__ = ["AllowEntry", "Allowlist", "Decision", "redirection_refusal"]

NEVER: frozenset[str] = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "fish",
        "csh",
        "tcsh",
        "busybox",
        "toybox",
        "env",
        "exec",
        "eval",
        "source",
        ".",
        "command",
        "builtin",
        "xargs",
        "sudo",
        "su",
        "doas",
        "pkexec",
        "nohup",
        "nice",
        "ionice",
        "timeout",
        "stdbuf",
        "setsid",
        "unshare",
        "nsenter",
        "chroot",
        "strace",
        "ltrace",
        "gdb",
        "script",
        "watch",
        "parallel",
        "time",
        "alias",
        "unalias",
        "trap",
        "enable",
        "declare",
        "typeset",
        "export",
        "set",
        "shopt",
        "readonly",
        "local",
        "let",
        "fc",
        "hash",
        "ulimit",
        "umask",
        "bwrap",
        "flock",
        "chrt",
        "taskset",
        "prlimit",
        "runuser",
        "setpriv",
        "expect",
        "tmux",
        "screen",
    }
)
BARE_REFUSED: frozenset[str] = frozenset(
    {
        "python",
        "python2",
        "python3",
        "pypy",
        "pypy3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "deno",
        "bun",
        "php",
        "lua",
        "luajit",
        "Rscript",
        "R",
        "julia",
        "tclsh",
        "wish",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "sed",
        "find",
        "git",
        "make",
        "tar",
        "rsync",
        "ssh",
        "scp",
        "vi",
        "vim",
        "nvim",
        "emacs",
        "less",
        "more",
        "man",
        "docker",
        "podman",
        "kubectl",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "pip",
        "pip3",
        "uv",
        "pipx",
        "cargo",
        "go",
        "java",
        "dotnet",
        "gcc",
        "cc",
        "clang",
        "ld",
        "wget",
        "openssl",
        "socat",
        "nc",
        "ncat",
        "sqlite3",
        "psql",
        "mysql",
        "zip",
        "ffmpeg",
        "convert",
        "magick",
        "gs",
        "pandoc",
        "latex",
        "pdflatex",
    }
)


def _program_name(word: str) -> str:
    return posixpath.basename(word) or word


@dataclass(frozen=True, slots=True)
class AllowEntry:
    text: str
    words: tuple[str, ...]
    exact: bool

    @classmethod
    def parse(cls, text: str) -> AllowEntry:
        """An entry from its text; ValueError saying what is wrong with it."""
        body = text.strip()
        exact = body.endswith(" $") or body == "$"
        if exact:
            body = body[:-1].rstrip()
        parsed = parse_simple(body)
        if isinstance(parsed, NotSimple):
            raise ValueError(f"allow entry {text!r} is not a plain command ({parsed.reason})")
        if parsed.redirections:
            raise ValueError(f"allow entry {text!r} has a redirection; entries are words")
        program = _program_name(parsed.argv[0])
        if program in NEVER:
            raise ValueError(
                f"allow entry {text!r}: {program} runs other commands from its "
                "arguments, so it can never be allowed without asking"
            )
        if program in BARE_REFUSED and len(parsed.argv) == 1 and not exact:
            raise ValueError(
                f"allow entry {text!r}: {program} with any arguments can run any "
                f"code; name what it runs (e.g. '{program} script-or-subcommand')"
                f" or end the entry with ' $' to allow it exactly"
            )
        return cls(text, parsed.argv, exact)

    def allows(self, argv: tuple[str, ...]) -> bool:
        if len(argv) < len(self.words) or (self.exact and len(argv) != len(self.words)):
            return False
        return argv[: len(self.words)] == self.words


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str  # why it asks, or which entry allowed it
    entry: str | None = None


def redirection_refusal(command: SimpleCommand, cwd: str = WORKSPACE) -> str | None:
    """Why a redirection of `command` reaches outside the workspace, or None.

    `cwd` is the command's directory inside the sandbox (`/workspace/...`)."""
    base = posixpath.normpath(cwd if cwd.startswith("/") else posixpath.join(WORKSPACE, cwd))
    for redirection in command.redirections:
        if redirection.op == ">&":
            continue
        target = redirection.target
        if target == "/dev/null":
            continue
        path = posixpath.normpath(posixpath.join(base, target))
        if not (path == WORKSPACE or path.startswith(WORKSPACE + "/")):
            return f"a redirection to {target!r}, outside the workspace"
    return None


class Allowlist:
    """The owner's entries; `decide` says whether a command runs without asking."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(AllowEntry.parse(text) for text in entries)

    def decide(self, command: str, cwd: str = WORKSPACE) -> Decision:
        """Allowed only for a simple command matching an entry; never raises."""
        try:
            parsed = parse_simple(command)
        except Exception as exc:  # the grammar is total; this is the last line of defence
            return Decision(False, f"the command could not be read ({type(exc).__name__})")
        if isinstance(parsed, NotSimple):
            return Decision(False, f"not a plain command: {parsed.reason}")
        program = _program_name(parsed.argv[0])
        if program in NEVER:
            return Decision(False, f"{program} runs other commands, so it always asks")
        outside = redirection_refusal(parsed, cwd)
        if outside:
            return Decision(False, outside)
        for entry in self.entries:
            if entry.allows(parsed.argv):
                return Decision(True, f"allowed by {entry.text!r}", entry.text)
        return Decision(False, "no allow entry matches it")
