"""The provider interface: one completion with tools, normalized response and usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec

ErrorKind = Literal[
    "rate_limit", "overloaded", "server", "timeout", "connection", "auth", "bad_request",
    "context_overflow", "bad_response", "budget",
]


class ProviderError(Exception):
    """A provider call failed. `retryable` and `retry_after` drive the shared retry policy."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.attempts = 1  # set by RetryingProvider: how many calls were made in all


class BudgetExceeded(ProviderError):
    """A turn nobody asked for just now (a heartbeat, a reminder's task, tidying) was not
    started: its person reached a cap. Never retried, never handed to a fallback model."""

    def __init__(self, message: str) -> None:
        super().__init__("budget", message)


class Provider(Protocol):
    """One LLM backend. Implementations must not retry on their own: `with_retries` does.

    `name` and `model` are read-only here so that wrappers (retrying, metering) can pass them
    through as properties; a plain attribute satisfies a read-only protocol member too.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def complete(
        self, system: SystemPrompt, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion: ...

    async def close(self) -> None: ...
