"""Every command's help reads like a manual: no Python types (`<bool>`, `<str>`,
`<list[str]>`), no `{when}` in usage lines, and each default said once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from gateway.cli.app import build_app
from gateway.cli.main import main

TYPE_NOISE = re.compile(r"<(?:bool|str|int|float|path|list\[[^\]]*\]|tuple|datetime)[^>]*>")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def _help(args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*args, "--help"]) == 0, args
    return capsys.readouterr().out


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """One row per option (long help still wraps, but never mid-default)."""
    import typer.rich_utils

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 400)
    monkeypatch.setenv("CLAWGATE_CONFIG", "/nonexistent/none.toml")


def test_every_command_has_help_without_types_or_doubled_defaults(wide, capsys):
    everything = list(_commands(typer.main.get_command(build_app())))
    assert len(everything) > 30  # the walk really reaches every command
    for args in everything:
        text = _help(args, capsys)
        where = " ".join(args) or "clawgate"
        assert not TYPE_NOISE.search(text), (where, TYPE_NOISE.search(text))
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usage and "}" not in usage, (where, usage)
        for line in text.splitlines():
            said = "(default" in line or "default:" in line.replace("[default:", "")
            assert not (said and "[default:" in line), (where, line)


def test_a_value_shows_its_placeholder_and_a_default_said_once(wide, capsys):
    text = _help(("memory", "search"), capsys)
    assert re.search(r"--limit\s+N\s+number of results \(default 6\)\s*│", text), text
    assert re.search(r"--min-score\s+NUMBER\s+drop results below this \[default: 0\.0\]", text)
    assert re.search(r"--json\s+print a JSON array", text)  # a flag: no value at all
    assert "Usage: clawgate memory search [OPTIONS] QUERY" in text
    choices = _help(("pairing", "approve"), capsys)
    assert "telegram|discord" in choices  # fixed choices are worth showing


def test_backup_help_says_one_thing_about_its_default(wide, capsys):
    text = _help(("backup",), capsys)
    workspace = next(line for line in text.splitlines() if "--workspace" in line)
    everything = next(line for line in text.splitlines() if "--all" in line)
    assert "owner" not in workspace and "without it, every workspace" in workspace
    assert "(the default)" not in everything and "no --workspace" in everything
