"""Starting a gateway in the foreground: what `clawgate run` and `clawgate chat` do.

No Typer here: `clawgate run` (the command every deploy, update and restart runs) reaches
`run_gateway` straight from gateway/cli/main.py without building the command tree, and the
gateway is assembled (gateway/assembly/) importing only what the first poll needs. The Typer
commands in gateway/cli/serve.py call the same functions.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gateway import __version__
from gateway.cli.common import CliError, settings
from gateway.config.settings import CONFIG_FILE_ENV, Settings, describe_workspaces_dir

if TYPE_CHECKING:
    from gateway.assembly.builder import GatewayApp

log = logging.getLogger("clawgate")


def use_config_file(config: Path | None) -> None:
    """`--config FILE`: the settings of this command come from FILE."""
    if config is not None:
        if not config.exists():
            raise CliError(f"config file {config} does not exist (given with --config)")
        if config.is_dir():
            raise CliError(f"{config} is a directory, not a config file (given with --config)")
        # Anything else that can be read is: /dev/null (no settings from a file), a pipe.
        os.environ[CONFIG_FILE_ENV] = str(config)


def prepare_run() -> None:
    """Before `clawgate run` imports anything else: httpx (under python-telegram-bot and the
    provider SDKs) imports its own command-line client when it can, and with Typer's Click
    and Rich installed it can: Click, Rich and Pygments, a few hundred milliseconds the gateway
    never uses. Marking that one module absent makes httpx fall back to its stub `main`."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def setup_logging(config: Settings, *, quiet: bool) -> None:
    """Text or JSON lines with session and turn ids, secrets masked (gateway/ops/logs.py)."""
    from gateway.ops.logs import setup_logging as setup

    setup(config, quiet=quiet)  # quiet keeps a terminal chat readable


def run_gateway() -> int:
    """`clawgate run`: every configured platform channel, or else the terminal chat."""
    config = settings()
    config.api_key()  # fail now, in one line, rather than at the first message
    setup_logging(config, quiet=True)
    print(
        f"clawgate {__version__}: provider {config.llm.provider}/{config.llm.resolved_model}"
        f"{' (openai: inferred from the /v1 base_url)' if config.llm.provider_inferred else ''}"
        f", workspaces in {describe_workspaces_dir(config)}",
        file=sys.stderr,
    )
    from gateway.assembly.platforms import TOKEN_HINTS, configured_platforms
    from gateway.pipeline.links import PLATFORMS

    platforms = configured_platforms(config)
    for platform in PLATFORMS:
        section = getattr(config, platform)
        state = (
            f"configured (DMs: {section.dm_policy}, groups: "
            f"{'on' if section.groups_enabled else 'off'})"
            if platform in platforms
            else f"not configured: {TOKEN_HINTS[platform]}"
        )
        print(f"  {platform}: {state}", file=sys.stderr)
    if platforms:
        return serve(config)
    if not has_terminal_input():
        check_state_database(config)  # a broken state database is the first thing to fix
        raise CliError(
            "no channel is configured and there is no terminal to chat in (stdin is not a "
            "terminal or a pipe): set CLAWGATE_TELEGRAM__TOKEN or CLAWGATE_DISCORD__TOKEN "
            "(in a container: in the compose environment), or run `clawgate chat` in a terminal"
        )
    print(
        "No platform channel (Telegram, Discord) is configured: opening a terminal chat instead.",
        file=sys.stderr,
    )
    return chat(config, config.owner)


def check_state_database(config: Settings) -> None:
    """Open and close an existing state database: a StateError says in one line what to do."""
    import asyncio

    from gateway.stores.state import StateDB, state_path

    if not state_path(config.workspaces_dir).exists():
        return

    async def check() -> None:
        async with StateDB.for_root(config.workspaces_dir, inbox_retention=config.inbox_retention):
            pass

    asyncio.run(check())


def has_terminal_input() -> bool:
    """A terminal, or piped/redirected input; not /dev/null or a closed stdin (a container
    started without -i), where a terminal chat would end at once and restart forever."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return sys.stdin.isatty() or not stat.S_ISCHR(mode)


def serve(config: Settings) -> int:
    """Run every configured platform channel until Ctrl-C or SIGTERM."""
    from gateway.assembly.builder import RUN, GatewayApp
    from gateway.cli.lifecycle import run_until_stopped
    from gateway.features.consolidation import consolidation
    from gateway.features.tidying import tidying

    logging.getLogger().setLevel(logging.getLevelName(config.log_level))
    # The daily MEMORY.md tidying; the nightly consolidation (the plan brings the scheduler).
    app = GatewayApp(config, RUN, services=[tidying(), consolidation()])
    return run_until_stopped(
        config,
        RUN,
        banner=(
            "clawgate is running; Ctrl-C to stop. Approve new people with "
            "`clawgate pairing list` / `clawgate pairing approve CHANNEL CODE`."
        ),
        after_start=owner_hint,
        app=app,
    )


async def owner_hint(app: GatewayApp) -> None:
    """Say so while no platform account is the owner's: their own first DM would otherwise
    reach a different assistant (a new person) than the terminal chat's."""
    owner = app.settings.owner
    links = await app.parts.state.links.all()
    if any(person == owner for person, _, _ in links):
        return
    print(
        f"No Telegram/Discord account is yours ({owner}) yet: DM your bot, then run "
        "`clawgate pairing approve CHANNEL CODE --owner` to make that account yours (the "
        "terminal chat's assistant and private memory).",
        file=sys.stderr,
    )


def chat(config: Settings, person: str) -> int:
    """The terminal chat with `person`'s assistant until the input ends or Ctrl-C."""
    from gateway.assembly.builder import CHAT, CHAT_AT_A_TERMINAL, GatewayApp
    from gateway.assembly.terminal_chat import continuing_line, log_to_file
    from gateway.cli.lifecycle import run_until_stopped
    from gateway.workspace.seed import workspace_path

    workspace = workspace_path(config.workspaces_dir, person)
    at_a_terminal = sys.stdin.isatty() and sys.stdout.isatty()
    if at_a_terminal:
        log_file = log_to_file(config)  # the terminal is the chat: no log lines in it
        # Before the start: once started, the prompt owns the terminal.
        print(
            f"Chatting with the assistant of {workspace} (Ctrl-D or Ctrl-C twice to leave, "
            f"/help for commands; logs in {log_file})",
            file=sys.stderr,
        )
        if (line := continuing_line(config, workspace, person)) is not None:
            print(line, file=sys.stderr)
    # The chat runs its person's reminders: they appear here (gateway/features/scheduling.py).
    # A person at a terminal also gets the web panel (a script piping lines in does not).
    plan = CHAT_AT_A_TERMINAL if at_a_terminal else CHAT
    app = GatewayApp(config, plan)
    return run_until_stopped(config, plan, until_input_closed=True, app=app)
