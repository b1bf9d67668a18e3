"""A provider whose SDK is imported when first needed, not at start-up.

Importing the `openai` or `anthropic` SDK takes about a second; nothing before the first
model call needs it. `DeferredProvider` knows its name and model at once and builds the real
provider on the first call, or earlier when `warm()` runs it in a worker thread after the
channels started (the assembly does that), so the first reply does not pay for it either.

The worker is a daemon thread of its own, not the event loop's executor: an import cannot be
interrupted, and a Ctrl-C or SIGTERM during start-up should not wait for it to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec
from gateway.agent.providers.base import Provider, TextStream


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
                    self._inner = await in_daemon_thread(self._factory, f"{self.name}-sdk")
        return self._inner

    async def warm(self) -> None:
        """Import the SDK and build the client now (in a worker thread)."""
        await self._get()

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        return await (await self._get()).complete(system, messages, tools, stream=stream)

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


async def in_daemon_thread(work: Callable[[], Any], name: str) -> Any:
    """`work()` in a new daemon thread; its result or exception, delivered on this loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the waiter was cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = work(), None
        except BaseException as exc:  # handed to the waiter, raised there
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future


async def warm_up(provider: Provider) -> None:
    """Build a deferred provider anywhere in a chain of wrappers (`.inner`) now."""
    current: object = provider
    while current is not None:
        if isinstance(current, DeferredProvider):
            await current.warm()
            return
        current = getattr(current, "inner", None)
