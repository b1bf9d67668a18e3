"""What every `clawgate` command shares: the error type, the `--workspace` rule, output helpers.

Typer is not imported here: `clawgate run` starts without it (gateway/cli/start.py); the
option types of the Typer commands are in gateway/cli/options.py.

One rule for `--workspace` everywhere: a value with a path separator (or starting with `.` or
`~`) is a directory; anything else is a person id under `workspaces_dir`; no value is the
owner's workspace. Expected failures raise `CliError` (or `ConfigError`): the entry point prints
them as one line and exits with the status of the one rule below (2 for a mistake in the
command, 1 for a failure), so no command prints a traceback for a mistake a person makes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.config.settings import ConfigError, Settings, load_settings

# The one exit-code rule, for every command (docs/cli.md, "Exit status"):
# 0 done. 2 the command cannot do what was asked as written; changing the command line or a
#   setting fixes it: an unknown command, option or value; an invalid setting; a person, job
#   number, pairing code, revision or archive that does not exist; a target that exists
#   without --force.
# 1 it ran and failed, or found a problem in the data, the network or the system: a check that
#   finds one (doctor, healthcheck, skills check, mcp check), a file or database that is
#   damaged (a schedule file that is not valid JSON), a server that does not answer, a write
#   that fails, an undo that conflicts.
# 130 interrupted (Ctrl-C).
EXIT_FAILED = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: `str()` is the one line shown; `code` the exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def settings() -> Settings:
    """The settings for this command (file named by --config / CLAWGATE_CONFIG + environment).

    Warns about `CLAWGATE_*` variables that are no setting (a typo is otherwise silently
    ignored) and refuses a workspaces directory that cannot be one, before anything runs.
    """
    import os

    from gateway.config.settings import unknown_env_vars

    config = load_settings()
    for warning in unknown_env_vars(os.environ):
        print(f"clawgate: warning: {warning}", file=sys.stderr)
    check_workspaces_dir(config.workspaces_dir)
    return config


def check_workspaces_dir(root: Path) -> None:
    """A ConfigError unless `root` is a directory or could be created (nothing is created)."""
    import os

    hint = "set CLAWGATE_WORKSPACES_DIR (or workspaces_dir) to a writable directory"
    if root.exists():
        if not root.is_dir():
            raise ConfigError(f"the workspaces directory {root} is not a directory: {hint}")
        return
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if (
        not parent.is_dir()
        or not os.access(parent, os.W_OK | os.X_OK)
        or str(parent.resolve()).startswith(("/proc", "/sys"))
    ):
        raise ConfigError(
            f"the workspaces directory {root} cannot be created ({parent} is not "
            f"a writable directory): {hint}"
        )


def looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


def resolve_workspace(value: str | None, config: Settings, *, must_exist: bool = True) -> Path:
    """The workspace a `--workspace` value names (see the module docstring)."""
    from gateway.workspace.seed import WorkspaceError, workspace_path

    if value is None or value == "":
        path = workspace_path(config.workspaces_dir, config.owner)
        what = f"the owner's workspace {path}"
    elif looks_like_path(value):
        path = Path(value).expanduser()
        what = f"workspace {path}"
    else:
        try:
            path = workspace_path(config.workspaces_dir, value)
        except WorkspaceError as exc:
            raise CliError(
                f"{exc}: give a person id (letters, digits, . _ -) or a path with a /"
            ) from exc
        what = f"workspace {path} (person {value})"
    if must_exist and not path.is_dir():
        raise CliError(f"{what} is not a directory; pass --workspace NAME or PATH")
    return path


def fail(message: str, code: int = EXIT_FAILED) -> int:
    """Print one `clawgate: ...` line on stderr and return the exit code."""
    print(f"clawgate: {message}", file=sys.stderr)
    return code


def json_time(moment: datetime | None) -> str | None:
    """The one convention for times in `--json` output: an ISO 8601 instant in UTC, to the
    second, ending in +00:00 (a naive time is taken as the machine's local time). Words and
    tables show the person's own zone; programs get one zone."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=1, ensure_ascii=False, default=str))


CELL_CHARS = 400  # a longer cell is cut ("..."): a table is for reading, not for data


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    """A Rich table on stdout; wide when piped so lines are never wrapped mid-cell.

    Cells are plain text, never markup, and one line with every control character shown as
    U+FFFD: they hold what people and the model wrote (a contact's name, a task's goal, a
    commit subject), which must neither style the table ("[red]") nor reach the terminal as
    an escape sequence."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gateway.workspace.names import shown_name

    console = Console(width=None if sys.stdout.isatty() else 200, highlight=False)
    table = Table(*headers, title=title, box=None, pad_edge=False, header_style="bold")
    for row in rows:
        table.add_row(*(Text(shown_name(str(cell), CELL_CHARS)) for cell in row))
    console.print(table)


def exit_with(code: int) -> None:
    """End a command with `code` (Typer commands return None; the status travels this way)."""
    if code:
        import typer

        raise typer.Exit(code)


__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "CliError",
    "ConfigError",
    "exit_with",
    "fail",
    "json_time",
    "print_json",
    "print_table",
    "resolve_workspace",
    "settings",
]
