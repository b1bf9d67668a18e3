"""Can the sandbox run here? If not, exactly why, and what to do about it.

The answer comes from running the real sandbox once (the same arguments every command gets,
on an empty temporary workspace), not from guessing: a kernel setting, an AppArmor rule or a
container's seccomp profile each fail differently, and the text of the failure, read with
the kernel settings, says which. Where the sandbox cannot run, the caller does not offer the
tool at all: there is no host fallback (sandbox.py has no code path without bubblewrap).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Availability", "find_bwrap", "kernel_hint", "probe_failure"]

_CANDIDATES = ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")


@dataclass(frozen=True, slots=True)
class Availability:
    """`ok`, or `reason` (what failed) and `remedy` (what the operator can do)."""

    ok: bool
    bwrap: str = ""
    version: str = ""
    reason: str = ""
    remedy: str = ""

    def line(self) -> str:
        if self.ok:
            return f"sandbox: bubblewrap {self.version} at {self.bwrap} works"
        return f"sandbox unavailable: {self.reason}. {self.remedy}"


def find_bwrap(explicit: str | None = None) -> str | None:
    """The bubblewrap binary: `explicit`, else PATH, else where Debian and CI install it."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found
    return next((c for c in _CANDIDATES if os.access(c, os.X_OK)), None)


def bwrap_version(bwrap: str) -> str:
    try:
        done = subprocess.run(
            [bwrap, "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip().rpartition(" ")[2]


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _in_container() -> str:
    if os.path.exists("/.dockerenv"):
        return "docker"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    cgroup = _read("/proc/1/cgroup") or ""
    if "kubepods" in cgroup:
        return "kubernetes"
    if "docker" in cgroup or "containerd" in cgroup:
        return "docker"
    return ""


def kernel_hint() -> tuple[str, str] | None:
    """A kernel or AppArmor setting that forbids unprivileged user namespaces, if any."""
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return (
            "the kernel forbids unprivileged user namespaces "
            "(kernel.unprivileged_userns_clone = 0)",
            "Allow them: `sysctl -w kernel.unprivileged_userns_clone=1` (and put it in "
            "/etc/sysctl.d/ to keep it)",
        )
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return (
            "user namespaces are switched off (user.max_user_namespaces = 0)",
            "Allow some: `sysctl -w user.max_user_namespaces=10000` (and put it in "
            "/etc/sysctl.d/ to keep it)",
        )
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later)",
            "Give bwrap an AppArmor profile that allows them: a file "
            "/etc/apparmor.d/bwrap with `abi <abi/4.0>, include <tunables/global> "
            "profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }`, then "
            "`apparmor_parser -r /etc/apparmor.d/bwrap`",
        )
    return None


_CONTAINER_REMEDY = (
    "In a container the runtime must allow creating user namespaces and mounting inside "
    "them: Docker's default seccomp profile refuses clone/unshare with CLONE_NEWUSER and "
    "its AppArmor profile refuses the mounts. Run the image with `--security-opt "
    "seccomp=<a profile that allows clone, clone3, unshare, mount, umount2, pivot_root and "
    "setns>` (Podman's default profile does) or `--security-opt seccomp=unconfined`, plus "
    "`--security-opt apparmor=unconfined` (docker-compose: `security_opt:`); no extra "
    "capability and no --privileged is needed"
)


def probe_failure(stderr: str, returncode: int | None) -> tuple[str, str]:
    """Why the trial sandbox failed, and what to do, from its error text and the host."""
    text = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {returncode}"
    hint = kernel_hint()
    if hint is not None:
        return f"{hint[0]}; bubblewrap said: {text}", hint[1]
    container = _in_container()
    lowered = text.lower()
    namespace_problem = any(
        word in lowered
        for word in (
            "namespace",
            "operation not permitted",
            "permission denied",
            "mount",
            "setting up uid",
        )
    )
    if container and namespace_problem:
        return (
            f"this {container} container does not let bubblewrap set up a sandbox ({text})",
            _CONTAINER_REMEDY,
        )
    if namespace_problem:
        return (
            f"bubblewrap cannot set up a sandbox here ({text})",
            "Check that unprivileged user namespaces are allowed (`unshare --user "
            "--map-root-user true` should work as the gateway's user) and that no "
            "security module forbids them",
        )
    return f"the trial sandbox failed ({text})", "Run `bwrap --version` and report the error"
