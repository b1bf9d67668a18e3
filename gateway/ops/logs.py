"""Logging: one line per event, tagged with the session key and a turn id, secrets redacted.

`turn_scope(session_key)` binds a fresh turn id for the code running inside it (context
variables, so concurrent turns in other sessions keep theirs). Every record then carries
`session` and `turn` attributes, rendered as `[alice:dm 3f2a9c1d]` in text or as fields in
JSON (`log_format = "json"`). Log calls must never include a message body, a token or a key at
INFO and above; `RedactingFormatter` is the safety net that masks configured secrets anyway.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import secrets
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

REDACTED = "[redacted]"
# Shorter strings are not masked: they would mangle ordinary words.
MIN_SECRET_CHARS = 6
# Libraries that log full request URLs at INFO. The Telegram Bot API puts the token in the URL.
NOISY_LOGGERS = ("httpx", "httpcore", "telegram", "discord", "aiohttp.access")
KEY_ENV_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

_session: contextvars.ContextVar[str] = contextvars.ContextVar("clawgate_session", default="-")
_turn: contextvars.ContextVar[str] = contextvars.ContextVar("clawgate_turn", default="-")


def new_turn_id() -> str:
    return secrets.token_hex(4)


@contextlib.contextmanager
def turn_scope(session_key: str, turn_id: str | None = None) -> Iterator[str]:
    """Tag every log record inside with `session_key` and a turn id (returned)."""
    turn_id = turn_id or new_turn_id()
    session_token = _session.set(session_key)
    turn_token = _turn.set(turn_id)
    try:
        yield turn_id
    finally:
        _turn.reset(turn_token)
        _session.reset(session_token)


def current_turn() -> tuple[str, str]:
    """(session key, turn id) of the running turn, or ("-", "-")."""
    return _session.get(), _turn.get()


class ContextFilter(logging.Filter):
    """Adds `session` and `turn` to every record (unless the call passed them in `extra`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "session"):
            record.session = _session.get()
        if not hasattr(record, "turn"):
            record.turn = _turn.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(session)s %(turn)s] %(message)s")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "session": getattr(record, "session", "-"),
            "turn": getattr(record, "turn", "-"),
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class RedactingFormatter(logging.Formatter):
    """Formats with `inner`, then masks every configured secret in the finished line."""

    def __init__(self, inner: logging.Formatter, secrets_: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted(
            {s for s in secrets_ if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record), self.secrets)


def redact(text: str, secrets_: Iterable[str]) -> str:
    for secret in secrets_:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def configured_secrets(settings: Any) -> list[str]:
    """Tokens and keys from the settings and the standard key variables, plus `log_redact`."""
    found: list[str] = [os.environ.get(name, "") for name in KEY_ENV_VARS]
    for section in ("llm", "telegram", "discord"):
        part = getattr(settings, section, None)
        for field in ("api_key", "token"):
            value = getattr(part, field, None) if part is not None else None
            if value is not None and hasattr(value, "get_secret_value"):
                found.append(value.get_secret_value())
    found.extend(getattr(settings, "log_redact", []) or [])
    mcp = getattr(settings, "mcp", None)  # every MCP server's env and header values
    if mcp is not None:
        found.extend(mcp.secrets())
    return [value for value in found if value]


def setup_logging(settings: Any, *, quiet: bool = False, stream: Any = None) -> logging.Handler:
    """Configure the root logger once for this process; returns the handler installed.

    `quiet` (the terminal chat) shows warnings and up unless the level is DEBUG. The format is
    text unless `log_format` is "json". Chatty HTTP libraries are held at WARNING unless DEBUG.
    """
    level = logging.getLevelName(settings.log_level)
    if quiet and settings.log_level != "DEBUG":
        level = max(level, logging.WARNING)
    fmt = getattr(settings, "log_format", "text")
    inner = JsonFormatter() if fmt == "json" else TextFormatter()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(RedactingFormatter(inner, configured_secrets(settings)))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_clawgate", False):
            root.removeHandler(old)
    handler._clawgate = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    if settings.log_level != "DEBUG":
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(max(level, logging.WARNING))
    return handler
