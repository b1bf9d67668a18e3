"""Hostile files: what a broken schedule file and a broken SKILL.md cost the rest.

Part 1, the scheduler loop with the real clock and real files: `--workspaces` people with
ordinary jobs; after a clean window, two hand edits land (a job whose `when` overflows,
"in 99999999999999 days", and a job list nested 100,000 deep) and a second window of the same
length runs. Per window: CPU time of this process as a share of one core, log records written
by the scheduler, and rescans done. Flat means the second window looks like the first.

Part 2, a SKILL.md whose front matter is 30,000 `[` (the red team's): the time one parse takes,
and a scan of a skills folder holding it beside 20 good skills, first (parses) and cached (one
lstat per skill, what every later message pays).

    python bench/hostile_files.py [--workspaces 100] [--window 10] [--rescan 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler import Scheduler, SchedulerPolicy, WorkspaceRef
from scheduler.jobs import schedule_path

BERLIN = ZoneInfo("Europe/Berlin")


class Counting(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records = 0
        self.tracebacks = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1
        self.tracebacks += record.exc_info is not None


class Host:
    def __init__(self) -> None:
        self.sent = 0

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        self.sent += 1

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        return "HEARTBEAT_OK"


class WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def build(root: Path, workspaces: int, now: datetime, spread: float) -> list[WorkspaceRef]:
    """Each workspace has a minutely reminder, their first runs spread over `spread` seconds
    from now (so both windows deliver), and nine one-shot jobs in the coming days."""
    refs = []
    for n in range(workspaces):
        path = root / f"person{n:04d}"
        path.mkdir(mode=0o700)
        created = now - timedelta(seconds=59) + timedelta(seconds=spread * n / workspaces)
        jobs = [
            {
                "id": 1,
                "kind": "message",
                "text": "stretch",
                "when": "every minute",
                "created": created.isoformat(),
            }
        ]
        jobs += [
            {
                "id": i,
                "kind": "message",
                "text": f"job {i}",
                "when": (now + timedelta(days=i)).isoformat(timespec="seconds"),
                "created": now.isoformat(timespec="seconds"),
            }
            for i in range(2, 11)
        ]
        schedule_path(path).write_text(json.dumps({"version": 1, "next_id": 11, "jobs": jobs}))
        refs.append(WorkspaceRef(path.name, path, BERLIN))
    return refs


async def window(
    seconds: float, counter: Counting, host: Host, passes: list[int]
) -> dict[str, float]:
    records, tracebacks, sent, scans = counter.records, counter.tracebacks, host.sent, passes[0]
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "cpu_percent": 100 * cpu / wall,
        "log_records": counter.records - records,
        "tracebacks": counter.tracebacks - tracebacks,
        "rescans": passes[0] - scans,
        "delivered": host.sent - sent,
    }


async def scheduler_part(args: argparse.Namespace) -> None:
    counter = Counting()
    logging.getLogger("scheduler").addHandler(counter)
    logging.getLogger("scheduler").setLevel(logging.INFO)
    logging.getLogger("scheduler").propagate = False
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        refs = build(root, args.workspaces, datetime.now(UTC), 2 * args.window)
        passes = [0]

        def discover() -> list[WorkspaceRef]:
            passes[0] += 1
            return refs

        host = Host()
        scheduler = Scheduler(
            discover, WallClock(), policy=SchedulerPolicy(rescan_seconds=args.rescan, max_wait=30)
        )
        await scheduler.start(host)
        try:
            clean = await window(args.window, counter, host, passes)
            schedule_path(refs[0].path).write_text(
                json.dumps({"jobs": [{"id": 1, "text": "boom", "when": "in 99999999999999 days"}]})
            )
            schedule_path(refs[1].path).write_text(
                '{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}"
            )
            broken = await window(args.window, counter, host, passes)
        finally:
            await scheduler.stop()
    print(
        f"scheduler, {args.workspaces} workspaces, rescan every {args.rescan:g} s, "
        f"{args.window:g} s per window:"
    )
    for name, row in (("clean", clean), ("two broken files", broken)):
        print(
            f"  {name:>16}: CPU {row['cpu_percent']:5.1f}% of a core, "
            f"{row['log_records']:6.0f} log records ({row['tracebacks']:.0f} tracebacks), "
            f"{row['rescans']:4.0f} rescans, {row['delivered']:4.0f} reminders delivered"
        )


def skill_part(args: argparse.Namespace) -> None:
    from gateway.capabilities.skill_catalog import SkillCatalog
    from gateway.capabilities.skill_file import parse_skill
    from gateway.config.skills import SkillsSettings

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        workspace = Path(tmp)
        for n in range(20):
            folder = workspace / "skills" / f"good-{n}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: good-{n}\ndescription: Skill {n}.\n---\nbody\n"
            )
        evil = workspace / "skills" / "evil" / "SKILL.md"
        evil.parent.mkdir()
        for brackets in (10_000, 30_000):  # under and over the front matter's size cap
            evil.write_text("---\nname: evil\ndescription: " + "[" * brackets + "\n---\n")
            times, outcome = [], ""
            for _ in range(args.repeat):
                started = time.perf_counter()
                try:
                    result = parse_skill(evil, "workspace", description_max_chars=1024)
                    outcome = type(result).__name__ + ": " + getattr(result, "message", "")[:48]
                except RecursionError:
                    outcome = "RecursionError raised (the chat's turn fails)"
                times.append(time.perf_counter() - started)
            print(
                f"SKILL.md of {brackets:,} '[': one parse "
                f"{statistics.median(times) * 1000:.2f} ms (median of {args.repeat}); "
                f"{outcome}"
            )
        # Back-date the files so the catalog may cache them (it skips files changed < 2 s ago).
        for path in workspace.rglob("SKILL.md"):
            stamp = time.time() - 60
            os.utime(path, (stamp, stamp))
        catalog = SkillCatalog(SkillsSettings(), warn=False)
        try:
            started = time.perf_counter()
            scan = catalog.scan(workspace)
            first = time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(100):
                catalog.scan(workspace)
            cached = (time.perf_counter() - started) / 100
            print(
                f"scan of 21 skills with the broken one: first {first * 1000:.2f} ms, then "
                f"{cached * 1000:.3f} ms per message (cached); {len(scan.skills)} usable, "
                f"{len(scan.problems)} reported"
            )
        except RecursionError:
            print("scan of 21 skills with the broken one: RecursionError (every message fails)")


async def main(args: argparse.Namespace) -> None:
    await scheduler_part(args)
    skill_part(args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=100)
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument(
        "--rescan",
        type=float,
        default=1.0,
        help="rescan period (the default setting is 30 s; shorter is harsher)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="parses of the broken skill")
    parser.add_argument("--dir", default=None, help="where to create the workspaces")
    asyncio.run(main(parser.parse_args()))
