"""The `clawgate` command line: run, chat, doctor."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gateway import __version__
from gateway.config.settings import ConfigError, Settings, config_path, load_settings

log = logging.getLogger("clawgate")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.config:
        os.environ["CLAWGATE_CONFIG"] = str(args.config)
    if not getattr(args, "handler", None):
        args.handler = _cmd_run
    try:
        return int(args.handler(args) or 0)
    except ConfigError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clawgate", description="Your own LLM assistant over Telegram, Discord and a terminal."
    )
    parser.add_argument("--version", action="version", version=f"clawgate {__version__}")
    parser.add_argument("--config", type=Path, help="TOML config file (default ./clawgate.toml)")
    sub = parser.add_subparsers(title="commands")
    run = sub.add_parser("run", help="start the gateway with every configured channel")
    run.set_defaults(handler=_cmd_run)
    chat = sub.add_parser("chat", help="chat with your assistant in this terminal")
    chat.add_argument("--person", help="whose workspace to use (default: the owner setting)")
    chat.set_defaults(handler=_cmd_chat)
    doctor = sub.add_parser("doctor", help="check the configuration, key, sqlite-vec, workspaces")
    doctor.set_defaults(handler=_cmd_doctor)
    from gateway.cli import admin as cli_admin

    cli_admin.register(sub)
    from gateway.cli import heartbeat as cli_heartbeat

    cli_heartbeat.register(sub)
    from gateway.cli import memory as cli_memory

    cli_memory.register(sub)
    from gateway.cli import ops as cli_ops

    cli_ops.register(sub)
    from gateway.cli import panel as cli_panel  # web panel (issue 16)

    cli_panel.register(sub)
    return parser


def _setup_logging(settings: Settings, *, quiet: bool) -> None:
    """Text or JSON lines with session and turn ids, secrets masked (gateway/ops/logs.py)."""
    from gateway.ops.logs import setup_logging

    setup_logging(settings, quiet=quiet)  # quiet keeps a terminal chat readable


def _cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings()
    settings.api_key()  # fail now, in one line, rather than at the first message
    _setup_logging(settings, quiet=True)
    print(
        f"clawgate {__version__}: provider {settings.llm.provider}/{settings.llm.resolved_model}, "
        f"workspaces in {settings.workspaces_dir.resolve()}",
        file=sys.stderr,
    )
    from gateway.assembly.platforms import PLATFORMS, TOKEN_HINTS, configured_platforms

    platforms = configured_platforms(settings)
    for platform in PLATFORMS:
        section = getattr(settings, platform)
        state = (f"configured (DMs: {section.dm_policy}, groups: "
                 f"{'on' if section.groups_enabled else 'off'})" if platform in platforms
                 else f"not configured: {TOKEN_HINTS[platform]}")
        print(f"  {platform}: {state}", file=sys.stderr)
    if platforms:
        return _serve(settings)
    print(
        "No platform channel (Telegram, Discord) is configured: opening a terminal chat "
        "instead.",
        file=sys.stderr,
    )
    return _chat(settings, settings.owner)


def _serve(settings: Settings) -> int:
    """Run every configured platform channel until Ctrl-C or SIGTERM."""
    import signal

    from channels.base import ChannelError
    from gateway.agent.providers import build_provider
    from gateway.assembly.heartbeat_host import start_heartbeats
    from gateway.assembly.platforms import build_gateway

    logging.getLogger().setLevel(logging.getLevelName(settings.log_level))

    async def serve() -> int:
        gateway = build_gateway(settings, build_provider(settings))
        _attach_memory(gateway, settings)
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
        if settings.health.enabled:  # /healthz /readyz /metrics (gateway/ops/health.py)
            from gateway.ops.health import HealthServer

            health = HealthServer(gateway, settings.health.host, settings.health.port)
            await health.start()
        panel = await _start_panel(gateway, settings)  # web control panel (gateway/panel/)
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
async def _start_panel(gateway: Any, settings: Settings) -> Any:
    """Serve the panel on the gateway's event loop, or None if off or its port is taken."""
    if not settings.panel.enabled:
        return None
    from gateway.ops.logs import configured_secrets
    from gateway.panel.host import PanelHost
    from gateway.panel.server import PanelServer

    panel = PanelServer(PanelHost(gateway), settings.panel, configured_secrets(settings))
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


def _cmd_chat(args: argparse.Namespace) -> int:
    settings = load_settings()
    settings.api_key()
    _setup_logging(settings, quiet=True)
    person = args.person or settings.owner
    if args.person:
        settings = settings.model_copy(update={"owner": person})
    return _chat(settings, person)


def _chat(settings: Settings, person: str) -> int:
    from channels.terminal import TerminalChannel
    from gateway.agent.providers import build_provider
    from gateway.pipeline.gateway import Gateway
    from gateway.workspace.seed import workspace_path

    workspace = workspace_path(settings.workspaces_dir, person)
    if sys.stdin.isatty():
        print(f"Chatting with the assistant of {workspace} (Ctrl-D to quit, /help for commands)",
              file=sys.stderr)

    async def session() -> None:
        terminal = TerminalChannel()
        gateway = Gateway(settings, build_provider(settings), channels=[terminal])
        _attach_memory(gateway, settings)
        await gateway.start()
        try:
            await terminal.input_closed.wait()
        finally:
            await gateway.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(session())
    return 0


def _attach_memory(gateway: object, settings: Settings) -> None:
    """Recall (memory_search, memory_get) in the owner's DMs, unless memory.enabled is false."""
    from gateway.config.memory import build_memory_service
    from gateway.pipeline.gateway import Gateway

    service = build_memory_service(settings.memory)
    if service is not None and isinstance(gateway, Gateway):
        gateway.use_memory(service)


def _cmd_doctor(args: argparse.Namespace) -> int:
    checks: list[tuple[bool, str, str]] = []
    try:
        settings = load_settings()
        checks.append((True, f"configuration ({config_path()} + environment) is valid", ""))
    except ConfigError as exc:
        checks.append((False, "configuration is invalid", str(exc)))
        return _report(checks)
    try:
        settings.api_key()
        checks.append((True, f"API key for {settings.llm.provider} is set", ""))
    except ConfigError as exc:
        checks.append((False, "no provider API key", str(exc)))
    try:
        from memory.sqlite import vec_version

        checks.append((True, f"sqlite-vec {vec_version()} loads", ""))
    except Exception as exc:
        checks.append((False, "sqlite-vec does not load",
                       f"{exc}. Reinstall with: pip install sqlite-vec pysqlite3-binary"))
    checks.append(_check_writable(settings.workspaces_dir))
    return _report(checks)


def _check_writable(root: Path) -> tuple[bool, str, str]:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return (False, f"workspaces root {root} is not writable",
                f"{exc.strerror}. Set CLAWGATE_WORKSPACES_DIR to a writable directory.")
    return (True, f"workspaces root {root.resolve()} is writable", "")


def _report(checks: list[tuple[bool, str, str]]) -> int:
    for ok, what, fix in checks:
        print(f"{'ok ' if ok else 'FAIL'} {what}")
        if fix:
            print(f"     fix: {fix}")
    failed = sum(not ok for ok, _, _ in checks)
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 0 if not failed else 1
