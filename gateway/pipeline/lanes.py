"""One turn at a time per session; different sessions in parallel.

`submit` is synchronous on purpose: a channel hands over messages in arrival order, and each
is queued before the next is even looked at, so order within a session is kept by
construction rather than by scheduling luck.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


@dataclass
class _Lane:
    jobs: deque[tuple[Job, asyncio.Future[None]]] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    running: bool = False


class Lanes:
    def __init__(self) -> None:
        self._lanes: dict[str, _Lane] = {}

    def submit(self, key: str, job: Job) -> asyncio.Future[None]:
        """Queue `job` behind the session's earlier jobs; the future settles when it ran."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane = self._lanes.setdefault(key, _Lane())
        lane.jobs.append((job, done))
        if lane.worker is None:
            lane.worker = asyncio.create_task(self._work(key, lane), name=f"lane:{key}")
        return done

    def is_busy(self, key: str) -> bool:
        lane = self._lanes.get(key)
        return lane is not None and (lane.running or bool(lane.jobs))

    def depth(self) -> int:
        """Jobs waiting or running across all sessions (a queue-depth figure for operators)."""
        return sum(len(lane.jobs) + lane.running for lane in self._lanes.values())

    async def drain(self) -> None:
        """Wait until every queued job has run."""
        while self._lanes:
            workers = [lane.worker for lane in self._lanes.values() if lane.worker]
            await asyncio.gather(*workers, return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every running and queued job (shutdown after the grace period)."""
        workers = [lane.worker for lane in self._lanes.values() if lane.worker]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self, key: str, lane: _Lane) -> None:
        try:
            while lane.jobs:
                job, done = lane.jobs.popleft()
                lane.running = True
                try:
                    await job()
                except asyncio.CancelledError:
                    done.cancel()
                    raise
                except Exception as exc:  # one bad turn must not stall the session
                    log.exception("job in session %s failed", key)
                    if not done.done():
                        done.set_exception(exc)
                    done.exception()  # mark retrieved: the log line is the report
                else:
                    if not done.done():
                        done.set_result(None)
                finally:
                    lane.running = False
        finally:
            for _, pending in lane.jobs:
                pending.cancel()
            self._lanes.pop(key, None)
