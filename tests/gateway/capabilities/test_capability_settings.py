"""`[skills]` and `[mcp]` settings: defaults, the environment form, one-line errors."""

from __future__ import annotations

import pytest

from gateway.config.settings import ConfigError, load_settings


def test_defaults_and_an_mcp_server_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_MCP__SERVERS__CAL__COMMAND", "uvx")
    monkeypatch.setenv("CLAWGATE_MCP__SERVERS__CAL__ARGS", '["mcp-cal", "--ro"]')
    monkeypatch.setenv("CLAWGATE_MCP__SERVERS__CAL__ENV", '{"CAL_TOKEN": "tok-123456"}')
    settings = load_settings(tmp_path / "none.toml")
    server = settings.mcp.servers["cal"]
    assert (server.command, server.args) == ("uvx", ["mcp-cal", "--ro"])
    assert server.contexts == ["owner_dm", "heartbeat"]  # never groups unless listed
    assert settings.mcp.secrets() == ["tok-123456"]
    assert "tok-123456" not in repr(settings)
    assert settings.skills.enabled and settings.skills.shared_dir is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"x": {"command": "a", "url": "http://h/mcp"}}, "either command"),
        ({"x": {}}, "either command"),
        ({"x": {"url": "ftp://h"}}, "must start with http"),
        ({"bad name": {"command": "a"}}, "server name 'bad name'"),
        ({"x": {"command": "a", "contexts": ["everyone"]}}, "mcp.servers.x.contexts"),
    ],
)
def test_a_bad_server_table_is_one_line_naming_it(tmp_path, table, message):
    with pytest.raises(ConfigError) as error:
        load_settings(tmp_path / "none.toml", mcp={"servers": table})
    assert message in str(error.value) and "\n" not in str(error.value)
