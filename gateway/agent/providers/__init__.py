"""LLM providers behind one interface, and the factories that build them from settings."""

from __future__ import annotations

from typing import Any

from gateway.agent.providers.base import Provider, ProviderError
from gateway.agent.providers.retry import RetryingProvider
from gateway.agent.providers.routing import FallbackChain, FallbackHook, ModelRouter
from gateway.config.models import MAIN_ENDPOINT, PROVIDERS, ModelRef
from gateway.config.settings import Settings
from gateway.ops.redaction import settings_secrets

__all__ = [
    "ModelRouter",
    "Provider",
    "ProviderError",
    "RetryingProvider",
    "build_endpoint",
    "build_provider",
    "build_router",
    "models_in_use",
]


def build_endpoint(settings: Settings, ref: ModelRef, *, defer: bool = False) -> Provider:
    """One model on one endpoint, without retries. With `defer`, the SDK is imported at the
    first call or `warm_up` (gateway/agent/providers/deferred.py). Raises ConfigError when
    the endpoint has no key."""
    llm = settings.llm
    kind: str
    if ref.endpoint == MAIN_ENDPOINT:
        kind, base_url = llm.provider, llm.base_url
    elif ref.endpoint in PROVIDERS:
        kind, base_url = ref.endpoint, None
    else:
        endpoint = llm.endpoints[ref.endpoint]
        kind, base_url = endpoint.provider, endpoint.base_url
    common: dict[str, Any] = {
        "model": ref.model,
        "api_key": settings.endpoint_key(ref),
        "base_url": base_url,
        "max_output_tokens": llm.max_output_tokens,
        "timeout_seconds": llm.timeout_seconds,
        "secrets": settings_secrets(settings),
    }

    def build() -> Provider:
        if kind == "anthropic":
            from gateway.agent.providers.anthropic_provider import AnthropicProvider

            return AnthropicProvider(**common)
        from gateway.agent.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(**common)

    if defer:
        from gateway.agent.providers.deferred import DeferredProvider

        return DeferredProvider(kind, ref.model, build)
    return build()


def build_provider(settings: Settings, *, defer: bool = False) -> Provider:
    """The `[llm]` model wrapped in the shared retry policy (the router adds the others)."""
    inner = build_endpoint(settings, settings.llm.main_ref(), defer=defer)
    return RetryingProvider(inner, max_attempts=settings.llm.max_attempts)


def models_in_use(settings: Settings) -> list[tuple[str, ModelRef]]:
    """(what for, model) for every model the settings route to, the main one first."""
    llm = settings.llm
    found = [("main", llm.main_ref())]
    found += [("fallback", llm.ref(text)) for text in llm.fallbacks]
    if llm.background_model:
        found.append(("background", llm.ref(llm.background_model)))
    found += [
        (f"for {person}", llm.ref(own.model))
        for person, own in sorted(llm.workspaces.items())
        if own.model
    ]
    return found


def build_router(
    settings: Settings, primary: Provider, *, on_fallback: FallbackHook | None = None
) -> ModelRouter:
    """The router for `settings` around `primary` (the `[llm]` model as `build_provider` made
    it, or a test's own). Each chain gets `primary`'s retry policy; the other models are
    built deferred, so their SDK loads only if they are ever asked."""
    llm = settings.llm
    main = llm.main_ref()
    fallbacks = [llm.ref(text) for text in llm.fallbacks]
    concrete: dict[ModelRef, Provider] = {
        main: primary.inner if isinstance(primary, RetryingProvider) else primary
    }

    def model(ref: ModelRef) -> Provider:
        if ref not in concrete:
            concrete[ref] = build_endpoint(settings, ref, defer=True)
        return concrete[ref]

    def chain(first: ModelRef) -> Provider:
        refs = list(dict.fromkeys([first, *fallbacks, main]))
        if refs == [main]:
            return primary
        members = [model(ref) for ref in refs]
        inner = FallbackChain(members, on_fallback=on_fallback) if len(members) > 1 else members[0]
        if isinstance(primary, RetryingProvider):
            return primary.around(inner)
        return RetryingProvider(inner, max_attempts=llm.max_attempts)

    default = chain(main)
    chains: dict[ModelRef, Provider] = {main: default}

    def chain_for(ref: ModelRef) -> Provider:
        if ref not in chains:
            chains[ref] = chain(ref)
        return chains[ref]

    background = chain_for(llm.ref(llm.background_model)) if llm.background_model else None
    people = {
        person: chain_for(llm.ref(own.model)) for person, own in llm.workspaces.items() if own.model
    }
    return ModelRouter(
        default, background=background, people=people, models=list(concrete.values())
    )
