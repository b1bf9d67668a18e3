"""Run one shell command for one person, inside bubblewrap, within limits. Never outside it.

`Sandbox.open` runs the real sandbox once and raises `SandboxUnavailable` (with the reason and
the remedy) where it cannot run; only an opened `Sandbox` can run anything, and every run's
program is bubblewrap (`command_argv`): there is no code path that hands a command to a host
shell. The caller that gets `SandboxUnavailable` does not offer the tool.

One run: the command (bash, `/bin/bash -c COMMAND`) runs in new user, pid, ipc, uts, net and
(where the kernel has it) cgroup namespaces, as uid 1000 with no capabilities, a seccomp
filter (seccomp.py), its own session (`--new-session`: no terminal to type into) and
`--die-with-parent` (a killed gateway takes its sandboxes with it). What it sees: view.py.
Its environment is fixed (view.fixed_env); bubblewrap itself is started with exactly that,
since its init keeps its own environment readable as /proc/1/environ.

Limits (settings.py), each ending the run with a named reason:
- wall time: the whole sandbox is killed (SIGKILL to bubblewrap; its pid namespace dies with
  its init, so every process inside goes, whatever it does with SIGTERM) -> "timeout";
- CPU (RLIMIT_CPU per process) -> "cpu"; file size (RLIMIT_FSIZE) -> "file_size";
- memory: RLIMIT_AS per process, which works everywhere; where the gateway can make a
  cgroup (cgroups.py) the sandbox's memory as a whole is bounded too (RLIMIT_AS alone bounds
  it only as processes x memory). Every process inside gets oom_score_adj 1000, so under
  memory pressure the kernel kills sandboxed processes first;
- processes: a pids cgroup where one can be made; else RLIMIT_NPROC, set inside the
  sandbox's own user namespace, where it counts only that sandbox's processes (a fork bomb
  stops at the limit while other sandboxes and the gateway, same uid, go on; measured). The
  kernel never applies RLIMIT_NPROC to root, so a root gateway without a cgroup is refused;
- disk: the workspace's growth is watched while the run goes and measured after it
  (disk.py) -> "disk" / "files"; output past its file cap -> "output".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from gateway.agent.web.addresses import AddressPolicy, Resolver, SystemResolver
from gateway.features.exec import forward as forwarder_module
from gateway.features.exec.cgroups import Cgroups, release_into
from gateway.features.exec.disk import DiskSample, tree_bytes
from gateway.features.exec.output import CapturedOutput, OutputCapture, for_model
from gateway.features.exec.probe import Availability, bwrap_version, find_bwrap, probe_failure
from gateway.features.exec.process import Child
from gateway.features.exec.proxy import ProxyServer
from gateway.features.exec.seccomp import filter_program
from gateway.features.exec.settings import ExecSettings
from gateway.features.exec.view import (
    FORWARDER,
    PROXY_SOCKET,
    SANDBOX_GID,
    SANDBOX_UID,
    SandboxRefused,
    build_etc,
    fixed_env,
    view_args,
)

__all__ = [
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxRefused",
    "SandboxUnavailable",
    "command_argv",
    "network_relay_available",
    "probe",
]

Ended = Literal[
    "exited", "signal", "timeout", "cpu", "file_size", "disk", "files", "output", "setup"
]

T = TypeVar("T")
PROXY_PORT = 3128
_POLL_SECONDS = 0.1
_DRAIN_SECONDS = 5.0
_SIGXCPU, _SIGXFSZ = 24, 25  # as bash reports them: 128 + the signal
NICENESS = 19  # every command at the lowest CPU priority (its processes inherit it)
# The wrapper that runs first inside the sandbox. It closes every descriptor bwrap was given
# (a bind source is an O_PATH descriptor of a host directory: inherited, `/proc/self/fd/N/..`
# would reach the workspaces root), writes the marker byte (a run without it failed inside
# bubblewrap, whose error text is then in the output), sets the limits and only then runs the
# command.
_WRAPPER = (
    "{mark}exec {closes}; umask 077; "
    "echo 1000 >/proc/self/oom_score_adj 2>/dev/null; "
    "{autogroup}"
    "ulimit -c 0 -v {memory_kb} -u {nproc} -f {file_kb} && ulimit -S -t {cpu} "
    "&& ulimit -H -t {cpu_hard} "
    "|| {{ echo 'clawgate: the limits could not be set' >&2; exit 126; }}; "
    # The lowest CPU priority: 20 busy commands on two cores must not starve the gateway's
    # own event loop, which answers everyone's DMs (bench/exec_gateway.py measures it).
    f'[ -x /usr/bin/nice ] && exec /usr/bin/nice -n {NICENESS} /bin/bash -c "$1"; '
    'exec /bin/bash -c "$1"'
)
# The sandbox is a session of its own. Where the kernel groups sessions for the scheduler
# (autogroup: only for processes in the root CPU cgroup, as on a bare host or a container
# without its own cgroup; never under systemd slices with CPU accounting or Docker's cgroups)
# its CPU share is its group's, whatever its processes' niceness, so the group's priority is
# lowered too. The kernel takes that from an unprivileged process at most ten times a second,
# machine-wide, so each sandbox tries again for up to three seconds before its command runs:
# commands started together start over a few seconds, and the gateway is not slowed
# (bench/exec_gateway.py). Where autogroup does not apply, niceness alone does the job.
_AUTOGROUP = (
    "read -r _ag </proc/sys/kernel/sched_autogroup_enabled 2>/dev/null; "
    'if [ "$_ag" = 1 ]; then for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 '
    f"20 21 22 23 24 25 26 27 28 29 30; do echo {NICENESS} 2>/dev/null >/proc/self/autogroup"
    " && break; /usr/bin/sleep 0.1 || break; done; fi; "
)
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def in_root_cpu_group() -> bool:
    """Whether this process is in the root CPU cgroup, where the scheduler's autogroups
    apply (a sandbox's own session is then its own group)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return True
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):  # cgroup v1
            return path == "/"
    unified = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), "/")
    if unified == "/":
        return True
    try:
        own = Path("/sys/fs/cgroup", unified.lstrip("/"), "cgroup.controllers")
        return "cpu" not in own.read_text(encoding="ascii").split()
    except OSError:
        return True


class SandboxUnavailable(Exception):
    """The sandbox cannot run here; `availability` says why and what to do."""

    def __init__(self, availability: Availability) -> None:
        super().__init__(availability.line())
        self.availability = availability

    @classmethod
    def because(cls, reason: str) -> SandboxUnavailable:
        """Unavailable for a reason of the gateway's own (stopping, a failed probe)."""
        return cls(Availability(False, reason=reason, remedy="`clawgate doctor` says more"))


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One command for one person. `cwd` is workspace-relative; `timeout` and
    `disk_budget_bytes` can only narrow the settings' limits."""

    workspace: Path
    command: str
    cwd: str = ""
    network: bool = False
    timeout: float | None = None
    disk_budget_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class RunResult:
    """What happened. `exit_code` is the command's status (128+N for signal N), None when
    it never started; `ended` says which limit ended it, if one did."""

    command: str
    cwd: str
    network: bool
    exit_code: int | None
    ended: Ended
    duration: float
    output: CapturedOutput
    workspace_growth: int
    budget_bytes: int
    network_refused: tuple[str, ...] = ()
    network_used: tuple[str, ...] = ()
    seccomp: bool = True

    @property
    def over_budget(self) -> bool:
        return self.workspace_growth > self.budget_bytes

    def for_model(self) -> str:
        """The tool result: status, duration, what ended it, then the marked output."""
        head = [
            f"exit status: {self.exit_code if self.exit_code is not None else 'none'}",
            f"duration: {self.duration:.2f} s",
        ]
        why = _ENDINGS.get(self.ended)
        if why:
            head.append(f"stopped: {why}")
        if self.over_budget:
            head.append(
                f"it added {self.workspace_growth} bytes to the workspace, more than "
                f"its budget of {self.budget_bytes}"
            )
        if self.network_refused:
            head.append("network refused: " + "; ".join(self.network_refused[:5]))
        return "\n".join(head) + "\n" + for_model(self.output)


_ENDINGS: dict[str, str] = {
    "timeout": "it ran out of wall time and the whole sandbox was killed",
    "cpu": "it used up its CPU time (RLIMIT_CPU)",
    "file_size": "it wrote a file larger than the limit (RLIMIT_FSIZE)",
    "disk": "it wrote more to the workspace than its budget allows",
    "files": "it created more files than its budget allows",
    "output": "it printed more than the output limit",
    "setup": "the sandbox could not be set up (the output says why)",
}


def network_relay_available() -> bool:
    """Whether a command may be given the network: its relay to the proxy needs a system
    Python (`Sandbox.network_available`, known without probing)."""
    return _system_python() is not None


def _system_python() -> str | None:
    for candidate in _SYSTEM_PYTHONS:
        real = os.path.realpath(candidate)
        if os.access(real, os.X_OK) and real.startswith("/usr/"):
            return candidate
    return None


def command_argv(
    bwrap: str,
    settings: ExecSettings,
    view: Sequence[str],
    command: str,
    *,
    passed_fds: Sequence[int],
    mark_fd: int | None,
    seccomp_fd: int | None,
    network: bool,
    python: str | None,
    hold: tuple[int, int] | None = None,
    autogroup: bool = False,
) -> list[str]:
    """The whole argument vector of one run. Its program is always bubblewrap.

    `passed_fds` are every descriptor handed to bwrap (closed inside before the command
    runs), `mark_fd` the marker pipe among them; `hold` (info fd, block fd) starts the
    sandbox blocked until the gateway has moved it into its cgroup; `autogroup`: lower the
    sandbox's scheduler autogroup too (`in_root_cpu_group`)."""
    argv = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if hold is not None:
        argv += ["--info-fd", str(hold[0]), "--block-fd", str(hold[1])]
    argv += list(view)
    closes = " ".join(f"{fd}>&-" for fd in sorted(set(passed_fds)) if fd > 2) or "2>&2"
    wrapper = _WRAPPER.format(
        autogroup=_AUTOGROUP if autogroup else "",
        mark=f"printf s >&{mark_fd}; " if mark_fd is not None else "",
        closes=closes,
        cpu=settings.cpu_seconds,
        cpu_hard=settings.cpu_seconds + 1,
        memory_kb=settings.memory_mb * 1024,
        nproc=settings.processes,
        file_kb=settings.file_mb * 1024,
    )
    inner = ["/bin/bash", "-c", wrapper, "clawgate-exec", command]
    if network:
        if python is None:
            raise SandboxRefused("no system Python to relay the network inside the sandbox")
        keep = str(mark_fd) if mark_fd is not None else "-1"
        argv += [python, "-I", "-S", FORWARDER, str(PROXY_PORT), PROXY_SOCKET, keep, "--"]
    return argv + inner


class Sandbox:
    """Runs commands in bubblewrap. Made only by `open`, which proves the sandbox works."""

    def __init__(
        self,
        availability: Availability,
        settings: ExecSettings,
        *,
        hidden_paths: Sequence[Path],
        runtime_dir: Path,
        policy: AddressPolicy,
        resolver: Resolver,
        etc: Path | None = None,
    ) -> None:
        """`etc`: the sandbox's /etc, already built under `runtime_dir` (`open` builds it
        once for the probe and the sandbox), else built here."""
        if not availability.ok or not availability.bwrap:
            raise SandboxUnavailable(availability)
        self.availability = availability
        self.settings = settings
        self.hidden_paths = tuple(hidden_paths)
        self.runtime_dir = runtime_dir
        self.policy = policy
        self.resolver = resolver
        self.python = _system_python()
        self.etc = etc or build_etc(runtime_dir / "etc")
        self._seccomp = filter_program()
        self.cgroups = Cgroups.detect()
        self.autogroup = in_root_cpu_group()  # lower each sandbox's autogroup too
        self._slots = asyncio.Semaphore(settings.max_running)
        # Forks, cgroup writes and workspace walks: off the event loop, in threads of our own
        # (the loop's default pool is small and shared).
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="clawgate-exec")
        self._ids = itertools.count(1)

    @classmethod
    def open(
        cls,
        settings: ExecSettings,
        *,
        hidden_paths: Sequence[Path] = (),
        bwrap: str | None = None,
        policy: AddressPolicy | None = None,
        resolver: Resolver | None = None,
    ) -> Sandbox:
        """A working sandbox, or SandboxUnavailable saying why not and what to do.

        `hidden_paths`: the gateway's config file, state directory and home, kept out of
        the sandbox even where a system directory that is mounted holds them."""
        runtime = Path(tempfile.mkdtemp(prefix="clawgate-exec-"))
        # The sandbox's /etc is made once, for the probe and every command after it (its
        # certificates and alternatives are bound, not copied: view.py).
        etc = build_etc(runtime / "etc") if find_bwrap(bwrap) is not None else None
        availability = probe(settings, bwrap, etc=etc)
        if not availability.ok:
            shutil.rmtree(runtime, ignore_errors=True)
            raise SandboxUnavailable(availability)
        box = cls(
            availability,
            settings,
            hidden_paths=hidden_paths,
            runtime_dir=runtime,
            policy=policy or AddressPolicy(),
            resolver=resolver or SystemResolver(),
            etc=etc,
        )
        if box.cgroups is None and os.geteuid() == 0:
            box.close()
            raise SandboxUnavailable(
                Availability(
                    False,
                    availability.bwrap,
                    availability.version,
                    "the gateway runs as root and cannot make a cgroup with the pids controller, "
                    "so nothing would bound a command's processes (the kernel does not apply "
                    "RLIMIT_NPROC to root)",
                    "Run clawgate as an unprivileged user (the Docker image does), or give it a "
                    "writable cgroup: the cgroup v1 pids hierarchy, or a delegated cgroup v2 "
                    "group with the pids controller enabled",
                )
            )
        return box

    def close(self) -> None:
        self._executor.shutdown(wait=True)  # pending cgroup removals finish first
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        if self.cgroups is not None:
            self.cgroups.remove()

    @property
    def network_available(self) -> bool:
        """Whether a command may be given the network (the relay needs a system Python)."""
        return self.python is not None

    async def run(self, request: RunRequest) -> RunResult:
        """Run `request.command`; raises SandboxRefused when it cannot be set up safely
        (a directory outside the workspace, a link at a protected name)."""
        async with self._slots:
            return await self._run(request)

    async def _run(self, request: RunRequest) -> RunResult:
        settings = self.settings
        wall = min(request.timeout or settings.wall_seconds, settings.wall_seconds)
        budget = settings.write_mb * 1024 * 1024
        if request.disk_budget_bytes is not None:
            budget = max(0, min(budget, request.disk_budget_bytes))
        workspace = request.workspace
        run_id = next(self._ids)
        proxy_socket = self.runtime_dir / f"{run_id}.sock"
        view, opened = view_args(
            workspace,
            request.cwd,
            etc=self.etc,
            tmp_bytes=settings.tmp_mb * 1024 * 1024,
            hidden=self.hidden_paths,
            proxy_socket=proxy_socket if request.network else None,
            forwarder=Path(forwarder_module.__file__) if request.network else None,
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                proxy = None
                if request.network:
                    proxy = await stack.enter_async_context(
                        ProxyServer(
                            proxy_socket,
                            policy=self.policy,
                            resolver=self.resolver,
                            ports=settings.network_ports,
                        )
                    )
                return await self._spawn(request, view, opened.fds, wall, budget, proxy, run_id)
        finally:
            opened.close()

    async def _spawn(
        self,
        request: RunRequest,
        view: list[str],
        fds: list[int],
        wall: float,
        budget: int,
        proxy: ProxyServer | None,
        run_id: int,
    ) -> RunResult:
        settings = self.settings
        seccomp_fd = None
        own_fds: list[int] = []
        if self._seccomp is not None:
            seccomp_fd = os.memfd_create("seccomp", 0)
            os.write(seccomp_fd, self._seccomp)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            own_fds.append(seccomp_fd)
        mark_read, mark_write = os.pipe()
        own_fds += [mark_read]
        passed = [*fds, mark_write, *([seccomp_fd] if seccomp_fd is not None else [])]
        group = hold = release = None
        if self.cgroups is not None:
            group = self.cgroups.for_run(
                f"run-{run_id}",
                settings.processes + 3,
                (settings.memory_mb + settings.tmp_mb) * 1024 * 1024,
            )  # made in a thread
            info_read, info_write = os.pipe()
            block_read, block_write = os.pipe()
            own_fds += [info_read, block_write]
            hold, release = (info_write, block_read), (info_read, block_write)
            passed += [info_write, block_read]
        argv = command_argv(
            self.availability.bwrap,
            settings,
            view,
            request.command,
            passed_fds=passed,
            mark_fd=mark_write,
            seccomp_fd=seccomp_fd,
            network=request.network,
            python=self.python,
            hold=hold,
            autogroup=self.autogroup,
        )
        capture = OutputCapture(
            settings.output_max_bytes, settings.output_file_mb * 1024 * 1024, self.runtime_dir
        )
        before_bytes = await self._in_thread(tree_bytes, request.workspace)
        before_disk = DiskSample.of(request.workspace)
        started = time.monotonic()
        try:
            try:
                if group is not None and hold is not None:
                    try:
                        await self._in_thread(group.prepare)
                    except OSError as exc:  # never run without the bound it stands for
                        raise SandboxRefused(
                            f"the run's cgroup could not be made ({exc})"
                        ) from None
                proc = await Child.start(
                    argv,
                    env=fixed_env(request.network, PROXY_PORT),
                    pass_fds=passed,
                    executor=self._executor,
                )
            finally:
                for fd in (mark_write, *(hold or ())):
                    os.close(fd)
        except BaseException:
            for fd in own_fds:
                os.close(fd)
            capture.discard()
            if group is not None:
                await self._in_thread(group.remove)
            raise
        try:
            if group is not None and release is not None:
                await self._in_thread(release_into, group, proc.pid, *release)
            stop = await self._watch(proc, capture, request.workspace, wall, budget, before_disk)
        finally:
            proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), _DRAIN_SECONDS)
            with contextlib.suppress(TimeoutError, OSError):  # what a stop left in the pipe
                await asyncio.wait_for(proc.stdout.read(), _DRAIN_SECONDS)
            proc.close()
            if group is not None:  # its last process may still be exiting: not waited for
                self._executor.submit(group.remove)
        duration = time.monotonic() - started
        started_ok = _read_marker(mark_read)
        for fd in own_fds:
            os.close(fd)
        growth = max(0, await self._in_thread(tree_bytes, request.workspace) - before_bytes)
        code = proc.returncode
        ended = _ending(stop, code, started_ok)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        output = capture.finish(
            request.workspace, settings.output_dir, f"{stamp}-{os.getpid()}-{id(proc) & 0xFFFF:04x}"
        )
        return RunResult(
            command=request.command,
            cwd=request.cwd or ".",
            network=request.network,
            exit_code=code if started_ok and not stop else None,
            ended=ended,
            duration=duration,
            output=output,
            workspace_growth=growth,
            budget_bytes=budget,
            network_refused=tuple(proxy.refused) if proxy else (),
            network_used=tuple(proxy.connected) if proxy else (),
            seccomp=self._seccomp is not None,
        )

    async def _in_thread(self, func: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, partial(func, *args)
        )

    async def _watch(
        self,
        proc: Child,
        capture: OutputCapture,
        workspace: Path,
        wall: float,
        budget: int,
        before: DiskSample,
    ) -> str:
        """Read the output until the command ends or a limit is met; returns which."""
        stdout = proc.stdout
        over_output = asyncio.Event()

        async def read() -> None:
            while chunk := await stdout.read(65536):
                capture.feed(chunk)
                if capture.over_file_cap:
                    over_output.set()
                    return

        reader = asyncio.create_task(read())
        deadline = time.monotonic() + wall
        try:
            while True:
                if over_output.is_set():
                    return "output"
                if reader.done() and proc.returncode is not None:
                    return ""
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                waiting = proc.wait() if reader.done() else asyncio.shield(reader)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiting, min(_POLL_SECONDS, left))
                grown = before.grown_past(
                    DiskSample.of(workspace), budget, self.settings.max_new_files
                )
                if grown:
                    return grown
        finally:
            if not reader.done():
                proc.kill()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader, _DRAIN_SECONDS)
                reader.cancel()


def _read_marker(fd: int) -> bool:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b"s"
    except (BlockingIOError, OSError):
        return False


def _ending(stop: str, code: int | None, started: bool) -> Ended:
    if not started:
        return "setup"
    if stop in ("timeout", "disk", "files", "output"):
        return stop  # type: ignore[return-value]
    if code == 128 + _SIGXCPU:
        return "cpu"
    if code == 128 + _SIGXFSZ:
        return "file_size"
    if code is not None and code > 128:
        return "signal"
    return "exited"


def probe(
    settings: ExecSettings | None = None, bwrap: str | None = None, *, etc: Path | None = None
) -> Availability:
    """Whether the sandbox runs here: bubblewrap found, and a real run of `true` in the
    same sandbox every command gets (an empty temporary workspace) succeeding. `etc`: the
    sandbox's /etc when the caller has built it already (`Sandbox.open`)."""
    found = find_bwrap(bwrap)
    if found is None:
        return Availability(
            False,
            reason="bubblewrap (bwrap) is not installed",
            remedy="Install it: `apt-get install bubblewrap` (Debian, Ubuntu), "
            "`dnf install bubblewrap` (Fedora), `apk add bubblewrap`",
        )
    version = bwrap_version(found)
    settings = settings or ExecSettings()
    with tempfile.TemporaryDirectory(prefix="clawgate-probe-") as tmp:
        workspace = Path(tmp)
        (workspace / "ws").mkdir()
        view, opened = view_args(
            workspace / "ws", "", etc=etc or build_etc(workspace / "etc"), tmp_bytes=1024 * 1024
        )
        program = filter_program()
        seccomp_fd = None
        if program is not None:
            seccomp_fd = os.memfd_create("seccomp", 0)
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
        try:
            passed = (*opened.fds, *([seccomp_fd] if seccomp_fd is not None else []))
            argv = command_argv(
                found,
                settings,
                view,
                "printf ok",
                passed_fds=passed,
                mark_fd=None,
                seccomp_fd=seccomp_fd,
                network=False,
                python=None,
            )
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=20,
                env=fixed_env(False, PROXY_PORT),
                pass_fds=passed,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return Availability(
                False,
                found,
                version,
                f"bubblewrap could not be started ({exc})",
                "Check that the file is bubblewrap and executable",
            )
        finally:
            opened.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
    if done.returncode == 0 and done.stdout == "ok":
        return Availability(True, found, version)
    reason, remedy = probe_failure(done.stderr or done.stdout, done.returncode)
    return Availability(False, found, version, reason, remedy)
