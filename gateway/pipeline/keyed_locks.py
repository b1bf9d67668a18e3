"""One holder at a time per key, for keys that come and go (people, group chats).

A lock exists only while someone holds or waits for it, so a gateway that has served a
million chats keeps none of theirs. Several keys are taken in the order given: every caller
that takes more than one uses the same order (gateway/pipeline/budgets.py: person, then
group), so two callers can never each hold the key the other waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding or waiting


class KeyedLocks:
    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        """Keys held or waited for right now."""
        return len(self._held)

    @contextlib.asynccontextmanager
    async def hold(self, keys: Sequence[str]) -> AsyncIterator[None]:
        """Hold every key of `keys` (in that order) for the body."""
        async with contextlib.AsyncExitStack() as stack:
            for key in keys:
                await stack.enter_async_context(self._one(key))
            yield

    @contextlib.asynccontextmanager
    async def _one(self, key: str) -> AsyncIterator[None]:
        held = self._held.setdefault(key, _Held())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._held[key]
