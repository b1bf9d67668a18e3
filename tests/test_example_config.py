"""clawgate.example.toml names every setting, and uncommented it is a valid configuration."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gateway.config.settings import Settings, load_settings

EXAMPLE = Path(__file__).resolve().parent.parent / "clawgate.example.toml"
# "# key = value" and "# [section]" are settings; "## ..." and other comments are prose.
SETTING = re.compile(r"^# (\[[A-Za-z0-9_.]+\]|[a-z_]+ = .+)$")


def uncommented() -> str:
    return "\n".join(
        match.group(1)
        for line in EXAMPLE.read_text(encoding="utf-8").splitlines()
        if (match := SETTING.match(line))
    )


def fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    names: set[str] = set()
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            names |= fields(kind, f"{prefix}{name}.")
        else:
            names.add(prefix + name)
    return names


def keys(table: dict[str, Any], prefix: str = "") -> set[str]:
    names: set[str] = set()
    for name, value in table.items():
        if isinstance(value, dict) and prefix + name not in (
            "heartbeat.workspaces",
            "scheduler.workspaces",
            "mcp.servers",
            "llm.workspaces",
            "llm.endpoints",
            "budget.workspaces",
            "prices",
        ):
            names |= keys(value, f"{prefix}{name}.")
        else:
            names.add(prefix + name)
    return names


def test_every_setting_is_in_the_example():
    documented = keys(tomllib.loads(uncommented()))
    missing = fields(Settings) - documented
    assert not missing, f"clawgate.example.toml does not mention {sorted(missing)}"
    assert documented - fields(Settings) == set()


def test_the_example_uncommented_loads(tmp_path):
    config = tmp_path / "clawgate.toml"
    config.write_text(uncommented(), encoding="utf-8")
    settings = load_settings(config)
    assert settings.llm.base_url == "http://127.0.0.1:11434/v1"
    assert settings.heartbeat.workspaces["owner"].every == "1h"
    assert "~" not in str(settings.workspaces_dir)  # the home directory, expanded
    assert settings.mcp.servers["files"].command == "npx"
