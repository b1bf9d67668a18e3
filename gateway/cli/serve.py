"""`clawgate run` and `clawgate chat`: start a gateway (gateway/assembly builds it)."""

import asyncio
import contextlib
import logging
import sys
from typing import Annotated, Any

import typer

from gateway import __version__
from gateway.cli.common import resolve_workspace, settings
from gateway.config.settings import Settings, describe_workspaces_dir

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
        _owner_hint(config, platforms)
        raise typer.Exit(_serve(config))
    print(
        "No platform channel (Telegram, Discord) is configured: opening a terminal chat "
        "instead.",
        file=sys.stderr,
    )
    raise typer.Exit(_chat(config, config.owner))


def _owner_hint(config: Settings, platforms: list[str]) -> None:
    """Say how to make a platform account the owner's, while none is: until then the
    owner's own Telegram DMs would get a pairing code and a separate assistant."""
    import contextlib
    import sqlite3

    from gateway.ops.state import state_path

    path = state_path(config.workspaces_dir)
    linked = False
    if path.exists():
        try:
            with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
                linked = db.execute("SELECT 1 FROM links WHERE person_id = ? LIMIT 1",
                                    (config.owner,)).fetchone() is not None
        except sqlite3.Error:
            return  # an older or busy database: no hint rather than a wrong one
    if not linked:
        channel = platforms[0]
        print(f"  owner: no {' or '.join(p.title() for p in platforms)} account is yours yet. "
              f"Send your bot a DM, then run `clawgate pairing approve {channel} CODE --owner` "
              f"with the code it answers: that account becomes you ({config.owner}), the same "
              "assistant as `clawgate chat`.", file=sys.stderr)


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
    import signal

    from channels.base import ChannelError
    from gateway.agent.providers import build_provider
    from gateway.assembly.heartbeat_host import start_heartbeats
    from gateway.assembly.platforms import build_gateway

    logging.getLogger().setLevel(logging.getLevelName(config.log_level))

    async def serve() -> int:
        gateway = build_gateway(config, build_provider(config))
        _attach_memory(gateway, config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await gateway.start()
        except ChannelError as exc:
            print(f"clawgate: {exc}", file=sys.stderr)
            await gateway.stop(drain_timeout=1)
            return 2
        print("clawgate is running; Ctrl-C to stop. Approve new people with "
              "`clawgate pairing list` / `clawgate pairing approve CHANNEL CODE`.",
              file=sys.stderr)
        heartbeats = await start_heartbeats(gateway)  # one timer per workspace
        health = None
        if config.health.enabled:  # /healthz /readyz /metrics (gateway/ops/health.py)
            from gateway.ops.health import HealthServer

            health = HealthServer(gateway, config.health.host, config.health.port)
            await health.start()
        panel = await _start_panel(gateway, config)  # web control panel (gateway/panel/)
        await stop.wait()
        if panel is not None:
            await panel.stop()
        if health is not None:
            await health.stop()
        await heartbeats.stop()
        await gateway.stop()
        return 0

    return asyncio.run(serve())


# --- web panel wiring (issue 16); moves into the assembly's exit stack when that lands ---
async def _start_panel(gateway: Any, config: Settings) -> Any:
    """Serve the panel on the gateway's event loop, or None if off or its port is taken."""
    if not config.panel.enabled:
        return None
    from gateway.ops.logs import configured_secrets
    from gateway.panel.host import PanelHost
    from gateway.panel.server import PanelServer

    panel = PanelServer(PanelHost(gateway), config.panel, configured_secrets(config))
    try:
        await panel.start()
    except OSError as exc:  # the gateway itself keeps running: the panel is for the owner
        print(f"clawgate: panel not started ({exc}); set [panel] port, or enabled = false",
              file=sys.stderr)
        return None
    notice = panel.first_start_notice()
    print(notice or f"panel on {panel.url} (a login link: `clawgate panel url`)",
          file=sys.stderr)
    return panel
# --- end of web panel wiring ---


def _chat(config: Settings, person: str) -> int:
    from channels.terminal import TerminalChannel
    from gateway.agent.providers import build_provider
    from gateway.assembly.heartbeat_host import start_heartbeats
    from gateway.cli.terminal_chat import continuing_line, history_path, log_to_file
    from gateway.pipeline.gateway import Gateway
    from gateway.workspace.seed import workspace_path

    workspace = workspace_path(config.workspaces_dir, person)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if interactive:
        log_file = log_to_file(config)  # the terminal is the chat: no log lines in it
        print(f"Chatting with the assistant of {workspace} (Ctrl-D to quit, /help for commands; "
              f"logs in {log_file})", file=sys.stderr)
        if (line := continuing_line(config, workspace, person)) is not None:
            print(line, file=sys.stderr)

    async def session() -> None:
        terminal = TerminalChannel(history_path=history_path(config))
        gateway = Gateway(config, build_provider(config), channels=[terminal])
        _attach_memory(gateway, config)
        await gateway.start()
        heartbeats = await start_heartbeats(gateway)  # alerts appear in this chat
        try:
            await terminal.input_closed.wait()
        finally:
            await heartbeats.stop()
            await gateway.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(session())
    return 0


def _attach_memory(gateway: object, config: Settings) -> None:
    """Recall (memory_search, memory_get) in the owner's DMs, unless memory.enabled is false."""
    from gateway.config.memory import build_memory_service
    from gateway.pipeline.gateway import Gateway

    service = build_memory_service(config.memory)
    if service is not None and isinstance(gateway, Gateway):
        gateway.use_memory(service)
