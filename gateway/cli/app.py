"""The `clawgate` command tree (Typer + Rich): the root options and every command group.

Each command group lives in its own module under gateway/cli/ and adds itself with
`register(app)`; a new group (schedule, skills, panel...) is one module and one line in
`GROUPS`. gateway/cli/main.py is the entry point; it builds this tree for every command line
except a plain `clawgate run`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Annotated

import typer

from gateway import __version__
from gateway.cli.common import EXIT_USAGE
from gateway.cli.start import use_config_file

# Modules with a `register(app)` function, in the order their commands appear in the help.
GROUPS = (
    "gateway.cli.serve",  # run, chat
    "gateway.cli.doctor",  # doctor
    "gateway.cli.pairing",  # pairing list|approve|deny
    "gateway.cli.users",  # users link|unlink|list
    "gateway.cli.heartbeat",  # heartbeat run|status
    "gateway.cli.schedule",  # schedule list|add|cancel
    "gateway.cli.tasks",  # tasks list|cancel
    "gateway.cli.memory",  # memory index|search|status|log|diff|undo
    "gateway.cli.ops",  # backup, restore, clone, status, healthcheck
    "gateway.cli.panel",  # panel url
    "gateway.cli.skills",  # skills list|check, mcp check
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
        config: Annotated[
            Path | None,
            typer.Option(
                "--config",
                metavar="FILE",
                help="TOML config file (default ./clawgate.toml, or CLAWGATE_CONFIG); "
                "accepted before or after the command",
            ),
        ] = None,
        debug: Annotated[
            bool, typer.Option("--debug", help="show the traceback of an unexpected error")
        ] = False,
        version: Annotated[
            bool,
            typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
        ] = False,
    ) -> None:
        use_config_file(config)
        if ctx.invoked_subcommand is None:  # bare `clawgate` is `clawgate run`
            from gateway.cli.serve import run_command

            ctx.invoke(run_command)

    for name in GROUPS:
        import_module(name).register(app)
    return app


def run_typer(args: Sequence[str]) -> int:
    """Parse `args` with the command tree and run the command: its exit status. Usage errors
    (unknown command or option, bad value) are one line here; other errors propagate to the
    one error policy of gateway/cli/main.py."""
    from gateway.cli.help import tidy

    command = tidy(typer.main.get_command(build_app()))
    try:
        result = command.main(args=list(args), prog_name="clawgate", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort as exc:
        raise KeyboardInterrupt from exc
    except _PARSER_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        code = int(getattr(exc, "exit_code", EXIT_USAGE))
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and code == 2 else ""
        print(f"clawgate: {exc.format_message()}{hint}", file=sys.stderr)  # type: ignore[attr-defined]
        return code
    return result if isinstance(result, int) else 0
