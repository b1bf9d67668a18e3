"""The provider interface: one completion with tools, normalized response and usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec

ErrorKind = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "connection",
    "auth",
    "bad_request",
    "context_overflow",
    "bad_response",
    "budget",
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
    """A model call was not made: its person or group chat reached a cap. Its text is the
    polite reply the person gets; never retried, never handed to a fallback model, and no
    fallback result (a crude compaction) may stand in for the refused call."""

    def __init__(self, message: str) -> None:
        super().__init__("budget", message)


class TextStream(Protocol):
    """Where a provider reports an answer's text while the model writes it (a live preview).

    Synchronous on purpose: a slow chat must never slow the model's stream down, so the
    receiver only buffers (gateway/pipeline/streaming.py pushes to the platform at its pace).
    `restart`: everything reported so far is void (the call failed after partial output and
    is tried again, maybe by another model); the preview must not keep it as if final.
    """

    def delta(self, text: str) -> None: ...

    def restart(self) -> None: ...


class ModelInfo(Protocol):
    """Which endpoint and model answer (for a prompt's run info, /status): what the parts
    that only name a model get, so that nothing outside the metered provider can call one
    (gateway/agent/metrics.py `MeteredProvider`, where the budget guard sits)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...


class Provider(ModelInfo, Protocol):
    """One LLM backend. Implementations must not retry on their own: `with_retries` does.

    `name` and `model` are read-only here so that wrappers (retrying, metering) can pass them
    through as properties; a plain attribute satisfies a read-only protocol member too.
    With `stream`, the answer's text is also reported as it comes (`TextStream`); the
    returned `Completion`, usage included, is the same as without.
    """

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion: ...

    async def close(self) -> None: ...
