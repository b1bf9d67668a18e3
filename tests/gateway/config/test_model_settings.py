"""Model references, routing, budget and price settings from TOML and the environment."""

from __future__ import annotations

import pytest

from gateway.agent.providers import models_in_use
from gateway.config.models import MAIN_ENDPOINT, ModelRef
from gateway.config.settings import ConfigError, unknown_env_vars


def test_model_references(make_settings):
    settings = make_settings(
        llm={
            "provider": "anthropic",
            "endpoints": {"local": {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1"}},
        }
    )
    llm = settings.llm
    assert llm.ref("claude-haiku-5-5") == ModelRef(MAIN_ENDPOINT, "claude-haiku-5-5")
    assert llm.ref("anthropic:claude-x") == ModelRef(MAIN_ENDPOINT, "claude-x")  # [llm] itself
    assert llm.ref("openai:gpt-5.4-mini") == ModelRef("openai", "gpt-5.4-mini")
    assert llm.ref("local:qwen3:14b") == ModelRef("local", "qwen3:14b")
    assert llm.ref("llama3.1:8b") == ModelRef(MAIN_ENDPOINT, "llama3.1:8b")  # not an endpoint


def test_routing_from_the_environment(make_settings, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__FALLBACKS", "claude-haiku-5-5, backup:gpt-x")
    monkeypatch.setenv("CLAWGATE_LLM__BACKGROUND_MODEL", "claude-haiku-5-5")
    monkeypatch.setenv("CLAWGATE_LLM__ENDPOINTS__BACKUP__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CLAWGATE_LLM__WORKSPACES__ANN__MODEL", "claude-opus-5-5")
    monkeypatch.setenv("CLAWGATE_BUDGET__DAILY_USD", "1.5")
    monkeypatch.setenv("CLAWGATE_PRICES", '{"gpt-x": {"input": 1, "output": 2}}')
    settings = make_settings()
    assert settings.llm.fallbacks == ["claude-haiku-5-5", "backup:gpt-x"]
    assert settings.budget.daily_usd == 1.5 and settings.prices["gpt-x"].output == 2
    roles = [(role, ref.label()) for role, ref in models_in_use(settings)]
    assert roles == [
        ("main", "claude-sonnet-5-5"),
        ("fallback", "claude-haiku-5-5"),
        ("fallback", "backup:gpt-x"),
        ("background", "claude-haiku-5-5"),
        ("for ann", "claude-opus-5-5"),
    ]
    import os

    assert unknown_env_vars(os.environ) == []


def test_bad_values_fail_with_one_line(make_settings):
    with pytest.raises(ConfigError, match=r"llm\.endpoints"):
        make_settings(llm={"endpoints": {"openai": {"base_url": "http://x"}}})
    with pytest.raises(ConfigError, match=r"budget\.warn_at"):
        make_settings(budget={"warn_at": 2})
    with pytest.raises(ConfigError, match=r"prices\.x\.input"):
        make_settings(prices={"x": {"input": -1, "output": 0}})


def test_a_fallback_without_a_key_fails_at_start(make_settings):
    from gateway.agent.providers import build_provider, build_router

    settings = make_settings(llm={"api_key": "sk-main", "fallbacks": ["openai:gpt-5.4-mini"]})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_router(settings, build_provider(settings))
