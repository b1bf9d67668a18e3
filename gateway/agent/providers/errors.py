"""Turn SDK failures into `ProviderError`s that the retry policy and the person can act on.

Both SDKs raise their own exception trees, and OpenAI-compatible servers (Ollama, vLLM,
llama.cpp) word the same failure differently. Classifying by status code, error type and a
few well-known phrasings keeps the rest of the gateway independent of all of that.
Messages are shortened and scrubbed of the API key because they end up in logs and chats,
and some servers echo the key back in 401 bodies.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from gateway.agent.providers.base import ProviderError
from gateway.ops.redaction import Redactor

T = TypeVar("T")

MAX_MESSAGE_CHARS = 200

# Lower-cased substrings seen in "your prompt does not fit" errors. Matched only on 400/413/422
# so that an unrelated server error mentioning tokens is not mistaken for an overflow.
CONTEXT_OVERFLOW_MARKERS = (
    "prompt is too long",  # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    "context_length_exceeded",  # OpenAI error code
    "maximum context length",  # OpenAI and vLLM: "This model's maximum context length is ..."
    "context length",  # generic / vLLM / Ollama: "exceeds the model's context length"
    "context window",  # "input exceeds the context window"
    "context size",  # llama.cpp: "the request exceeds the available context size"
    "exceed_context_size",  # llama.cpp error type
    "prompt too long",  # Ollama: "prompt too long; exceeded max context length by N tokens"
    "too many tokens",
    "input is too long",  # TGI / Bedrock-style gateways
    "`inputs` tokens + `max_new_tokens`",  # TGI validation error
)
_OVERFLOW_STATUSES = frozenset({400, 413, 422})
_RETRYABLE_SERVER_STATUSES = frozenset({500, 502, 503, 504})
# A 429 that will not clear by waiting: retrying only burns attempts.
_QUOTA_CODES = ("insufficient_quota", "spend_limit", "billing")

_SDKS = ("anthropic", "openai")  # both name their error classes the same way
# The SDKs let the JSON decoder's error escape unwrapped when a 2xx body is not JSON.
_DECODE_ERRORS = (json.JSONDecodeError, UnicodeDecodeError)


def short_message(text: str, secrets: Iterable[str] | Redactor) -> str:
    """One line, bounded, key-free: safe to log and to show the person."""
    redact = secrets if isinstance(secrets, Redactor) else Redactor(secrets)
    text = " ".join(redact(text).split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    # Redact again: truncation cannot create the key, but collapsing whitespace could join it.
    return redact(text)


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    if not headers:
        return None
    headers = {key.lower(): value for key, value in headers.items()}
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(type, code, message) from either API's error envelope, or from a bare error object."""
    if isinstance(body, str):
        return "", "", body
    if not isinstance(body, Mapping):
        return "", "", ""
    error = body.get("error", body)
    if isinstance(error, str):  # some compatible servers send {"error": "text"}
        return "", "", error
    if not isinstance(error, Mapping):
        return "", "", ""
    details = error.get("details")
    code = error.get("code") or (details.get("error_code") if isinstance(details, Mapping) else "")
    message = error.get("message") or error.get("detail") or ""
    return str(error.get("type") or ""), str(code or ""), str(message)


def classify_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None,
    *,
    provider: str,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """Map an HTTP error status plus its body to a ProviderError (SDK-independent)."""
    secrets = tuple(secrets)
    error_type, code, api_message = _error_fields(body)
    haystack = " ".join((error_type, code, api_message)).lower()
    if not api_message and isinstance(body, Mapping | list):
        haystack += " " + json.dumps(body, default=str).lower()
    label = f"{error_type or code}: " if (error_type or code) else ""
    message = short_message(f"{provider}: HTTP {status} {label}{api_message}".strip(), secrets)
    retry_after = parse_retry_after(headers)

    def err(kind: Any, retryable: bool) -> ProviderError:
        return ProviderError(
            kind,
            message,
            retryable=retryable,
            retry_after=retry_after if retryable else None,
            status=status,
        )

    if status == 429:
        return err("rate_limit", not any(q in haystack for q in _QUOTA_CODES))
    if status == 529 or "overloaded" in error_type.lower():
        return err("overloaded", True)
    if status in (401, 403):
        return err("auth", False)
    if status == 408:
        return err("timeout", True)
    if status in _OVERFLOW_STATUSES and any(
        m.lower() in haystack for m in CONTEXT_OVERFLOW_MARKERS
    ):
        return err("context_overflow", False)
    if status >= 500:
        # 501/505 and the like mean "never going to work"; the classic gateway errors are
        # transient, and so are the 52x codes proxies such as Cloudflare add.
        return err("server", status in _RETRYABLE_SERVER_STATUSES or status >= 520)
    if 400 <= status < 500:
        return err("bad_request", False)
    return err("bad_response", False)


def bad_response(provider: str, detail: str, *, status: int | None = None) -> ProviderError:
    """A 2xx whose body is not what the API promises: usually a proxy hiccup, so retryable."""
    return ProviderError(
        "bad_response", f"{provider}: unexpected response: {detail}", retryable=True, status=status
    )


def _sdk_errors(name: str) -> tuple[type[Any], ...]:
    """The SDK error classes called `name`, from the SDKs this process imported: an SDK that
    was never imported (the other provider's) raised nothing, so it is not imported here."""
    found = []
    for sdk in _SDKS:
        module = sys.modules.get(sdk)
        if module is not None and isinstance(getattr(module, name, None), type):
            found.append(getattr(module, name))
    return tuple(found)


def map_sdk_error(
    exc: BaseException, *, provider: str, secrets: Iterable[str] = ()
) -> ProviderError | None:
    """The ProviderError for an SDK failure, or None when `exc` is not a provider failure
    (a programming error should surface as itself, not be retried as a network problem)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, _sdk_errors("APITimeoutError")):
        return ProviderError("timeout", f"{provider}: request timed out", retryable=True)
    if isinstance(exc, _sdk_errors("APIConnectionError")):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "unknown cause"
        return ProviderError(
            "connection", f"{provider}: connection failed ({cause})", retryable=True
        )
    if isinstance(exc, _sdk_errors("APIStatusError")):
        return classify_status(
            exc.status_code,
            exc.body,
            exc.response.headers,
            provider=provider,
            secrets=secrets,
        )
    if isinstance(exc, _sdk_errors("APIResponseValidationError")):
        return bad_response(provider, "body does not match the API schema", status=exc.status_code)
    if isinstance(exc, _DECODE_ERRORS):
        return bad_response(provider, "body is not valid JSON")
    return None


async def call_mapped(call: Awaitable[T], *, provider: str, secrets: Iterable[str]) -> T:
    """Await an SDK call; its provider failures come out as `ProviderError`.

    `from None`: an SDK exception's text embeds the raw error body, which may echo the key;
    keeping it as __cause__ would print it in every logged traceback.
    """
    try:
        return await call
    except Exception as exc:
        mapped = map_sdk_error(exc, provider=provider, secrets=secrets)
        if mapped is None:
            raise
        raise mapped from None
