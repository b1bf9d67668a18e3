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
import secrets
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from gateway.ops.redaction import Redactor, settings_secrets

# Loggers of the HTTP clients the SDKs use. Several print each request's URL at INFO (httpx,
# and httpx2 under openai 3.x), and a URL may carry a Bot API token, `user:password@` or
# `?api-key=`. Parents cover their children (`aiohttp` covers `aiohttp.access`).
HTTP_CLIENT_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "aiohttp",
    "urllib3",
    "websockets",
    "hpack",
    "openai",
    "anthropic",
    "telegram",
    "discord",
)

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

    def __init__(self, inner: logging.Formatter, secrets_: Redactor | Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = secrets_ if isinstance(secrets_, Redactor) else Redactor(secrets_)

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor(self.inner.format(record))


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler for which a line that cannot be written (a closed pipe, a full disk)
    is lost, quietly: the stock handler prints a "--- Logging error ---" traceback about it to
    stderr, which is often that same broken stream. The process's own stdout and stderr never
    raise anyway (gateway/ops/output.py); a log file can."""

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError | ValueError):
            return
        super().handleError(record)


def configured_secrets(settings: Any) -> list[str]:
    """Every secret the settings know (gateway/ops/redaction.py)."""
    return settings_secrets(settings)


def share_redactor(redactor: Redactor) -> None:
    """Make the installed log handler mask with `redactor` (the gateway's), so logs and tool
    results mask the same secrets (also one added with `redactor.add`)."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, "_clawgate", False) and isinstance(
            handler.formatter, RedactingFormatter
        ):
            handler.formatter.redactor = redactor


def quiet_http_loggers() -> None:
    """Hold every HTTP client logger at WARNING, whatever the root level (even DEBUG: a
    request log is not worth a credential in a log file; the formatter masks them anyway)."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def setup_logging(
    settings: Any, *, quiet: bool = False, stream: Any = None, redactor: Redactor | None = None
) -> logging.Handler:
    """Configure the root logger once for this process; returns the handler installed.

    `quiet` (the terminal chat) shows warnings and up unless the level is DEBUG. The format is
    text unless `log_format` is "json". HTTP client libraries are held at WARNING whatever the
    level (`quiet_http_loggers`). `redactor` (default: one built from the settings) masks
    every line; pass the gateway's so secrets registered later are masked too.
    """
    level = logging.getLevelName(settings.log_level)
    if quiet and settings.log_level != "DEBUG":
        level = max(level, logging.WARNING)
    fmt = getattr(settings, "log_format", "text")
    inner = JsonFormatter() if fmt == "json" else TextFormatter()
    handler = LineHandler(stream or sys.stderr)
    handler.setFormatter(RedactingFormatter(inner, redactor or Redactor.from_settings(settings)))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_clawgate", False):
            root.removeHandler(old)
    handler._clawgate = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    quiet_http_loggers()
    return handler
