"""The one retry delay: exponential backoff with a cap and optional jitter.

Channels (a failed poll, a failed send), model providers (a retried request) and the gateway's
delivery and inbox paths all wait the same way after a failure. It lives in a package of its
own, importing nothing, so every package may use it without an import that breaks the rules
(channels/ imports only itself; see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with a cap: first, 2x first ... `cap` seconds, reset after a success.

    With `rng` (returning [0, 1)), each delay is jittered within [delay/2, delay] so callers
    that failed together do not all come back in the same instant.
    """

    def __init__(
        self, first: float = 1.0, cap: float = 30.0, rng: Callable[[], float] | None = None
    ) -> None:
        self.first, self.cap, self.rng = first, cap, rng
        self._attempt = 0

    @staticmethod
    def delay(
        attempt: int, first: float, cap: float, rng: Callable[[], float] | None = None
    ) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        backoff = min(cap, first * 2.0 ** (attempt - 1))
        return backoff if rng is None else backoff * (0.5 + 0.5 * rng())

    def next(self) -> float:
        self._attempt += 1
        return self.delay(self._attempt, self.first, self.cap, self.rng)

    def reset(self) -> None:
        self._attempt = 0
