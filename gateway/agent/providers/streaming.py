"""What both SDK providers share when they stream an answer.

A stream can break after the response started (the server drops the connection, a proxy
times out between events): the SDKs then let the HTTP library's own error escape instead of
their `APIConnectionError`. Mapped here to a retryable "connection" failure, so a broken
stream is retried or handed to a fallback model like a failed request, not reported as a
bug of ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gateway.agent.providers.base import ProviderError


def is_transport_error(exc: BaseException) -> bool:
    """An error of the HTTP library under the SDKs (httpx or httpx2) about the connection."""
    return any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2")
        and cls.__name__ in ("TransportError", "StreamError")
        for cls in type(exc).__mro__
    )


@contextlib.contextmanager
def transport_errors_mapped(provider: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_transport_error(exc):
            raise
        raise ProviderError(
            "connection", f"{provider}: the stream broke off ({type(exc).__name__})", retryable=True
        ) from None
