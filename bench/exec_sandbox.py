"""What the exec sandbox costs: start-up, memory beside the command, 20 commands at once.

- start to first byte: from starting bubblewrap (the exact arguments `Sandbox.run` uses) to
  the first byte the sandbox writes, the wrapper's marker right before it runs `true`; and
  the whole `Sandbox.run("true")` (the workspace walk before and after, the cgroup where
  there is one, output capture), over `--runs` runs each: p50 and p95.
  Targets: first byte p50 <= 30 ms, p95 <= 80 ms.
- memory beside the command: RSS and PSS of the sandbox's own processes (bubblewrap outside
  and its init inside; with network, the relay too) while the command (`sleep`) runs.
- 20 at once: 20 people's workspaces, each running `true` at the same moment: per-run p50 and
  p95 and the wall time; meanwhile a 10 ms ticker on the same event loop measures how late
  it fires (the loop a gateway's DMs share).

    python bench/exec_sandbox.py [--runs 200] [--people 20]

Prints the figures and the load average (the machine is shared: say it with the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

from gateway.features.exec.sandbox import PROXY_PORT, RunRequest, Sandbox, command_argv
from gateway.features.exec.seccomp import filter_program
from gateway.features.exec.settings import ExecSettings
from gateway.features.exec.view import fixed_env, view_args
from gateway.workspace.seed import ensure_workspace


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float]) -> str:
    return f"p50 {_pct(values, 0.5) * 1000:6.1f} ms  p95 {_pct(values, 0.95) * 1000:6.1f} ms"


def first_byte(box: Sandbox, workspace: Path) -> float:
    """Seconds from starting bwrap to the wrapper's marker byte (then `true` runs)."""
    view, opened = view_args(workspace, "", etc=box.etc, tmp_bytes=64 * 1024 * 1024)
    mark_read, mark_write = os.pipe()
    seccomp_fd = os.memfd_create("seccomp", 0)
    os.write(seccomp_fd, filter_program() or b"")
    os.lseek(seccomp_fd, 0, os.SEEK_SET)
    passed = (*opened.fds, mark_write, seccomp_fd)
    argv = command_argv(
        box.availability.bwrap,
        box.settings,
        view,
        "true",
        passed_fds=passed,
        mark_fd=mark_write,
        seccomp_fd=seccomp_fd,
        network=False,
        python=None,
    )
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=fixed_env(False, PROXY_PORT), pass_fds=passed, stdin=subprocess.DEVNULL
    )
    os.close(mark_write)
    select.select([mark_read], [], [], 10)
    elapsed = time.perf_counter() - started
    os.read(mark_read, 1)
    proc.wait()
    os.close(mark_read)
    os.close(seccomp_fd)
    opened.close()
    return elapsed


def _memory(pid: int) -> tuple[int, int]:
    """RSS and PSS of one process, in KiB."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                text = Path(f"/proc/{current}/task/{task}/children").read_text()
                todo += [int(c) for c in text.split()]
        except OSError:
            continue
    return found


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


async def beside_the_command(box: Sandbox, workspace: Path, network: bool) -> str:
    me = os.getpid()
    before = set(_tree(me))
    task = asyncio.create_task(box.run(RunRequest(workspace, "sleep 3", network=network)))
    ours: dict[str, tuple[int, int]] = {}
    for _ in range(200):
        await asyncio.sleep(0.01)
        procs = [p for p in _tree(me) if p not in before]
        names = {p: _name(p) for p in procs}
        if "sleep" in names.values():
            await asyncio.sleep(0.2)  # settled: the command is running
            for pid in procs:
                ours[f"{_name(pid)}:{pid}"] = _memory(pid)
            break
    await task
    own = {k: v for k, v in ours.items() if not k.startswith("sleep")}
    rss = sum(v[0] for v in own.values())
    pss = sum(v[1] for v in own.values())
    command = sum(v[0] for k, v in ours.items() if k.startswith("sleep"))
    parts = ", ".join(f"{k.split(':')[0]} {v[0]} KiB" for k, v in own.items())
    return (
        f"{'network on' if network else 'network off'}: sandbox processes RSS {rss} KiB "
        f"(PSS {pss} KiB) beside the command's own {command} KiB [{parts}]"
    )


async def at_once(box: Sandbox, workspaces: list[Path]) -> tuple[list[float], float, float]:
    lateness: list[float] = []
    running = True

    async def ticker() -> None:
        while running:
            due = time.perf_counter() + 0.01
            await asyncio.sleep(0.01)
            lateness.append(time.perf_counter() - due)

    async def one(ws: Path) -> float:
        started = time.perf_counter()
        await box.run(RunRequest(ws, "true"))
        return time.perf_counter() - started

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    times = await asyncio.gather(*(one(ws) for ws in workspaces))
    wall = time.perf_counter() - started
    running = False
    await tick
    return list(times), wall, max(lateness) if lateness else 0.0


async def main(runs: int, people: int) -> None:
    with tempfile.TemporaryDirectory(prefix="clawgate-bench-exec-") as tmp:
        root = Path(tmp) / "workspaces"
        workspaces = []
        for i in range(people):
            ws = ensure_workspace(root, f"person{i}")
            for folder in (".git", ".recall", ".trash", "sessions"):
                (ws / folder).mkdir(exist_ok=True)
            workspaces.append(ws)
        box = Sandbox.open(ExecSettings(max_running=max(20, people)))
        try:
            print(
                box.availability.line(),
                "| cgroup:",
                f"v{box.cgroups.version}" if box.cgroups else "none",
                "| seccomp:",
                "on" if box._seccomp else "off",
            )
            first_byte(box, workspaces[0])  # warm the page cache
            starts = [first_byte(box, workspaces[0]) for _ in range(runs)]
            print(f"start to first byte ({runs} runs):      {_ms(starts)}")
            whole = []
            for _ in range(runs):
                started = time.perf_counter()
                await box.run(RunRequest(workspaces[0], "true"))
                whole.append(time.perf_counter() - started)
            print(f"Sandbox.run('true') ({runs} runs):       {_ms(whole)}")
            for network in (False, True):
                print(await beside_the_command(box, workspaces[0], network))
            times, wall, late = await at_once(box, workspaces)
            print(
                f"{people} at once: per run {_ms(times)}; all done in {wall * 1000:.0f} ms; "
                f"event loop at most {late * 1000:.1f} ms late"
            )
        finally:
            box.close()
    print(
        "load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), f"({os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--people", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.people))
