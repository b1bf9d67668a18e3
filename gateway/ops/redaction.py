"""One redaction for every text that leaves the process: tool results, files, logs, CLI output.

Why one: a secret leaks through whichever path forgot it. The embeddings endpoint's error once
echoed the memory key into a tool result, hence into the model request, the transcript, the
recall index and the backups. A `Redactor` knows every configured secret (every `SecretStr`
in the settings, the standard key variables, `log_redact`) and more can be registered at run
time (`add`, for example the env secrets of an MCP server). It also masks credentials carried
inside URLs (`user:password@host`, `?api-key=...`), which HTTP libraries like to print.

A `Redactor` is an object passed to whoever writes text out (no module-level registry), so
two gateways in one test process never share secrets.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from pydantic import BaseModel, SecretStr

__all__ = [
    "KEY_ENV_VARS",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "RedactingStream",
    "Redactor",
    "redact",
    "settings_secrets",
]

REDACTED = "[redacted]"
# Shorter strings are not masked: they would mangle ordinary words ("key", "none", "1234"),
# and keyless local servers get placeholders of that size.
MIN_SECRET_CHARS = 6
KEY_ENV_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

# scheme://user:password@host -> scheme://[redacted]@host
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@:]+:[^/\s@]*@")
# A URL, then inside it ?api-key=..., &token=..., access_token=..., sig=...: the value.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&;](?:api[-_]?key|key|token|access[-_]?token|secret|password|passwd|sig|"
    r"signature|auth)=)[^&#;]+",
    re.IGNORECASE,
)
# The Telegram Bot API puts the token in the path: /bot123456:ABC-def/...
_BOT_TOKEN_PATH = re.compile(r"/bot\d+:[A-Za-z0-9_-]{20,}")


class Redactor:
    """Masks every known secret and URL credential in a text; `add` registers more."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        """Register more secrets (ignores empty and too-short values)."""
        known = set(self._secrets)
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET_CHARS and secret not in known:
                known.add(secret)
                self._secrets.append(secret)
        # Longest first, so a secret containing another is masked whole.
        self._secrets.sort(key=len, reverse=True)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if "://" in text:
            text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
            if "=" in text:
                text = _URL.sub(_mask_query, text)
        if "/bot" in text:
            text = _BOT_TOKEN_PATH.sub(f"/bot{REDACTED}", text)
        return text

    @classmethod
    def from_settings(cls, settings: Any, *extra: str) -> Redactor:
        return cls([*settings_secrets(settings), *extra])


def _mask_query(url: re.Match[str]) -> str:
    return _QUERY_SECRET.sub(lambda m: f"{m['name']}{REDACTED}", url[0])


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with `secrets` (and URL credentials) masked: a one-off `Redactor`."""
    return Redactor(secrets)(text)


def settings_secrets(settings: Any) -> list[str]:
    """Every secret the settings know: each `SecretStr` field at any depth, the standard key
    variables (providers and the openai embedder fall back to them), `log_redact`, the env
    and header values of every MCP server, and the web search key."""
    found = [os.environ.get(name, "") for name in KEY_ENV_VARS]
    found.extend(_secret_fields(settings))
    found.extend(getattr(settings, "log_redact", None) or [])
    mcp = getattr(settings, "mcp", None)  # every MCP server's env and header values
    if mcp is not None and hasattr(mcp, "secrets"):
        found.extend(mcp.secrets())
    web = getattr(settings, "web", None)  # a search key from BRAVE_API_KEY/TAVILY_API_KEY too
    if web is not None and hasattr(web, "search_key"):
        found.append(web.search_key())
    return [value for value in found if value]


def _secret_fields(model: Any) -> Iterator[str]:
    if not isinstance(model, BaseModel):
        return
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        if isinstance(value, SecretStr):
            yield value.get_secret_value()
        elif isinstance(value, BaseModel):
            yield from _secret_fields(value)
        elif isinstance(value, dict):  # named entries: [llm.endpoints.<name>] api_key
            for entry in value.values():
                yield from _secret_fields(entry)


class RedactingStream(io.TextIOBase):
    """A text stream that redacts each write before passing it on (the CLI's stdout/stderr).

    Redaction works per write call: print() hands over whole strings, so a secret is never
    split between two writes in practice.
    """

    def __init__(self, inner: TextIO, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor

    def write(self, text: str) -> int:
        self.inner.write(self.redactor(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    @property
    def closed(self) -> bool:
        """The inner stream's: a stream whose reader is gone says so (gateway/ops/output.py)."""
        return bool(self.inner.closed)

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    def fileno(self) -> int:
        return self.inner.fileno()
