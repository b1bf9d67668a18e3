"""A scheduler process for the kill -9 test: real files, a fast clock, a file-backed outbox.

Run as `python -m tests.scheduler.crash_worker ROOT BASE_REAL BASE_VIRTUAL SPEED SEED`. Time
runs SPEED times faster than real time from BASE_VIRTUAL (the same mapping in every run, so
restarts see one continuous clock). Deliveries go to ROOT/outbox.log, which, like the
gateway's outbox, drops a key it already holds; every call is also logged to ROOT/calls.log.
Random small pauses widen the windows a kill can land in.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from scheduler import Scheduler, SchedulerPolicy, WorkspaceRef

ZONE = ZoneInfo("Europe/Berlin")


class FastClock:
    def __init__(self, base_real: float, base_virtual: datetime, speed: float) -> None:
        self.base_real, self.base_virtual, self.speed = base_real, base_virtual, speed

    def now(self) -> datetime:
        return self.base_virtual + timedelta(seconds=(time.time() - self.base_real) * self.speed)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.speed)


def append_line(path: Path, record: dict[str, object]) -> None:
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, object]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:  # a line torn by a kill: not written, so not accepted
            continue
    return records


class FileOutbox:
    def __init__(self, root: Path, clock: FastClock, rng: random.Random) -> None:
        self.root, self.clock, self.rng = root, clock, rng
        self.keys = {str(r["key"]) for r in read_lines(root / "outbox.log")}

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        await asyncio.sleep(self.rng.uniform(0, 0.01))
        append_line(self.root / "calls.log", {"key": key, "pid": os.getpid()})
        if key not in self.keys:
            append_line(
                self.root / "outbox.log",
                {"key": key, "person": person_id, "text": text, "at": self.clock.now().isoformat()},
            )
            self.keys.add(key)
        await asyncio.sleep(self.rng.uniform(0, 0.01))

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        await asyncio.sleep(self.rng.uniform(0, 0.02))
        return "HEARTBEAT_OK" if "quiet" in prompt else f"result: {prompt}"


async def main(root: Path, clock: FastClock, seed: int) -> None:
    def discover() -> list[WorkspaceRef]:
        return [WorkspaceRef(p.name, p, ZONE) for p in sorted(root.iterdir()) if p.is_dir()]

    policy = SchedulerPolicy(
        grace=timedelta(days=1),
        late_after=timedelta(seconds=5),
        rescan_seconds=20.0,
        max_wait=30.0,
        retry_delays=(5.0,) * 20,
    )
    scheduler = Scheduler(discover, clock, policy=policy, sleep=clock.sleep)
    await scheduler.start(FileOutbox(root, clock, random.Random(seed)))
    print("started", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    root_arg, base_real, base_virtual, speed, seed = sys.argv[1:6]
    fast = FastClock(
        float(base_real), datetime.fromisoformat(base_virtual).astimezone(UTC), float(speed)
    )
    asyncio.run(main(Path(root_arg), fast, int(seed)))
