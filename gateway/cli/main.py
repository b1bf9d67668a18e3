"""The `clawgate` command line (Typer + Rich): the root options and the one error policy.

Each command group lives in its own module under gateway/cli/ and adds itself with
`register(app)`; a new group (schedule, skills, panel...) is one module and one line in
`GROUPS`. The one exit-code rule (the README's, gateway/cli/common.py): 2 when the command
cannot do what was asked as written (change the command line or a setting), 1 when it ran and
failed or found a problem, 130 when interrupted; each error is one `clawgate: ...` line, with
the traceback only under `--debug`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from importlib import import_module
from pathlib import Path
from typing import Annotated

import typer

from gateway import __version__
from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, CliError
from gateway.config.settings import CONFIG_FILE_ENV, ConfigError
from gateway.ops.state import StateError

# Modules with a `register(app)` function, in the order their commands appear in the help.
GROUPS = (
    "gateway.cli.serve",      # run, chat
    "gateway.cli.doctor",     # doctor
    "gateway.cli.pairing",    # pairing list|approve|deny
    "gateway.cli.users",      # users link|unlink|list
    "gateway.cli.heartbeat",  # heartbeat run|status
    "gateway.cli.schedule",   # schedule list|add|cancel
    "gateway.cli.memory",     # memory index|search|status|log|diff|undo
    "gateway.cli.ops",        # backup, restore, clone, status, healthcheck
    "gateway.cli.panel",      # panel url
    "gateway.cli.skills",     # skills list|check, mcp check
)

def _parser_errors() -> tuple[type[Exception], ...]:
    """Typer >= 0.29 vendors Click (its errors derive from TyperException); older ones raise
    Click's own ClickException."""
    errors: list[type[Exception]] = [typer.TyperException]
    try:
        import click

        errors.append(click.ClickException)
    except ImportError:
        pass
    return tuple(errors)


_PARSER_ERRORS = _parser_errors()
# A path that names nothing usable is a mistake in the command (2); a disk that is full or
# failing is a failure (1).
PATH_MISTAKES = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
                           errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ELOOP})
# Root options accepted anywhere on the command line (before or after the subcommand).
_ROOT_VALUE_OPTIONS = ("--config",)
_ROOT_FLAGS = ("--debug",)


def _version(value: bool) -> None:
    if value:
        print(f"clawgate {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="clawgate",
        help="Your own LLM assistant over Telegram, Discord and a terminal.",
        no_args_is_help=False,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback(invoke_without_command=True)
    def root(
        ctx: typer.Context,
        config: Annotated[Path | None, typer.Option(
            "--config", metavar="FILE",
            help="TOML config file (default ./clawgate.toml, or CLAWGATE_CONFIG); "
                 "accepted before or after the command")] = None,
        debug: Annotated[bool, typer.Option(
            "--debug", help="show the traceback of an unexpected error")] = False,
        version: Annotated[bool, typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version")] = False,
    ) -> None:
        if config is not None:
            if not config.is_file():
                raise CliError(f"config file {config} does not exist (given with --config)")
            os.environ[CONFIG_FILE_ENV] = str(config)
        if ctx.invoked_subcommand is None:  # bare `clawgate` is `clawgate run`
            from gateway.cli.serve import run_command

            ctx.invoke(run_command)

    for name in GROUPS:
        import_module(name).register(app)
    return app


def hoist_root_options(argv: Sequence[str]) -> tuple[list[str], bool]:
    """Move `--config X` / `--config=X` / `--debug` to the front, wherever they were typed."""
    front: list[str] = []
    rest: list[str] = []
    debug = False
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--":
            rest.extend(items[i:])
            break
        if item in _ROOT_FLAGS:
            front.append(item)
            debug = True
        elif item in _ROOT_VALUE_OPTIONS and i + 1 < len(items):
            front.extend(items[i:i + 2])
            i += 1
        elif item.startswith(tuple(f"{o}=" for o in _ROOT_VALUE_OPTIONS)):
            front.append(item)
        else:
            rest.append(item)
        i += 1
    return front + rest, debug


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (the `clawgate` script's entry point)."""
    args, debug = hoist_root_options(sys.argv[1:] if argv is None else argv)
    from gateway.cli.help import tidy

    command = tidy(typer.main.get_command(build_app()))
    try:
        with redacted_output():  # no configured secret is ever printed (ops/redaction.py)
            result = command.main(args=args, prog_name="clawgate", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("clawgate: interrupted", file=sys.stderr)
        return 130
    except _PARSER_ERRORS as exc:  # usage errors: unknown command or option, bad value
        ctx = getattr(exc, "ctx", None)
        code = int(getattr(exc, "exit_code", EXIT_USAGE))
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and code == 2 else ""
        print(f"clawgate: {exc.format_message()}{hint}", file=sys.stderr)  # type: ignore[attr-defined]
        return code
    except CliError as exc:
        return _one_line(str(exc), exc.code, debug)
    except ConfigError as exc:
        return _one_line(str(exc), EXIT_USAGE, debug)
    except StateError as exc:  # the database is damaged: a failure, not a typo
        return _one_line(str(exc), EXIT_FAILED, debug)
    except Exception as exc:
        from gateway.workspace.seed import WorkspaceError

        if isinstance(exc, WorkspaceError):
            return _one_line(str(exc), EXIT_USAGE, debug)
        if isinstance(exc, OSError) and exc.filename is not None:
            reason = exc.strerror or type(exc).__name__
            code = EXIT_USAGE if exc.errno in PATH_MISTAKES else EXIT_FAILED
            return _one_line(f"{reason}: {exc.filename}", code, debug)
        if debug:
            traceback.print_exc()
        else:
            print(f"clawgate: unexpected error: {type(exc).__name__}: {exc} "
                  "(run again with --debug for the traceback)", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """stdout and stderr mask every configured secret while a command runs."""
    from gateway.config.settings import load_settings
    from gateway.ops.redaction import RedactingStream, Redactor, settings_secrets

    try:
        redactor = Redactor.from_settings(load_settings())
    except ConfigError:  # the command reports it; still mask the standard key variables
        redactor = Redactor(settings_secrets(None))
    saved = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(sys.stdout, redactor)  # type: ignore[assignment]
    sys.stderr = RedactingStream(sys.stderr, redactor)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _one_line(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"clawgate: {message}", file=sys.stderr)
    return code
