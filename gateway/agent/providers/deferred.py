"""A provider whose SDK is imported when first needed, not at start-up.

Importing the `openai` or `anthropic` SDK takes about a second; nothing before the first
model call needs it. `DeferredProvider` knows its name and model at once and builds the real
provider on the first call, or earlier when `warm()` runs it in a worker thread after the
channels started (the assembly does that), so the first reply does not pay for it either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec
from gateway.agent.providers.base import Provider


class DeferredProvider:
    def __init__(self, name: str, model: str, factory: Callable[[], Provider]) -> None:
        self.name = name
        self.model = model
        self._factory = factory
        self._inner: Provider | None = None
        self._lock = asyncio.Lock()

    @property
    def built(self) -> bool:
        return self._inner is not None

    async def _get(self) -> Provider:
        if self._inner is None:
            async with self._lock:
                if self._inner is None:
                    self._inner = await asyncio.to_thread(self._factory)
        return self._inner

    async def warm(self) -> None:
        """Import the SDK and build the client now (in a worker thread)."""
        await self._get()

    async def complete(
        self, system: SystemPrompt, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion:
        return await (await self._get()).complete(system, messages, tools)

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


async def warm_up(provider: Provider) -> None:
    """Build a deferred provider anywhere in a chain of wrappers (`.inner`) now."""
    current: object = provider
    while current is not None:
        if isinstance(current, DeferredProvider):
            await current.warm()
            return
        current = getattr(current, "inner", None)
