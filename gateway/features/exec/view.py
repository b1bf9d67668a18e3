"""What a command sees: the bubblewrap arguments that build one sandbox's filesystem.

The sandbox's root is an empty tmpfs. Into it go, read-only, the system (`/usr` and the
`/bin`, `/sbin`, `/lib*` links or directories) and an `/etc` of its own (`build_etc`): copies
of a few named host entries (the loader's cache, time zone, Python's config; never `/etc`
whole: no host accounts, no `/etc/clawgate`, no `/etc/ssl/private`), three host directories
of public links and settings (`/etc/ssl/certs`, `/etc/alternatives`, `/etc/fonts`: hundreds
of links) bound read-only on top of it rather than copied, and, made up for it, `passwd`,
`group`, `hosts`, `hostname` and `nsswitch.conf` (one user, `clawgate`, uid 1000, home
`/tmp`); a private `/tmp` (memory-backed, size-capped), a minimal `/dev` and the `/proc` of the
sandbox's own pid namespace. Nothing else of the host exists inside: not the workspaces root,
not another person's workspace, not the state database, the config file, the gateway's home,
`/home`, `/root`, `/var`, `/opt` or `/run`. Paths the caller names as hidden (the config
file, the state directory, the gateway's home) are covered again if they lie inside a mounted
system directory, so a config file kept under `/usr/local/etc` stays out of reach too.

The person's workspace is at `/workspace`. Its root directory is mounted read-only, and each
top-level folder and file a command may change is mounted read-write on top of it
(`writable_entries`); what a command must not change is simply not among them, so it stays
read-only: `.git` and every other top-level dot-name (the gateway's bookkeeping: the recall
index, the trash, `.clawgate-*` files), the transcripts (`sessions/`) and everything a group
reads (`groups/`, the persona files; memory/layout.py: a private context writes those only
attended and untainted, and a command's output is neither). The `.seen` folders of the inbox
are mounted read-only again inside the writable `inbox/`.

Why the root is read-only rather than the protected names mounted read-only one by one: a
mount on a file is detached the moment the host renames another file over that name, and
every atomic write does exactly that (the heartbeat's state, a reminder, the owner editing
AGENTS.md in the panel): the protection would vanish in the middle of a run (a test shows
it did). A mount on the workspace's directory, which nothing renames, cannot go that way.
What it costs: a command cannot create, remove or rename entries at the top of the
workspace, nor replace a top-level file by renaming (`sed -i` on MEMORY.md); it writes
top-level files in place and does everything else inside folders. A name that does not
exist cannot be created, so no protected file can appear either.

Sources are bound through file descriptors opened with O_NOFOLLOW (`/proc/self/fd/N`), never
by path: a top-level link is never mounted (it resolves inside the sandbox, where the host's
files do not exist), and a name swapped for a link between the check and the mount cannot
redirect a bind to the host.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from memory.layout import INBOX_DIR, SEEN_DIR, Access, write_refusal

__all__ = [
    "ETC_BOUND",
    "HOME",
    "PROXY_SOCKET",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "WORKSPACE",
    "SandboxRefused",
    "build_etc",
    "fixed_env",
    "is_protected",
    "sandbox_cwd",
    "view_args",
    "writable_entries",
]

WORKSPACE = "/workspace"  # the person's workspace (its root read-only, see above)
HOME = "/tmp"  # HOME: private and thrown away, so tools' dotfiles never land in the workspace
PROXY_DIR = "/run/clawgate"
PROXY_SOCKET = f"{PROXY_DIR}/proxy.sock"  # the gateway's proxy, when network is allowed
FORWARDER = f"{PROXY_DIR}/forward.py"
SANDBOX_UID = 1000
SANDBOX_GID = 1000
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

# The system, read-only: a directory is bound, a symlink (merged /usr) is recreated.
SYSTEM_DIRS: tuple[str, ...] = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The parts of /etc programs need (certificates, the loader's cache, Debian's alternatives,
# time zone, MIME types, fonts, ImageMagick's policy, Python's own config). Never
# /etc/ssl/private: a gateway run as root maps the sandbox's user to root's files.
ETC_ENTRIES: tuple[str, ...] = (
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "mime.types",
    "protocols",
    "services",
    "os-release",
    "debian_version",
    "ImageMagick-6",
    "ImageMagick-7",
    "python3",
    "python3.*",
    "magic",
    "magic.mime",
    "gai.conf",
    "mailcap",
)


# Bound read-only from the host instead of copied: directories of public links and settings
# (Debian's alternatives, the CA certificates and their hash links, fontconfig's), about 730
# entries that took most of the sandbox's start-up to copy (70-150 ms). Three more mounts a run
# cost nothing measurable (bench/exec_sandbox.py: start to first byte p50 12-17 ms, as before).
# Where the host has one of them as a link instead (another distribution's layout), it is
# copied as a link, like the entries above.
ETC_BOUND: tuple[str, ...] = ("alternatives", "ssl/certs", "fonts")


class SandboxRefused(Exception):
    """The run cannot be set up safely (a bad directory, a planted link); says why."""


# Made up for the sandbox: one user, a hostname, the loopback names.
MADE_UP_ETC: dict[str, str] = {
    "passwd": (
        f"clawgate:x:{SANDBOX_UID}:{SANDBOX_GID}:clawgate:{HOME}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ),
    "group": f"clawgate:x:{SANDBOX_GID}:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    "hostname": "sandbox\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
}


def _bound_etc() -> list[str]:
    """The `ETC_BOUND` directories this host has as real directories (bound, not copied)."""
    return [
        name
        for name in ETC_BOUND
        if os.path.isdir(f"/etc/{name}") and not os.path.islink(f"/etc/{name}")
    ]


def build_etc(target: Path) -> Path:
    """The sandbox's /etc as one directory: copies of the named host entries (links kept as
    links), empty mount points for the bound directories, and the made-up files. Built once
    per Sandbox, bound read-only as one mount (a mount per entry cost more than the rest of
    the sandbox's start)."""
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    bound = _bound_etc()
    for name in bound:
        (target / name).mkdir(mode=0o700, parents=True, exist_ok=True)
    for pattern in (*ETC_ENTRIES, *(n for n in ETC_BOUND if n not in bound)):
        for source in sorted(glob.glob(os.path.join("/etc", pattern))):
            dest = target / os.path.relpath(source, "/etc")
            dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(OSError, shutil.Error):
                if os.path.islink(source):
                    os.symlink(os.readlink(source), dest)
                elif os.path.isdir(source):
                    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
                elif os.path.isfile(source):
                    shutil.copy2(source, dest)
    for name, text in MADE_UP_ETC.items():
        (target / name).write_text(text, encoding="utf-8")
    return target


def fixed_env(network: bool, proxy_port: int) -> dict[str, str]:
    """The whole environment of bubblewrap and of the command: nothing of the gateway's.

    bubblewrap's own init keeps the environment it was started with (readable inside as
    /proc/1/environ), so bwrap itself is started with exactly this, never with the gateway's.
    """
    env = {
        "PATH": PATH,
        "HOME": HOME,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "USER": "clawgate",
        "LOGNAME": "clawgate",
        "SHELL": "/bin/bash",
    }
    if network:
        proxy = f"http://127.0.0.1:{proxy_port}"
        for name in (
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "all_proxy",
        ):
            env[name] = proxy
    return env


def is_protected(name: str) -> bool:
    """A top-level name a command may not change (memory/layout.py decides, for a context
    that is private but unattended and has outside text in it: a command's)."""
    access = Access(True, attended=False, outside="a command's output")
    return name.startswith(".") or write_refusal(access, name) is not None


def writable_entries(workspace: Path) -> list[str]:
    """The top-level folders and files a command may change, by name (links left out)."""
    names = []
    with contextlib.suppress(OSError), os.scandir(workspace) as entries:
        for entry in entries:
            if is_protected(entry.name):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                    names.append(entry.name)
    return sorted(names)


def seen_folders(workspace: Path) -> list[str]:
    """The `inbox/<day>/.seen` folders (the resized copies a model saw), read-only inside."""
    found = []
    with contextlib.suppress(OSError), os.scandir(workspace / INBOX_DIR) as days:
        for day in days:
            if day.is_dir(follow_symlinks=False) and os.path.isdir(
                os.path.join(day.path, SEEN_DIR)
            ):
                found.append(f"{INBOX_DIR}/{day.name}/{SEEN_DIR}")
    return sorted(found)


def sandbox_cwd(workspace: Path, cwd: str) -> str:
    """The command's directory inside the sandbox, for a workspace-relative `cwd`.

    Refused unless it is an existing directory inside the workspace, judged on the host with
    every symlink resolved (a link to another workspace or to /etc is refused, not followed).
    """
    text = (cwd or ".").strip()
    if text.startswith(WORKSPACE + "/") or text == WORKSPACE:
        text = text[len(WORKSPACE) :].lstrip("/") or "."
    if "\x00" in text or os.path.isabs(text):
        raise SandboxRefused(f"the directory must be inside the workspace, not {cwd!r}")
    rel = PurePosixPath(os.path.normpath(text))
    if rel.parts and rel.parts[0] == "..":
        raise SandboxRefused(f"the directory {cwd!r} is outside the workspace")
    root = os.path.realpath(workspace)
    real = os.path.realpath(os.path.join(root, str(rel)))
    if real != root and not real.startswith(root + os.sep):
        raise SandboxRefused(f"the directory {cwd!r} leads outside the workspace")
    if not os.path.isdir(real):
        raise SandboxRefused(f"the directory {cwd!r} does not exist in the workspace")
    inside = os.path.relpath(real, root)
    return WORKSPACE if inside == "." else f"{WORKSPACE}/{inside}"


@dataclass
class OpenedView:
    """File descriptors the arguments refer to; the caller passes them to bwrap, then closes."""

    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def _open_entry(root_fd: int, rel: str) -> int | None:
    """An O_PATH descriptor of a workspace entry, walking each component without following
    links; None when it does not exist or is (or has become) a link or a special file."""
    fd = os.dup(root_fd)
    try:
        parts = rel.split("/")
        for i, part in enumerate(parts):
            try:
                nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return None
            os.close(fd)
            fd = nxt
            mode = os.fstat(fd).st_mode
            last = i == len(parts) - 1
            if stat.S_ISDIR(mode) or (last and stat.S_ISREG(mode)):
                continue
            return None
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


def _system_args(hidden: Sequence[Path], etc: Path) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    bound = ["/usr"]
    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
            bound.append(top)
    args += ["--ro-bind", str(etc), "/etc"]
    for name in _bound_etc():
        if os.path.isdir(etc / name):  # its mount point, made by build_etc
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
            bound.append(f"/etc/{name}")
    for path in hidden:  # the gateway's config, state and home, if a system mount holds them
        real = os.path.realpath(path)
        if not any(real == b or real.startswith(b + "/") for b in bound):
            continue
        if os.path.isdir(real):
            args += ["--tmpfs", real]
        elif os.path.exists(real):
            args += ["--ro-bind", "/dev/null", real]
    return args


def view_args(
    workspace: Path,
    cwd: str,
    *,
    etc: Path,
    tmp_bytes: int,
    hidden: Sequence[Path] = (),
    proxy_socket: Path | None = None,
    forwarder: Path | None = None,
) -> tuple[list[str], OpenedView]:
    """The bwrap arguments that lay out the sandbox's filesystem, and the descriptors they
    name (pass them with `pass_fds`, close them after bwrap started). Raises SandboxRefused."""
    opened = OpenedView()
    try:
        chdir = sandbox_cwd(workspace, cwd)
        root_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        opened.fds.append(root_fd)
        args = _system_args(hidden, etc)
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(tmp_bytes),
            "--tmpfs",
            "/tmp",
            "--symlink",
            "/tmp",
            "/var/tmp",
            "--ro-bind",
            f"/proc/self/fd/{root_fd}",
            WORKSPACE,
        ]
        for rel, how in [
            *((n, "--bind") for n in writable_entries(workspace)),
            *((n, "--ro-bind") for n in seen_folders(workspace)),
        ]:
            fd = _open_entry(root_fd, rel)
            if fd is None:
                continue
            opened.fds.append(fd)
            args += [how, f"/proc/self/fd/{fd}", f"{WORKSPACE}/{rel}"]
        if proxy_socket is not None and forwarder is not None:
            args += [
                "--dir",
                PROXY_DIR,
                "--bind",
                str(proxy_socket),
                PROXY_SOCKET,
                "--ro-bind",
                str(forwarder),
                FORWARDER,
            ]
        args += ["--remount-ro", "/", "--chdir", chdir]  # the sandbox's own root, too
        return args, opened
    except BaseException:
        opened.close()
        raise
