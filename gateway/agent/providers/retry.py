"""One retry policy for every provider (the SDKs' own retries are switched off).

Keeping it here means rate limits, overloads and flaky proxies are handled the same way for
Anthropic and for a local Ollama, `retry-after` is honoured in one place, and tests can
drive the timing through injected `sleep` and `rng`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec
from gateway.agent.providers.base import Provider, ProviderError, TextStream
from retrypolicy import Backoff

# If the server asks for a wait this many times longer than our longest backoff, the person
# would be staring at a silent chat for minutes: fail now and let the caller say so.
GIVE_UP_FACTOR = 2.0


class RetryingProvider:
    """Wraps a Provider; retries only `ProviderError(retryable=True)`.

    The ProviderError that finally escapes carries `attempts`: how many calls were made.
    """

    def __init__(
        self,
        inner: Provider,
        *,
        max_attempts: int = 4,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._rng = rng

    def around(self, inner: Provider) -> RetryingProvider:
        """The same policy (attempts, delays, sleep, randomness) around another provider."""
        return RetryingProvider(
            inner,
            max_attempts=self.max_attempts,
            base_delay=self.base_delay,
            max_delay=self.max_delay,
            sleep=self._sleep,
            rng=self._rng,
        )

    def delay_for(self, attempt: int, error: ProviderError) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based), or None to give up.

        Jitter spreads out callers that failed together (e.g. after an overload), so they do
        not all come back in the same instant; it stays within [backoff/2, backoff].
        """
        jittered = Backoff.delay(attempt, self.base_delay, self.max_delay, self._rng)
        if error.retry_after is None:
            return jittered
        if error.retry_after > GIVE_UP_FACTOR * self.max_delay:
            return None
        return max(error.retry_after, jittered)

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and stream is not None:
                stream.restart()  # what the failed attempt wrote is void
            try:
                return await self.inner.complete(system, messages, tools, stream=stream)
            except ProviderError as error:
                error.attempts = attempt
                if not error.retryable or attempt >= self.max_attempts:
                    raise
                delay = self.delay_for(attempt, error)
                if delay is None:
                    raise
                await self._sleep(delay)

    async def close(self) -> None:
        await self.inner.close()
