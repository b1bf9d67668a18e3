"""kill -9 at random moments: no run lost, none repeated (a real subprocess, seeded kills)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler import create, delivery_key, read_jobs
from scheduler.recurrence import Every
from scheduler.state import load_state
from tests.scheduler.crash_worker import ZONE, FastClock, read_lines

SPEED = 120.0  # one real second is two virtual minutes
BASE = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


async def spawn(root: Path, clock: FastClock, seed: int, log: Path) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(log, "ab") as sink:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.scheduler.crash_worker",
            str(root),
            repr(clock.base_real),
            BASE.isoformat(),
            str(SPEED),
            str(seed),
            env=env,
            cwd=REPO,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )


async def kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGKILL)
    await proc.wait()


@pytest.mark.parametrize("seed", [7, 11])
async def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    root = tmp_path / "workspaces"
    clock = FastClock(time.time(), BASE, SPEED)
    people = ("ana", "ben", "cy")
    expected: set[str] = set()  # the key of every one-shot run that must reach the person

    def add(person: str, when: str, text: str, kind: str, now: datetime) -> None:
        job, first = create(root / person, ZONE, when, text, kind, now)  # type: ignore[arg-type]
        if not job.recurring and "quiet" not in text:
            assert first is not None
            expected.add(delivery_key(person, job.id, job.created, first))

    for person in people:
        (root / person).mkdir(parents=True, mode=0o700)
        for minute in range(1, 13):
            kind = "agent" if minute % 3 == 0 else "message"
            text = f"{person} {minute}" + (" quiet" if minute % 6 == 0 else "")
            add(person, f"in {minute} minutes", text, kind, BASE)
        add(person, "every minute", f"{person} tick", "message", BASE)
    horizon = BASE + timedelta(minutes=14)
    log = tmp_path / "worker.log"
    kills = added = 0
    while clock.now() < horizon:
        proc = await spawn(root, clock, seed + kills, log)
        await asyncio.sleep(rng.uniform(0.05, 0.9))
        if rng.random() < 0.3 and clock.now() < horizon - timedelta(minutes=3):
            person = rng.choice(people)  # `clawgate schedule add` while it runs (or not)
            add(person, "in 2 minutes", f"{person} added {added}", "message", clock.now())
            added += 1
        await kill(proc)
        kills += 1
    # A last run that is left alone until everything due has gone out.
    proc = await spawn(root, clock, seed + kills, log)
    try:
        for _ in range(200):
            await asyncio.sleep(0.1)
            if clock.now() > horizon + timedelta(minutes=3) and not any(
                load_state(root / p).pending for p in people
            ):
                break
    finally:
        await kill(proc)

    outbox = read_lines(root / "outbox.log")
    calls = read_lines(root / "calls.log")
    delivered = Counter(str(r["key"]) for r in outbox)
    assert max(delivered.values()) == 1, "the outbox took a key twice"
    # Every call's key reached the outbox: nothing claimed was left behind.
    assert {str(c["key"]) for c in calls} == set(delivered)

    for person in people:
        for job in read_jobs(root / person, ZONE).jobs:
            if not isinstance(job.schedule, Every):
                continue
            runs = [k for k in delivered if k.startswith(f"schedule/{person}/{job.id}.")]
            dues = sorted(
                datetime.strptime(k.rsplit("/", 1)[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
                for k in runs
            )
            # Real occurrences, each once, and the job kept running to the end.
            assert all((d - job.created) % job.schedule.interval == timedelta(0) for d in dues)
            assert len(set(dues)) == len(dues) and dues[-1] >= horizon
    one_shots = {str(r["key"]) for r in outbox if "tick" not in str(r["text"])}
    assert one_shots == expected, "a one-shot run was lost or invented"
    assert len(expected) == len(people) * 10 + added
    texts = [str(r["text"]) for r in outbox]
    assert not any("quiet" in t for t in texts)
    repeats = len(calls) - len(delivered)
    print(
        f"seed {seed}: {kills} kills, {len(delivered)} runs delivered once, "
        f"{repeats} repeated call(s) dropped by the outbox key, "
        f"{sum('(late' in t for t in texts)} late"
    )
