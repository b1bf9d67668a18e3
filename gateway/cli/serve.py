"""`clawgate run` and `clawgate chat`: start a gateway (gateway/assembly builds it)."""

import asyncio
import contextlib
import logging
import sys
from typing import Annotated, Any

import typer

from gateway import __version__
from gateway.cli.common import resolve_workspace, settings
from gateway.config.settings import Settings
from gateway.ops.logs import share_redactor

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
        f"workspaces in {config.workspaces_dir.resolve()}",
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
    print(
        "No platform channel (Telegram, Discord) is configured: opening a terminal chat "
        "instead.",
        file=sys.stderr,
    )
    raise typer.Exit(_chat(config, config.owner))


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
        share_redactor(gateway.redactor)  # one set of secrets for logs and tool results
        _attach_memory(gateway, config)
        desk = _attach_schedules(gateway)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        heartbeats = health = panel = scheduler = None
        started = False
        # Whatever fails at start-up, what was opened is closed: aiosqlite's threads are not
        # daemons, so an open state database would keep the process alive after the error.
        try:
            try:
                await gateway.start()
            except ChannelError as exc:
                print(f"clawgate: {exc}", file=sys.stderr)
                return 2
            print("clawgate is running; Ctrl-C to stop. Approve new people with "
                  "`clawgate pairing list` / `clawgate pairing approve CHANNEL CODE`.",
                  file=sys.stderr)
            heartbeats = await start_heartbeats(gateway)  # one timer per workspace
            scheduler = await _start_scheduler(gateway, desk)  # reminders, one heap for all
            if config.health.enabled:  # /healthz /readyz /metrics (gateway/ops/health.py)
                from gateway.ops.health import HealthServer

                health = HealthServer(gateway, config.health.host, config.health.port)
                try:
                    await health.start()
                except OSError as exc:
                    health = None
                    print(f"clawgate: cannot serve /healthz on {config.health.host}:"
                          f"{config.health.port}: {exc.strerror or exc}; set "
                          "CLAWGATE_HEALTH__PORT to a free port", file=sys.stderr)
                    return 2
            panel = await _start_panel(gateway, config)  # web control panel (gateway/panel/)
            started = True
            await stop.wait()
            return 0
        finally:
            for part in (panel, health, heartbeats, scheduler):
                if part is not None:
                    with contextlib.suppress(Exception):
                        await part.stop()
            await gateway.stop(**({} if started else {"drain_timeout": 1}))

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


# --- reminders wiring (issue 15); moves into the assembly's exit stack when that lands ---
def _attach_schedules(gateway: Any) -> Any:
    """The schedule tools and /reminders for the owner's private contexts (None if off)."""
    from gateway.assembly.scheduling import attach_schedules

    return attach_schedules(gateway)


async def _start_scheduler(gateway: Any, desk: Any) -> Any:
    """One scheduler for every workspace's reminders (gateway/assembly/scheduling.py)."""
    from gateway.assembly.scheduling import start_scheduler

    return await start_scheduler(gateway, desk)
# --- end of reminders wiring ---


def _chat(config: Settings, person: str) -> int:
    from channels.terminal import TerminalChannel
    from gateway.agent.providers import build_provider
    from gateway.pipeline.gateway import Gateway
    from gateway.workspace.seed import workspace_path

    workspace = workspace_path(config.workspaces_dir, person)
    if sys.stdin.isatty():
        print(f"Chatting with the assistant of {workspace} (Ctrl-D to quit, /help for commands)",
              file=sys.stderr)

    async def session() -> None:
        terminal = TerminalChannel()
        gateway = Gateway(config, build_provider(config), channels=[terminal])
        share_redactor(gateway.redactor)
        _attach_memory(gateway, config)
        _attach_schedules(gateway)  # jobs made here are sent by the running `clawgate run`
        try:  # a failed start still closes what it opened (no hang on an aiosqlite thread)
            await gateway.start()
            await terminal.input_closed.wait()
        finally:
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
