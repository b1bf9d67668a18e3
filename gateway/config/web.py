"""The `[web]` settings section: the `web_fetch` and `web_search` tools (docs/web.md).

```toml
[web]
backend = "brave"         # ddgs (default, no key) | searxng | brave | tavily | none
# api_key: or BRAVE_API_KEY / TAVILY_API_KEY in the environment
fetch = "linked"          # only URLs the person sent or a search returned (+ allow_hosts)
groups = false            # group chats get the web tools only when this is true
```
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

# The standard variables each keyed backend falls back to (also masked in logs and results).
KEY_ENV = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _list(value: Any) -> Any:
    """A TOML list, or in the environment a JSON list or a comma/space separated string."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list: {exc.msg}") from exc
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    return value


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # web_fetch and web_search in private chats (the owner's and other people's DMs, heartbeats).
    enabled: bool = True
    # Also in group chats (off: a group never gets the web tools).
    groups: bool = False
    backend: Annotated[
        Literal["ddgs", "searxng", "brave", "tavily", "none"], BeforeValidator(_lower)
    ] = "ddgs"
    # SearXNG: its base URL (required). Brave/Tavily: another endpoint (default: theirs).
    search_url: str = ""
    # Brave/Tavily key; unset: BRAVE_API_KEY / TAVILY_API_KEY.
    api_key: SecretStr | None = None
    # ddgs: which engines it asks (comma-separated ddgs names; "auto" lets it pick several).
    ddgs_engines: str = "duckduckgo"
    search_results: int = Field(5, ge=1, le=20)
    search_timeout_seconds: float = Field(10.0, gt=0, le=120)
    search_cache_seconds: float = Field(300.0, ge=0, le=86_400)  # 0: no cache
    # "linked": only URLs the person wrote in this conversation, search results and
    # allow_hosts; "any": whatever the model asks for (still public addresses only).
    fetch: Annotated[Literal["linked", "any"], BeforeValidator(_lower)] = "linked"
    allow_hosts: Annotated[list[str], NoDecode, BeforeValidator(_list)] = Field(
        default_factory=list
    )
    fetch_timeout_seconds: float = Field(15.0, gt=0, le=300)
    fetch_max_bytes: int = Field(3_000_000, ge=10_000, le=100_000_000)
    fetch_max_chars: int = Field(20_000, ge=1_000, le=200_000)
    fetch_max_redirects: int = Field(5, ge=0, le=20)
    # Addresses web_fetch refuses by default that it may reach anyway (a server at home,
    # "192.168.1.20/32"); cloud metadata addresses stay refused.
    allow_networks: Annotated[list[str], NoDecode, BeforeValidator(_list)] = Field(
        default_factory=list
    )

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        cleaned = []
        for host in hosts:
            name = host.strip().lower().rstrip(".")
            if not _HOST.match(name):
                raise ValueError(f"{host!r} is not a host name (example.org or *.example.org)")
            cleaned.append(name)
        return cleaned

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, networks: list[str]) -> list[str]:
        for network in networks:
            try:
                ipaddress.ip_network(network.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{network!r} is not an address or network (192.168.1.20 or 192.168.1.0/24)"
                ) from None
        return [network.strip() for network in networks]

    @field_validator("search_url")
    @classmethod
    def _url(cls, url: str) -> str:
        if url and not re.match(r"^https?://", url):
            raise ValueError(f"search_url must start with http:// or https://, got {url!r}")
        return url

    def search_key(self) -> str:
        """The Brave/Tavily key from the settings or the standard variable ("" if none)."""
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        return os.environ.get(KEY_ENV.get(self.backend, ""), "") if self.backend in KEY_ENV else ""

    def search_problem(self) -> str:
        """Why search cannot work with these settings ("" if it can), naming the setting."""
        if self.backend == "none":
            return (
                'web search is off ([web] backend = "none"); set it to ddgs, searxng, '
                "brave or tavily"
            )
        if self.backend == "searxng" and not self.search_url:
            return (
                "the searxng backend needs its address: set [web] search_url "
                "(CLAWGATE_WEB__SEARCH_URL)"
            )
        if self.backend in KEY_ENV and not self.search_key():
            return (
                f"the {self.backend} backend needs a key: set {KEY_ENV[self.backend]} "
                "or [web] api_key (CLAWGATE_WEB__API_KEY)"
            )
        return ""
