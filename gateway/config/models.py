"""Model routing settings: fallbacks, the background model, per-person models, other endpoints.

A model reference is a model name on the `[llm]` endpoint (`claude-haiku-4-5`), or a name
behind an endpoint prefix: `openai:gpt-5.4-mini` or `anthropic:claude-haiku-4-5` (that
provider's public API and its standard key variable) or `local:qwen3` (an endpoint declared
as `[llm.endpoints.local]`). Anything else with a colon (Ollama's `llama3.1:8b`) is a model
name on the `[llm]` endpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

PROVIDERS = ("anthropic", "openai")
MAIN_ENDPOINT = ""  # the `[llm]` section's own provider, base URL and key


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def comma_list(value: Any) -> Any:
    """A TOML list, or in the environment a JSON list or comma-separated names."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from exc
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class EndpointSettings(BaseModel):
    """Another server to route to: `[llm.endpoints.<name>]`, used as `<name>:<model>`."""

    model_config = ConfigDict(extra="forbid")

    provider: Annotated[Literal["anthropic", "openai"], BeforeValidator(_lower)] = "openai"
    base_url: str | None = None
    api_key: SecretStr | None = None  # empty: the provider's standard variable


class ModelOverride(BaseModel):
    """Per person (`[llm.workspaces.<person>]`): the model their conversations use."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("", description="a model reference; empty: the [llm] model")


@dataclass(frozen=True, slots=True)
class ModelRef:
    """One model on one endpoint. `endpoint` is MAIN_ENDPOINT, a provider name, or the name
    of an `[llm.endpoints.<name>]` section."""

    endpoint: str
    model: str

    def label(self) -> str:
        return f"{self.endpoint}:{self.model}" if self.endpoint else self.model


def parse_model_ref(text: str, endpoints: Any = ()) -> ModelRef:
    """`text` as a ModelRef; `endpoints` are the declared endpoint names."""
    text = text.strip()
    if not text:
        raise ValueError("empty model reference")
    prefix, sep, rest = text.partition(":")
    if sep and rest and (prefix in PROVIDERS or prefix in endpoints):
        return ModelRef(prefix, rest)
    return ModelRef(MAIN_ENDPOINT, text)
