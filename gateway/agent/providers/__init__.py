"""LLM providers behind one interface, and the factory that builds one from settings."""

from __future__ import annotations

from typing import Any

from gateway.agent.providers.base import Provider, ProviderError
from gateway.agent.providers.retry import RetryingProvider
from gateway.config.settings import Settings
from gateway.ops.redaction import settings_secrets

__all__ = ["Provider", "ProviderError", "RetryingProvider", "build_provider"]


def build_provider(settings: Settings, *, defer: bool = False) -> Provider:
    """The configured provider wrapped in the shared retry policy. With `defer`, the SDK is
    imported at the first call or `warm_up` (gateway/agent/providers/deferred.py)."""
    llm = settings.llm
    common: dict[str, Any] = {
        "model": llm.resolved_model,
        "api_key": settings.api_key(),
        "base_url": llm.base_url,
        "max_output_tokens": llm.max_output_tokens,
        "timeout_seconds": llm.timeout_seconds,
        "secrets": settings_secrets(settings),
    }

    def build() -> Provider:
        if llm.provider == "anthropic":
            from gateway.agent.providers.anthropic_provider import AnthropicProvider

            return AnthropicProvider(**common)
        from gateway.agent.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(**common)

    inner: Provider
    if defer:
        from gateway.agent.providers.deferred import DeferredProvider

        inner = DeferredProvider(llm.provider, llm.resolved_model, build)
    else:
        inner = build()
    return RetryingProvider(inner, max_attempts=llm.max_attempts)
