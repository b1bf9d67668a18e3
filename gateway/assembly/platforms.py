"""The configured platform channels and their access policies (and, for tests and benches,
a Gateway with them and nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channels.base import Channel
from gateway.agent.providers.base import Provider
from gateway.clock import Clock, SystemClock
from gateway.config.settings import ChannelSettings, Settings
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.links import PLATFORMS
from gateway.pipeline.pairing import ChannelAccess, ChannelPolicy
from gateway.stores.state import StateDB

TOKEN_HINTS = {
    "telegram": "set CLAWGATE_TELEGRAM__TOKEN (from @BotFather)",
    "discord": "set CLAWGATE_DISCORD__TOKEN (Discord developer portal, Bot tab)",
}


def channel_settings(settings: Settings, platform: str) -> ChannelSettings:
    return settings.telegram if platform == "telegram" else settings.discord


def configured_platforms(settings: Settings) -> list[str]:
    return [p for p in PLATFORMS if channel_settings(settings, p).configured]


def policy_for(section: ChannelSettings) -> ChannelPolicy:
    return ChannelPolicy(
        dm_policy=section.dm_policy,
        allow_from=frozenset(section.allow_from),
        groups_enabled=section.groups_enabled,
        groups=frozenset(section.groups),
    )


def build_channels(
    settings: Settings, state: StateDB, options: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Channel]:
    """One adapter per configured platform. `options` are extra constructor arguments (tests)."""
    options = options or {}
    channels: list[Channel] = []
    if settings.telegram.configured:
        from channels.telegram import TelegramChannel

        tg = settings.telegram
        channels.append(
            TelegramChannel(
                tg.token.get_secret_value(),  # type: ignore[union-attr]
                base_url=tg.base_url,
                offsets=state.offsets,
                poll_timeout=tg.poll_timeout_seconds,
                groups_enabled=tg.groups_enabled,
                streaming=tg.streaming,
                drafts=tg.streaming_drafts,
                **options.get("telegram", {}),
            )
        )
    if settings.discord.configured:
        from channels.discord_channel import DiscordChannel

        dc = settings.discord
        channels.append(
            DiscordChannel(
                dc.token.get_secret_value(),  # type: ignore[union-attr]
                groups_enabled=dc.groups_enabled,
                streaming=dc.streaming,
                catch_up=lambda: state.inbox.last_message_ids("discord"),
                **options.get("discord", {}),
            )
        )
    return channels


def access_policy(settings: Settings, state: StateDB, clock: Clock | None) -> ChannelAccess:
    """Who may talk to the assistant on each platform (pairing, allowlists, groups)."""
    policies = {p: policy_for(channel_settings(settings, p)) for p in PLATFORMS}
    return ChannelAccess(state, policies, clock)


def build_gateway(
    settings: Settings,
    provider: Provider,
    *,
    extra_channels: list[Channel] | None = None,
    clock: Clock | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    with_platforms: bool = True,
    with_exec: bool = False,
) -> Gateway:
    """A Gateway with the configured platform channels (unless `with_platforms` is False),
    their access policies and one state database, and nothing else (no memory, web tools or
    reminders: gateway/assembly/builder.py `assemble_parts` builds those for a real run);
    `with_exec`: the exec tool and its approvals too, where the sandbox runs."""
    from gateway.assembly.exec import exec_wiring

    state = StateDB.for_root(settings.workspaces_dir, inbox_retention=settings.inbox_retention)
    platform_channels = build_channels(settings, state, options) if with_platforms else []
    channels = [*platform_channels, *(extra_channels or [])]
    clock = clock or SystemClock()
    return Gateway.build(
        settings,
        provider,
        channels=channels,
        clock=clock,
        access=access_policy(settings, state, clock),
        state=state,
        press_wiring=exec_wiring(settings, state, clock) if with_exec else None,
    )
