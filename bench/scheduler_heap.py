"""Scheduler at scale: 100,000 jobs across 1,000 workspaces.

(Not named scheduler.py: a bench runs as a script, with bench/ first on the path, and would
shadow the `scheduler` package for every other bench.)

Measures, with the real clock and real files (fsync included):
- the time to load every job list and state file and build the heap at start;
- the memory that takes (RSS growth of this process);
- firing jitter: 1,000 one-shot jobs due in the same second (one per workspace, the worst
  case: each workspace's claim is its own fsync'd write), measured from the due time to the
  moment the host's `deliver` is called; p50, p99 and max.

The jobs are a mix like a real population: 40% one-shot times in the next 30 days, 30% daily
or weekday wall-clock rules, 20% intervals, 10% raw cron lines, in eight time zones.

    python bench/scheduler_heap.py [--workspaces 1000] [--jobs-per-workspace 100] [--due 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
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

ZONES = (
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "UTC",
    "Australia/Sydney",
    "America/Los_Angeles",
    "Europe/London",
    "Asia/Kolkata",
)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def job_entry(job_id: int, rng: random.Random, now: datetime, zone: ZoneInfo) -> dict:
    roll = rng.random()
    hour, minute = rng.randrange(24), rng.randrange(0, 60, 5)
    if roll < 0.4:
        at = now + timedelta(minutes=rng.randrange(10, 30 * 24 * 60))
        when = at.astimezone(zone).replace(second=0, microsecond=0).isoformat()
    elif roll < 0.7:
        days = rng.choice(("day", "weekday", "monday", "weekend"))
        when = f"every {days} at {hour:02d}:{minute:02d}"
    elif roll < 0.9:
        when = rng.choice(("every hour", "every 2 hours", "every 30 minutes", "every 6 hours"))
    else:
        when = f"cron {minute} {hour} * * {rng.choice(('1-5', '*', '0,6', '1'))}"
    return {
        "id": job_id,
        "kind": "agent" if rng.random() < 0.1 else "message",
        "text": f"job {job_id}: {rng.choice(('call', 'pay', 'check', 'send'))} something",
        "when": when,
        "created": now.isoformat(timespec="seconds"),
    }


def build(root: Path, workspaces: int, per: int, now: datetime) -> list[WorkspaceRef]:
    rng = random.Random(15)
    refs = []
    for n in range(workspaces):
        path = root / f"person{n:04d}"
        path.mkdir(mode=0o700)
        zone = ZoneInfo(ZONES[n % len(ZONES)])
        jobs = [job_entry(i, rng, now, zone) for i in range(1, per + 1)]
        schedule_path(path).write_text(json.dumps({"version": 1, "next_id": per + 1, "jobs": jobs}))
        refs.append(WorkspaceRef(path.name, path, zone))
    return refs


class TimingHost:
    def __init__(self) -> None:
        self.lags: list[float] = []
        self.due: dict[str, float] = {}
        self.done = asyncio.Event()
        self.expected = 0

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        stamp = key.rsplit("/", 1)[1]
        due = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        if text.startswith("jitter"):
            self.lags.append(time.time() - due)
            if len(self.lags) >= self.expected:
                self.done.set()

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        return "HEARTBEAT_OK"


class WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        now = datetime.now(UTC)
        t = time.perf_counter()
        refs = build(root, args.workspaces, args.jobs_per_workspace, now)
        total = args.workspaces * args.jobs_per_workspace
        print(
            f"wrote {total:,} jobs in {args.workspaces:,} workspaces "
            f"in {time.perf_counter() - t:.1f} s"
        )

        host = TimingHost()
        policy = SchedulerPolicy(rescan_seconds=10**6)
        first = Scheduler(lambda: refs, WallClock(), policy=policy)
        gc.collect()
        before = rss_mib()
        t = time.perf_counter()
        await first.load()
        load_s = time.perf_counter() - t
        gc.collect()
        after = rss_mib()
        jobs = first.metrics.jobs
        print(
            f"first start (every next run computed): {load_s:.2f} s for {jobs:,} jobs "
            f"({load_s / max(jobs, 1) * 1e6:.0f} us per job)"
        )
        print(
            f"memory: {after - before:.0f} MiB RSS growth "
            f"({(after - before) * 1024 * 1024 / max(jobs, 1):.0f} bytes per job), "
            f"process {after:.0f} MiB"
        )
        t = time.perf_counter()
        await first._flush()
        print(f"writing the computed next runs to the state files: {time.perf_counter() - t:.2f} s")
        del first
        gc.collect()

        # 1,000 jobs due in the same second, spread over the workspaces (one each), written
        # straight into the job files, then a restart that loads them with everything else.
        step = max(1, len(refs) // max(args.due, 1))
        due_refs = [refs[(i * step) % len(refs)] for i in range(args.due)]
        due = (datetime.now(UTC) + timedelta(seconds=load_s * 1.5 + args.lead)).replace(
            microsecond=0
        )
        for n, ref in enumerate(due_refs):
            path = schedule_path(ref.path)
            data = json.loads(path.read_text())
            data["jobs"].append(
                {
                    "id": data["next_id"],
                    "kind": "message",
                    "text": f"jitter {n}",
                    "when": due.isoformat(),
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            )
            data["next_id"] += 1
            path.write_text(json.dumps(data))
        host.expected = args.due
        scheduler = Scheduler(lambda: refs, WallClock(), policy=policy)
        t = time.perf_counter()
        await scheduler.start(host)
        print(
            f"restart (next runs from the state files): {time.perf_counter() - t:.2f} s "
            f"for {scheduler.metrics.jobs:,} jobs"
        )
        if datetime.now(UTC) >= due:
            print("WARNING: the due time passed before the scheduler was ready; raise --lead")
        try:
            await asyncio.wait_for(
                host.done.wait(), (due - datetime.now(UTC)).total_seconds() + 120
            )
        finally:
            await scheduler.idle()
            await scheduler.stop()
        lags = sorted(host.lags)
        p50 = statistics.median(lags)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
        print(
            f"firing jitter for {len(lags):,} runs due in the same second: "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {lags[-1] * 1000:.0f} ms "
            f"(min {lags[0] * 1000:.1f} ms)"
        )
        print(f"metrics: {scheduler.metrics.as_dict()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000)
    parser.add_argument("--jobs-per-workspace", type=int, default=100)
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument(
        "--lead",
        type=float,
        default=5.0,
        help="seconds of slack between the restart and the due time",
    )
    parser.add_argument("--dir", default=None, help="where to create the workspaces")
    asyncio.run(main(parser.parse_args()))
