"""LLM providers behind one interface, and the factory that builds one from settings."""

from __future__ import annotations

from gateway.agent.providers.base import Provider, ProviderError
from gateway.agent.providers.retry import RetryingProvider
from gateway.config.settings import Settings
from gateway.ops.redaction import settings_secrets

__all__ = ["Provider", "ProviderError", "RetryingProvider", "build_provider"]


def build_provider(settings: Settings) -> Provider:
    """The configured provider wrapped in the shared retry policy."""
    llm = settings.llm
    common = {
        "model": llm.resolved_model,
        "api_key": settings.api_key(),
        "base_url": llm.base_url,
        "max_output_tokens": llm.max_output_tokens,
        "timeout_seconds": llm.timeout_seconds,
        "secrets": settings_secrets(settings),
    }
    inner: Provider
    if llm.provider == "anthropic":
        from gateway.agent.providers.anthropic_provider import AnthropicProvider

        inner = AnthropicProvider(**common)
    else:
        from gateway.agent.providers.openai_provider import OpenAIProvider

        inner = OpenAIProvider(**common)
    return RetryingProvider(inner, max_attempts=llm.max_attempts)
