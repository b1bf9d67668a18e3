"""`clawgate run` and `clawgate chat`: start a gateway (gateway/assembly builds it)."""

import logging
import os
import stat
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gateway import __version__
from gateway.cli.common import CliError, resolve_workspace, settings
from gateway.cli.lifecycle import run_until_stopped
from gateway.config.settings import Settings, describe_workspaces_dir

if TYPE_CHECKING:
    from gateway.assembly.builder import GatewayApp

log = logging.getLogger("clawgate")


def register(app: typer.Typer) -> None:
    app.command("run", help="start the gateway with every configured channel (Telegram, "
                            "Discord); with none configured: the terminal chat")(run_command)
    app.command("chat", help="chat with your assistant in this terminal")(chat_command)


def _setup_logging(config: Settings, *, quiet: bool) -> None:
    """Text or JSON lines with session and turn ids, secrets masked (gateway/ops/logs.py)."""
    from gateway.ops.logs import setup_logging

    setup_logging(config, quiet=quiet)  # quiet keeps a terminal chat readable


def run_command() -> None:
    config = settings()
    config.api_key()  # fail now, in one line, rather than at the first message
    _setup_logging(config, quiet=True)
    print(
        f"clawgate {__version__}: provider {config.llm.provider}/{config.llm.resolved_model}, "
        f"workspaces in {describe_workspaces_dir(config)}",
        file=sys.stderr,
    )
    from gateway.assembly.platforms import PLATFORMS, TOKEN_HINTS, configured_platforms

    platforms = configured_platforms(config)
    for platform in PLATFORMS:
        section = getattr(config, platform)
        state = (f"configured (DMs: {section.dm_policy}, groups: "
                 f"{'on' if section.groups_enabled else 'off'})" if platform in platforms
                 else f"not configured: {TOKEN_HINTS[platform]}")
        print(f"  {platform}: {state}", file=sys.stderr)
    if platforms:
        raise typer.Exit(_serve(config))
    if not _has_terminal_input():
        _check_state_database(config)  # a broken state database is the first thing to fix
        raise CliError(
            "no channel is configured and there is no terminal to chat in (stdin is not a "
            "terminal or a pipe): set CLAWGATE_TELEGRAM__TOKEN or CLAWGATE_DISCORD__TOKEN "
            "(in a container: in the compose environment), or run `clawgate chat` in a terminal")
    print(
        "No platform channel (Telegram, Discord) is configured: opening a terminal chat "
        "instead.",
        file=sys.stderr,
    )
    raise typer.Exit(_chat(config, config.owner))


def _check_state_database(config: Settings) -> None:
    """Open and close an existing state database: a StateError says in one line what to do."""
    import asyncio

    from gateway.ops.state import state_path

    if not state_path(config.workspaces_dir).exists():
        return

    async def check() -> None:
        async with config.state_db():
            pass

    asyncio.run(check())


def _has_terminal_input() -> bool:
    """A terminal, or piped/redirected input; not /dev/null or a closed stdin (a container
    started without -i), where a terminal chat would end at once and restart forever."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return sys.stdin.isatty() or not stat.S_ISCHR(mode)


def chat_command(
    person: Annotated[str | None, typer.Option(
        "--person", metavar="NAME",
        help="whose workspace to use (default: the owner setting)")] = None,
) -> None:
    config = settings()
    if person:
        resolve_workspace(person, config, must_exist=False)  # validates the person id
        config = config.model_copy(update={"owner": person})
    config.api_key()
    _setup_logging(config, quiet=True)
    raise typer.Exit(_chat(config, config.owner))


def _serve(config: Settings) -> int:
    """Run every configured platform channel until Ctrl-C or SIGTERM."""
    from gateway.assembly.builder import RUN, GatewayApp
    from gateway.assembly.scheduling import reminders

    logging.getLogger().setLevel(logging.getLevelName(config.log_level))
    app = GatewayApp(config, RUN, services=[reminders(run=True)])  # the one scheduler
    return run_until_stopped(config, RUN, banner=(
        "clawgate is running; Ctrl-C to stop. Approve new people with "
        "`clawgate pairing list` / `clawgate pairing approve CHANNEL CODE`."),
        after_start=_owner_hint, app=app)


async def _owner_hint(app: "GatewayApp") -> None:
    """Say so while no platform account is the owner's: their own first DM would otherwise
    reach a different assistant (a new person) than the terminal chat's."""
    owner = app.settings.owner
    links = await app.gateway.state.links()
    if any(person == owner for person, _, _ in links):
        return
    print(f"No Telegram/Discord account is yours ({owner}) yet: DM your bot, then run "
          "`clawgate pairing approve CHANNEL CODE --owner` to make that account yours (the "
          "terminal chat's assistant and private memory).", file=sys.stderr)


# The web panel is started by the assembly (gateway/assembly/builder.py, after heartbeats).
async def _start_panel(gateway: Any, config: Settings) -> Any:
    from gateway.assembly.builder import start_panel

    return await start_panel(gateway, config)


def _chat(config: Settings, person: str) -> int:
    from gateway.assembly.builder import CHAT, GatewayApp
    from gateway.assembly.scheduling import reminders
    from gateway.assembly.terminal_chat import continuing_line, log_to_file
    from gateway.workspace.seed import workspace_path

    workspace = workspace_path(config.workspaces_dir, person)
    if sys.stdin.isatty() and sys.stdout.isatty():
        log_file = log_to_file(config)  # the terminal is the chat: no log lines in it
        # Before the start: once started, the prompt owns the terminal.
        print(f"Chatting with the assistant of {workspace} (Ctrl-D or Ctrl-C twice to leave, "
              f"/help for commands; logs in {log_file})", file=sys.stderr)
        if (line := continuing_line(config, workspace, person)) is not None:
            print(line, file=sys.stderr)
    # The chat runs its person's reminders: they appear here (gateway/assembly/scheduling.py).
    app = GatewayApp(config, CHAT, services=[reminders(run=True)])
    return run_until_stopped(config, CHAT, until_input_closed=True, app=app)
