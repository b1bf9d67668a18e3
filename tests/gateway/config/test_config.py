"""Settings: TOML file, environment overrides, and one-line errors."""

from __future__ import annotations

import pytest

from gateway.config.settings import ConfigError, load_settings


def test_defaults_are_safe(tmp_path):
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.llm.provider == "anthropic"
    assert settings.prompt.file_max_chars == 20_000
    assert settings.prompt.total_max_chars == 60_000
    assert settings.llm.max_tool_rounds == 20
    # Not the current directory: a per-user data directory (XDG_DATA_HOME in the tests).
    assert settings.workspaces_dir == tmp_path / "xdg-data" / "clawgate" / "workspaces"


def test_environment_overrides_the_toml_file(tmp_path, monkeypatch):
    config = tmp_path / "clawgate.toml"
    config.write_text(
        'workspaces_dir = "from-file"\n[llm]\nprovider = "openai"\nmodel = "file-model"\n'
        "[prompt]\nfile_max_chars = 1234\n"
    )
    monkeypatch.setenv("CLAWGATE_LLM__MODEL", "env-model")
    monkeypatch.setenv("CLAWGATE_PROMPT__TOTAL_MAX_CHARS", "9999")
    settings = load_settings(config)
    assert settings.llm.provider == "openai"
    assert settings.llm.model == "env-model"
    assert settings.prompt.file_max_chars == 1234
    assert settings.prompt.total_max_chars == 9999
    assert str(settings.workspaces_dir) == "from-file"


def test_config_file_path_from_the_environment(tmp_path, monkeypatch):
    config = tmp_path / "elsewhere.toml"
    config.write_text("[llm]\ncontext_window = 32000\n")
    monkeypatch.setenv("CLAWGATE_CONFIG", str(config))
    assert load_settings().llm.context_window == 32_000


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("CLAWGATE_LLM__PROVIDER", "gemini", "CLAWGATE_LLM__PROVIDER"),
        ("CLAWGATE_LLM__CONTEXT_WINDOW", "lots", "CLAWGATE_LLM__CONTEXT_WINDOW"),
        ("CLAWGATE_PROMPT__FILE_MAX_CHARS", "-5", "CLAWGATE_PROMPT__FILE_MAX_CHARS"),
        ("CLAWGATE_TIMEZONE", "Mars/Olympus", "CLAWGATE_TIMEZONE"),
    ],
)
def test_invalid_values_fail_in_one_line_naming_the_setting(
    tmp_path, monkeypatch, env, value, named
):
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "absent.toml")
    message = str(caught.value)
    assert named in message and "\n" not in message


def test_unknown_key_in_the_file_names_the_file_line_and_toml_key(tmp_path):
    """Before: a typo in clawgate.toml was reported as an environment variable the person
    never set, in pydantic's words, without a suggestion."""
    config = tmp_path / "clawgate.toml"
    config.write_text("[llm]\nmodel = 'x'\nprovder = 'openai'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert f"{config} line 3: [llm] provder is not a setting (did you mean provider?)" in message
    assert "CLAWGATE_" not in message and "Extra inputs" not in message


def test_a_misspelt_section_gets_the_closest_one(tmp_path):
    config = tmp_path / "clawgate.toml"
    config.write_text("timezone = 'UTC'\n\n[hearbeat]\nevery = '1h'\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert f"{config} line 3: [hearbeat] is not a section (did you mean [heartbeat]?)" in str(
        caught.value
    )


def test_an_environment_mistake_names_the_variable_and_the_closest_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__PROVDER", "openai")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "absent.toml")
    message = str(caught.value)
    assert (
        "CLAWGATE_LLM__PROVDER is not a setting (did you mean CLAWGATE_LLM__PROVIDER?)" in message
    )
    assert "llm.provder" not in message and "Extra inputs" not in message


def test_every_mistake_of_a_start_is_reported_at_once_in_plain_words(tmp_path, monkeypatch):
    config = tmp_path / "clawgate.toml"
    config.write_text(
        "timezon = 'UTC'\n[llm]\nmax_attempts = 99\ncontext_window = 'big'\n"
        "[heartbeat.workspaces.ana]\nevry = '1h'\n[telegram]\ngroups_enabled = 3\n"
        "[memory]\nembedder = 'magic'\n"
    )
    monkeypatch.setenv("CLAWGATE_LOG_FORMAT", "xml")
    monkeypatch.setenv("CLAWGATE_LIMITS__MESSAGES_PER_MINUTE", "-1")
    monkeypatch.setenv("CLAWGATE_LLM_PROVIDER", "openai")  # no setting: named too
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("9 problems in the settings")
    body = "\n".join(lines[1:])
    for expected in (
        "line 1: timezon is not a setting (did you mean timezone?)",
        "line 3: [llm] max_attempts = 99: must be at most 10",
        "line 4: [llm] context_window = 'big': must be a whole number",
        "line 6: [heartbeat.workspaces.ana] evry is not a setting (did you mean every?)",
        "line 8: [telegram] groups_enabled = 3: must be true or false",
        "line 10: [memory] embedder = 'magic': must be",
        "CLAWGATE_LOG_FORMAT='xml' (log_format): must be 'text' or 'json'",
        "CLAWGATE_LIMITS__MESSAGES_PER_MINUTE='-1' (limits.messages_per_minute): must be at "
        "least 0",
        "CLAWGATE_LLM_PROVIDER is not a setting and is ignored (did you mean "
        "CLAWGATE_LLM__PROVIDER?)",
    ):
        assert expected in body, (expected, body)
    for library_words in (
        "Input should be",
        "Extra inputs",
        "Value error",
        "Field required",
        "type=",
        "pydantic",
    ):
        assert library_words not in body


def test_a_secret_is_never_echoed_in_an_error(tmp_path, monkeypatch):
    config = tmp_path / "clawgate.toml"
    config.write_text("[telegram]\ntoken = 12345\n")
    monkeypatch.setenv("CLAWGATE_DISCORD__TOKEN", "[not-a-list")
    monkeypatch.setenv("CLAWGATE_DISCORD__ALLOW_FROM", "[not json")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "12345" not in str(caught.value) and "[telegram] token" in str(caught.value)


def test_broken_toml_is_one_clear_line(tmp_path):
    config = tmp_path / "clawgate.toml"
    config.write_text("[llm\n")
    with pytest.raises(ConfigError, match=r"is not valid TOML: .*line 1, column 5"):
        load_settings(config)


def test_missing_key_says_how_to_set_one(tmp_path):
    settings = load_settings(tmp_path / "absent.toml")
    with pytest.raises(ConfigError) as caught:
        settings.api_key()
    assert "ANTHROPIC_API_KEY" in str(caught.value) and "\n" not in str(caught.value)


def test_keys_come_from_the_standard_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("CLAWGATE_LLM__PROVIDER", "openai")
    assert load_settings(tmp_path / "absent.toml").api_key() == "sk-openai"


def test_a_local_server_needs_no_key(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__PROVIDER", "openai")
    monkeypatch.setenv("CLAWGATE_LLM__BASE_URL", "http://127.0.0.1:11434/v1")
    assert load_settings(tmp_path / "absent.toml").api_key()


def test_the_example_configuration_loads_with_the_documented_defaults(monkeypatch):
    from pathlib import Path

    from gateway.config.settings import Settings

    example = Path(__file__).resolve().parents[3] / "clawgate.example.toml"
    settings = load_settings(example)
    defaults = Settings()
    for section in ("llm", "telegram", "discord", "memory", "heartbeat", "versioning", "health"):
        assert getattr(settings, section) == getattr(defaults, section), section
    assert settings.stop_grace_seconds == defaults.stop_grace_seconds


def test_bot_tokens_must_have_a_tokens_shape(tmp_path, monkeypatch):
    """`hello` is no token; a real one, with stray whitespace from a file, is."""
    real = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
    monkeypatch.setenv("CLAWGATE_TELEGRAM__TOKEN", f" {real}\n")
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.telegram.token.get_secret_value() == real  # type: ignore[union-attr]
    config = tmp_path / "clawgate.toml"
    for section, bad in (
        ("telegram", "hello"),
        ("telegram", "110201543:short"),
        ("discord", "hello"),
        ("discord", f"Bot {real}"),
    ):
        monkeypatch.delenv("CLAWGATE_TELEGRAM__TOKEN", raising=False)
        config.write_text(f'[{section}]\ntoken = "{bad}"\n')
        with pytest.raises(ConfigError) as caught:
            load_settings(config)
        message = str(caught.value)
        assert f"{config} line 2: [{section}] token: this does not look like" in message
        assert bad not in message and "\n" not in message
    config.write_text('[discord]\ntoken = ""\n')  # empty: the channel is not configured
    assert not load_settings(config).discord.configured
