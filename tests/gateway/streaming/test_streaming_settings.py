"""The streaming settings: on by default, off per channel from TOML or the environment, a
bad value named in one line, and what the assembly hands each channel."""

from __future__ import annotations

import pytest

from channels.discord_channel import DiscordChannel
from channels.telegram import TelegramChannel
from gateway.assembly.platforms import build_channels
from gateway.config.settings import ConfigError, load_settings
from gateway.stores.state import StateDB
from tests.fakes.discord_server import TEST_TOKEN as DISCORD_TOKEN
from tests.fakes.telegram_server import TEST_TOKEN as TELEGRAM_TOKEN


def test_streaming_is_on_by_default(tmp_path):
    settings = load_settings(tmp_path / "none.toml")
    assert settings.telegram.streaming and settings.telegram.streaming_drafts
    assert settings.discord.streaming and settings.chat.streaming


def test_streaming_off_per_channel_in_toml(tmp_path):
    config = tmp_path / "clawgate.toml"
    config.write_text(
        "[telegram]\nstreaming = false\n[chat]\nstreaming = false\n", encoding="utf-8"
    )
    settings = load_settings(config)
    assert not settings.telegram.streaming and not settings.chat.streaming
    assert settings.discord.streaming


def test_streaming_settings_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_DISCORD__STREAMING", "false")
    monkeypatch.setenv("CLAWGATE_TELEGRAM__STREAMING_DRAFTS", "false")
    settings = load_settings(tmp_path / "none.toml")
    assert not settings.discord.streaming and not settings.telegram.streaming_drafts
    assert settings.telegram.streaming


def test_a_bad_streaming_value_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_TELEGRAM__STREAMING", "sometimes")
    with pytest.raises(ConfigError, match="CLAWGATE_TELEGRAM__STREAMING") as caught:
        load_settings(tmp_path / "none.toml")
    assert "\n" not in str(caught.value)


async def test_the_channels_get_their_setting(tmp_path):
    settings = load_settings(
        tmp_path / "none.toml",
        workspaces_dir=tmp_path / "ws",
        telegram={"token": TELEGRAM_TOKEN, "streaming_drafts": False},
        discord={"token": DISCORD_TOKEN, "streaming": False},
    )
    state = StateDB.for_root(settings.workspaces_dir)
    channels = {type(c): c for c in build_channels(settings, state)}
    telegram = channels[TelegramChannel]
    assert isinstance(telegram, TelegramChannel)
    assert telegram.streaming and not telegram.drafts
    discord = channels[DiscordChannel]
    assert isinstance(discord, DiscordChannel) and not discord.streaming
    # off: no preview at all, whatever the chat
    assert discord.preview("1", direct=True, key="k") is None
