"""Virtual time and a recording host for scheduler tests (no gateway, no sleeping)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path


class FakeTime:
    """A clock and a `sleep` that only move when the test says so."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = moment

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (deadline, next(self._seq), future))
        await future

    def waiting(self) -> bool:
        return any(not f.done() for _, _, f in self._sleepers)

    async def advance(self, delta: timedelta, settle: object) -> None:
        """Move time forward, stopping at every sleeper's deadline so each one wakes at its
        exact time; `settle()` lets the woken code run before time moves on."""
        target = self._now + delta
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self._now = max(self._now, deadline)
            future.set_result(None)
            await settle()  # type: ignore[operator]
        self._now = target
        await settle()  # type: ignore[operator]


@dataclass
class Sent:
    person_id: str
    text: str
    key: str
    at: datetime


@dataclass
class FakeHost:
    """Delivers into a list, dropping a key it already accepted (like the gateway's outbox)."""

    clock: FakeTime
    sent: list[Sent] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # every deliver call's key
    turns: list[str] = field(default_factory=list)  # every agent prompt
    replies: dict[str, str] = field(default_factory=dict)
    fail: int = 0  # the next `fail` deliveries raise
    block: asyncio.Event | None = None  # when set: deliveries wait on it (a hung send)
    keys: set[str] = field(default_factory=set)

    async def deliver(self, person_id: str, workspace: Path, text: str, *, key: str) -> None:
        self.calls.append(key)
        if self.block is not None:
            await self.block.wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("network down")
        if key in self.keys:
            return
        self.keys.add(key)
        self.sent.append(Sent(person_id, text, key, self.clock.now()))

    async def agent_turn(self, person_id: str, workspace: Path, prompt: str) -> str:
        self.turns.append(prompt)
        return self.replies.get(prompt, f"done: {prompt}")

    def texts(self) -> list[str]:
        return [s.text for s in self.sent]
