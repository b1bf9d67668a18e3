"""Where a setting's value came from, in the words of whoever set it.

A message about a value must point at the place to fix it: the environment variable when one
is set (it wins over the file), else the TOML key with its file and line, else "not set". A
Telegram token written in clawgate.toml and reported as "check CLAWGATE_TELEGRAM__TOKEN" sends
the person looking for a variable they never set.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from gateway.config.settings import ENV_PREFIX, MAX_CONFIG_BYTES, config_path
from memory.atomic import BrokenFile, read_bounded

__all__ = ["env_name", "where_set", "with_sources"]


def env_name(section: str, key: str) -> str:
    """`CLAWGATE_TELEGRAM__TOKEN` for ("telegram", "token"); a top-level key: ("", "timezone")."""
    return ENV_PREFIX + (f"{section}__{key}" if section else key).upper()


def _toml_line(text: str, section: str, key: str) -> int | None:
    from gateway.config.errors import _line_of

    return _line_of(text, [section, key] if section else [key], section=False)


def where_set(
    section: str, key: str, *, path: Path | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """ "CLAWGATE_TELEGRAM__TOKEN (environment)", "[telegram] token in clawgate.toml line 161",
    or "CLAWGATE_TELEGRAM__TOKEN or [telegram] token (not set)"."""
    environ = os.environ if environ is None else environ
    variable = env_name(section, key)
    if any(name.upper() == variable for name in environ):
        return f"{variable} (environment)"
    key_words = f"[{section}] {key}" if section else key
    path = path or config_path()
    try:
        text = read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8")
        values = tomllib.loads(text)
    except (
        OSError,
        BrokenFile,
        UnicodeDecodeError,
        tomllib.TOMLDecodeError,
        RecursionError,
        ValueError,
    ):
        return f"{variable} or {key_words} (not set)"
    table = values.get(section, {}) if section else values
    if isinstance(table, dict) and key in table:
        line = _toml_line(text, section, key)
        return f"{key_words} in {path}" + (f" line {line}" if line else "")
    return f"{variable} or {key_words} (not set)"


def with_sources(
    message: str, *, path: Path | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """`message` with each "check CLAWGATE_<SECTION>__<KEY>" that names a variable the person
    did not set pointed at where the value really came from (the channels, which know no
    settings, name the variable)."""
    for section in ("telegram", "discord"):
        variable = env_name(section, "token")
        if variable in message:
            source = where_set(section, "token", path=path, environ=environ)
            if not source.startswith(variable):
                message = message.replace(variable, source)
    return message
