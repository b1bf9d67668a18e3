"""`clawgate run` and `clawgate chat` as Typer commands (gateway/cli/start.py does the work;
a plain `clawgate run` reaches it without Typer, see gateway/cli/main.py)."""

from typing import Annotated

import typer

from gateway.cli.common import resolve_workspace, settings
from gateway.cli.start import chat, run_gateway, setup_logging


def register(app: typer.Typer) -> None:
    app.command(
        "run",
        help="start the gateway with every configured channel (Telegram, "
        "Discord); with none configured: the terminal chat",
    )(run_command)
    app.command("chat", help="chat with your assistant in this terminal")(chat_command)


def run_command() -> None:
    raise typer.Exit(run_gateway())


def chat_command(
    person: Annotated[
        str | None,
        typer.Option(
            "--person", metavar="NAME", help="whose workspace to use (default: the owner setting)"
        ),
    ] = None,
) -> None:
    config = settings()
    if person:
        resolve_workspace(person, config, must_exist=False)  # validates the person id
        config = config.model_copy(update={"owner": person})
    config.api_key()
    setup_logging(config, quiet=True)
    raise typer.Exit(chat(config, config.owner))
