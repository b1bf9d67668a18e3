"""The timers: one per workspace, and a service that keeps one running for every workspace.

Time comes from an injectable clock and waiting from an injectable `sleep`, so tests drive
days of beats without sleeping. Workspaces are spread over the interval: a new workspace's
first beat lands at a random point of its first interval, every later interval is stretched
or shrunk by up to `jitter_fraction`, and after a restart a workspace keeps its rhythm (the
next beat is one interval after the last one), so workspaces do not all fire together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path

from heartbeat.beat import BeatOutcome, Clock, Heartbeat
from heartbeat.store import HeartbeatState, load_state

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
# After a restart that missed a beat, the catch-up beat comes within this much time.
CATCH_UP_SPREAD = timedelta(minutes=5)


class HeartbeatTimer:
    """Runs `heartbeat.beat()` every `policy.every`, sooner after a deferral."""

    def __init__(
        self,
        heartbeat: Heartbeat,
        clock: Clock,
        *,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if heartbeat.policy.every is None:
            raise ValueError("heartbeats are disabled for this workspace")
        self.heartbeat = heartbeat
        self.every: timedelta = heartbeat.policy.every
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.beats = 0

    def first_due(self, state: HeartbeatState) -> datetime:
        now = self.clock.now()
        last = state.last_beat_at
        if last is not None and timedelta(0) <= now - last < self.every:
            return last + self.every  # keep the rhythm across restarts
        spread = self.every if last is None else min(self.every, CATCH_UP_SPREAD)
        return now + spread * self.rng.random()

    def next_due(self, outcome: BeatOutcome) -> datetime:
        now = self.clock.now()
        if outcome.retry_in is not None:
            return now + outcome.retry_in
        fraction = self.heartbeat.policy.jitter_fraction
        return now + self.every * (1 + self.rng.uniform(-fraction, fraction))

    async def run(self, max_beats: int | None = None) -> None:
        """Beat forever (or `max_beats` times, for tests)."""
        state = await asyncio.to_thread(load_state, self.heartbeat.workspace)
        due = self.first_due(state)
        while max_beats is None or self.beats < max_beats:
            await self.heartbeat.plan(due)
            delay = (due - self.clock.now()).total_seconds()
            if delay > 0:
                await self.sleep(delay)
            outcome = await self.heartbeat.beat()
            self.beats += 1
            due = self.next_due(outcome)


class HeartbeatService:
    """One timer per workspace while the gateway runs; new workspaces join on a rescan."""

    def __init__(
        self,
        discover: Callable[[], Iterable[tuple[str, Path]]],
        make_timer: Callable[[str, Path], HeartbeatTimer | None],
        *,
        sleep: Sleep = asyncio.sleep,
        rescan_seconds: float = 300.0,
    ) -> None:
        self._discover = discover
        self._make_timer = make_timer
        self._sleep = sleep
        self._rescan_seconds = rescan_seconds
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._scanner: asyncio.Task[None] | None = None

    @property
    def persons(self) -> list[str]:
        return sorted(self._tasks)

    async def start(self) -> None:
        self.refresh()
        self._scanner = asyncio.create_task(self._rescan(), name="heartbeat-rescan")
        log.info("heartbeats running for %d workspace(s)", len(self._tasks))

    @property
    def running(self) -> bool:
        """Between `start` and `stop`: a new workspace's timer may be started (`refresh`)."""
        return self._scanner is not None

    def refresh(self) -> int:
        """Start a timer for every workspace that has none yet; returns how many started."""
        started = 0
        for person_id, workspace in self._discover():
            if person_id in self._tasks:
                continue
            timer = self._make_timer(person_id, workspace)
            if timer is None:
                continue
            self._tasks[person_id] = asyncio.create_task(
                self._guarded(person_id, timer), name=f"heartbeat:{person_id}"
            )
            started += 1
        return started

    async def stop(self) -> None:
        tasks = [t for t in (self._scanner, *self._tasks.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._scanner = None

    async def _rescan(self) -> None:
        while True:
            await self._sleep(self._rescan_seconds)
            try:
                self.refresh()
            except Exception:
                log.exception("heartbeat: listing workspaces failed")

    async def _guarded(self, person_id: str, timer: HeartbeatTimer) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await timer.run()
            except Exception:
                log.exception("heartbeat timer of %s stopped", person_id)
            finally:
                # Gone from the map: the next rescan starts it again.
                self._tasks.pop(person_id, None)
