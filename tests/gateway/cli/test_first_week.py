"""A person's first week, round 2 (issue 38): the rough edges a newcomer still hit at the
command line, each as they met it. Every test here failed on the version before."""

from __future__ import annotations

import asyncio
import logging
import os
import pty
import re
import signal
import sys
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from channels.base import InboundMessage
from gateway.assembly.backup import backup, restore
from gateway.cli.main import main
from gateway.config.settings import ConfigError, load_settings
from gateway.config.sources import where_set, with_sources
from gateway.pipeline.pairing import Pairing
from gateway.stores.prices import PriceTable
from gateway.stores.state import StateDB
from gateway.workspace.seed import ensure_workspace
from tests.fakes.discord_server import FakeDiscordServer, patch_discord
from tests.fakes.telegram_server import FakeTelegramServer
from tests.gateway.cli.test_cli import _env, _run
from tests.gateway.cli.test_terminal_chat import _Screen

EXAMPLE = Path(__file__).resolve().parents[3] / "clawgate.example.toml"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    return tmp_path / "workspaces"


# --- 1. a local server with only its URL set -----------------------------------------------


def test_a_v1_base_url_alone_means_the_openai_api(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__BASE_URL", "http://127.0.0.1:11434/v1")
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.llm.provider == "openai" and settings.llm.provider_inferred
    assert settings.api_key() == "no-key"
    monkeypatch.setenv("CLAWGATE_LLM__PROVIDER", "anthropic")  # said: kept
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.llm.provider == "anthropic" and not settings.llm.provider_inferred
    monkeypatch.delenv("CLAWGATE_LLM__PROVIDER")
    monkeypatch.setenv("CLAWGATE_LLM__BASE_URL", "http://127.0.0.1:8080")  # no /v1: as before
    assert load_settings(tmp_path / "absent.toml").llm.provider == "anthropic"


async def test_doctor_and_chat_with_only_a_local_servers_url(tmp_path, openai_server):
    env = _env(
        tmp_path, CLAWGATE_LLM__BASE_URL=openai_server.base_url, CLAWGATE_LLM__MODEL="qwen3:8b"
    )
    code, out, _ = await _run(["doctor"], env)
    assert code == 0, out
    assert "provider openai, inferred from [llm] base_url" in out
    assert "provider answers: openai at 127.0.0.1" in out
    code, out, err = await _run(["chat"], env, stdin="hello\n")
    assert code == 0 and "echo: hello" in out, err

    # The same server without /v1 is spoken to in Anthropic's API: both places say what to set.
    bare = openai_server.base_url.removesuffix("/v1")
    env = _env(tmp_path, CLAWGATE_LLM__BASE_URL=bare, CLAWGATE_LLM__MODEL="qwen3:8b")
    code, out, _ = await _run(["doctor"], env)
    assert code == 1
    assert "no such model or endpoint (HTTP 404)" in out
    assert "set CLAWGATE_LLM__PROVIDER=openai" in out, out
    code, out, err = await _run(["chat"], env, stdin="hello again\n")
    assert code == 0, err
    assert "HTTP 404" in out and "set CLAWGATE_LLM__PROVIDER=openai" in out, out


# --- 2. no false promise after a failed turn ------------------------------------------------


class _Chat:
    """`clawgate chat` in a pty, as a person at a terminal runs it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    async def __aenter__(self) -> _Chat:
        self.master, slave = pty.openpty()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "chat",
            env=self.env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.screen = _Screen(self.master)
        self.banner = await self.until("you>")
        await self.until("`clawgate panel url`")  # the panel's line, printed over the prompt
        return self

    async def until(self, needle: str) -> str:
        return await asyncio.to_thread(self.screen.until, needle)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    async def __aexit__(self, *exc_info: object) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        os.close(self.master)


@pytest.mark.timeout(240)
async def test_a_message_whose_turn_failed_is_not_promised_an_answer(tmp_path, anthropic_server):
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
    )
    anthropic_server.reply_error(400)  # refused, not retried: the turn ends in an error
    async with _Chat(env) as chat:
        chat.type(b"what is the capital of Peru?\r")
        await chat.until("refused the request")
        await chat.until("you>")
        chat.type(b"\x04")
        assert await asyncio.wait_for(chat.process.wait(), 60) == 0

    async with _Chat(env) as chat:
        # Before: "answering it now", and nothing came.
        assert "answering it now" not in chat.banner
        assert (
            "Your last message ('what is the capital of Peru?') was not answered: The "
            "model provider refused the request" in chat.banner
        ), chat.banner
        assert "To send it again, press Up and then Enter." in chat.banner
        chat.type(b"\x1b[A\r")  # Up brings it back; Enter sends it
        await chat.until("echo: what is the capital of Peru?")
        await chat.until("you>")
        chat.type(b"\x04")
        assert await asyncio.wait_for(chat.process.wait(), 60) == 0


# --- 3. doctor tries each bot token against its platform -------------------------------------


@pytest.fixture
def doctor_out(capsys):
    """`clawgate doctor` in this process (a worker thread: the fakes run on this loop)."""

    async def run() -> tuple[int, str]:
        code = await asyncio.to_thread(main, ["doctor"])
        return code, capsys.readouterr().out

    return run


async def test_doctor_checks_each_bot_token_and_names_where_it_was_set(
    tmp_path, monkeypatch, anthropic_server, doctor_out
):
    config = tmp_path / "clawgate.toml"
    monkeypatch.setenv("CLAWGATE_CONFIG", str(config))
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    monkeypatch.setenv("CLAWGATE_LLM__BASE_URL", anthropic_server.base_url)
    async with FakeTelegramServer() as tg, FakeDiscordServer() as dc:
        patch_discord(monkeypatch, dc)
        # The example's placeholder, uncommented as it is: named as such, never sent.
        config.write_text(
            f'[telegram]\nbase_url = "{tg.base_url}"\n'
            'token = "123456789:AAH-replace-with-the-token-from-BotFather"\n'
        )
        code, out = await doctor_out()
        assert code == 1
        assert (
            f"FAIL Telegram token ([telegram] token in {config} line 3) is the example's "
            "placeholder" in out
        ), out
        assert tg.calls == []
        # A real-looking token the platform does not know: refused, and where it was set.
        config.write_text(
            f'[telegram]\nbase_url = "{tg.base_url}"\n'
            'token = "123456789:AAF-not-this-bots-token-0123456789abc"\n'
        )
        code, out = await doctor_out()
        assert code == 1
        assert (
            f"FAIL Telegram rejected the bot token ([telegram] token in {config} line 3)" in out
        ), out
        # The right one, from the environment this time (it wins over the file); Discord too.
        monkeypatch.setenv("CLAWGATE_TELEGRAM__TOKEN", tg.token)
        monkeypatch.setenv("CLAWGATE_DISCORD__TOKEN", dc.token)
        code, out = await doctor_out()
        assert (
            "ok  Telegram accepts the bot token as @claw_bot (CLAWGATE_TELEGRAM__TOKEN "
            "(environment))" in out
        ), out
        assert (
            "ok  Discord accepts the bot token as @clawbot (CLAWGATE_DISCORD__TOKEN "
            "(environment))" in out
        ), out
        assert code == 0, out
        wrong = dc.token.replace("Gtest1", "Gwrong")
        monkeypatch.setenv("CLAWGATE_DISCORD__TOKEN", wrong)
        code, out = await doctor_out()
        assert code == 1
        assert (
            "FAIL Discord rejected the bot token (CLAWGATE_DISCORD__TOKEN (environment))" in out
        ), out
        assert tg.token not in out and wrong not in out


async def test_run_names_the_file_of_a_refused_token(tmp_path, anthropic_server):
    """`clawgate run` said "check CLAWGATE_TELEGRAM__TOKEN" of a token from clawgate.toml."""
    async with FakeTelegramServer() as tg:
        config = tmp_path / "clawgate.toml"
        config.write_text(
            f'[telegram]\nbase_url = "{tg.base_url}"\n'
            'token = "123456789:AAF-not-this-bots-token-0123456789abc"\n'
        )
        env = _env(
            tmp_path,
            ANTHROPIC_API_KEY="sk-x",
            CLAWGATE_CONFIG=str(config),
            CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
            CLAWGATE_HEALTH__PORT="0",
        )
        code, _, err = await _run(["run"], env)
    assert code == 2, err
    assert f"check [telegram] token in {config} line 3" in err, err
    assert "CLAWGATE_TELEGRAM__TOKEN" not in err


def test_a_refused_token_is_reported_where_it_was_written(tmp_path):
    """`clawgate run` said "check CLAWGATE_TELEGRAM__TOKEN" of a token from clawgate.toml."""
    config = tmp_path / "clawgate.toml"
    config.write_text('timezone = "UTC"\n\n[telegram]\ntoken = "1:x"\n')
    said = "Telegram rejected the bot token: check CLAWGATE_TELEGRAM__TOKEN (from @BotFather)"
    assert with_sources(said, path=config, environ={}) == (
        f"Telegram rejected the bot token: check [telegram] token in {config} line 4 "
        "(from @BotFather)"
    )
    assert with_sources(said, path=config, environ={"CLAWGATE_TELEGRAM__TOKEN": "1:y"}) == said
    assert (
        where_set("discord", "token", path=config, environ={})
        == "CLAWGATE_DISCORD__TOKEN or [discord] token (not set)"
    )


# --- 4. dead ends get their hint --------------------------------------------------------------


async def test_heartbeat_run_outside_active_hours_names_ignore_hours(tmp_path, anthropic_server):
    now = datetime.now(UTC)
    start, end = (now + timedelta(hours=2)), (now + timedelta(hours=3))
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        CLAWGATE_TIMEZONE="UTC",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
        CLAWGATE_HEARTBEAT__ACTIVE_START=f"{start:%H:%M}",
        CLAWGATE_HEARTBEAT__ACTIVE_END=f"{end:%H:%M}",
    )
    workspace = ensure_workspace(tmp_path / "workspaces", "owner")
    (workspace / "HEARTBEAT.md").write_text("# Checks\n- Is the plant watered?\n")
    code, out, err = await _run(["heartbeat", "run"], env)
    assert code == 0, err
    assert "outcome: skipped: outside active hours" in out, out
    assert "to run it now anyway: clawgate heartbeat run --ignore-hours" in out
    assert anthropic_server.requests == []


def test_a_key_under_the_examples_commented_header_says_so(tmp_path):
    config = tmp_path / "clawgate.toml"
    config.write_text('timezone = "UTC"\n\n# [llm]\n## Model name\nmodel = "qwen3:8b"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == (
        f"invalid setting: {config} line 5: model is not a setting (did you mean [llm] model? "
        "Its section header on line 3 is commented out: remove the '#' before [llm]) (every "
        "option: docs/configuration.md)"
    )
    # A real header between them: the key is where it is, and no such hint.
    config.write_text('# [llm]\n[heartbeat]\nmodel = "x"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "commented out" not in str(caught.value)


def test_a_misspelt_time_zone_gets_the_closest_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_TIMEZONE", "Europe/Berlim")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "absent.toml")
    assert (
        "unknown time zone 'Europe/Berlim', use an IANA name (did you mean "
        "Europe/Berlin?)" in str(caught.value)
    )
    monkeypatch.setenv("CLAWGATE_TIMEZONE", "europe/paris")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "absent.toml")
    assert "(did you mean Europe/Paris?)" in str(caught.value)


def test_config_dev_null_is_an_empty_configuration(root, capsys):
    assert main(["--config", "/dev/null", "pairing", "list"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["--config", str(root.parent), "pairing", "list"]) == 2
    assert "is a directory, not a config file" in capsys.readouterr().err
    assert main(["--config", str(root.parent / "nope.toml"), "pairing", "list"]) == 2
    assert "does not exist" in capsys.readouterr().err


# --- 9. small ones ----------------------------------------------------------------------------


@pytest.mark.timeout(240)
async def test_ctrl_c_while_thinking_starts_its_own_line(tmp_path, anthropic_server):
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
    )
    anthropic_server.reply_delay(60.0)
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    screen = _Screen(master)
    try:
        await asyncio.to_thread(screen.until, "you>")
        os.write(master, b"slow question\r")
        await asyncio.to_thread(screen.until, "thinking... 1 s")
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends while the chat thinks
        said = await asyncio.to_thread(screen.until, "clawgate: stopping")
        assert await asyncio.wait_for(process.wait(), 60) == 130
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
    # Before: "thinking... 2 sclawgate: stopping": the line went on after the seconds.
    assert re.search(r"\d s *clawgate: stopping", said) is None, repr(said)
    assert said.endswith("\r\x1b[Kclawgate: stopping"), repr(said[-80:])
    assert "again to stop at once" not in screen.text  # the README says what it does


def test_an_unpriced_model_is_not_a_warning(caplog):
    from gateway.agent.conversation import Usage

    with caplog.at_level(logging.INFO, logger="gateway.stores.prices"):
        assert PriceTable().cost("echo-model", Usage(10, 10)) == 0.0
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_approving_an_approved_code_again_says_so(root, capsys):
    async def ask() -> str:
        async with StateDB.for_root(root) as state:
            reply = await Pairing(state).request(
                InboundMessage("telegram", "77", "77", "hi", sender_name="Rosa")
            )
        return re.search(r"code is (\w+)", reply).group(1)  # type: ignore[union-attr]

    code = asyncio.run(ask())
    assert main(["pairing", "approve", "telegram", code]) == 0
    capsys.readouterr()
    assert main(["pairing", "approve", "telegram", code]) == 0
    out = capsys.readouterr()
    assert (
        f"{code} on telegram was already approved: telegram user 77 (Rosa) may talk" in out.out
    ), out
    assert "wrong or expired" not in out.out + out.err
    assert main(["pairing", "deny", "telegram", code]) == 1
    assert "already approved" in capsys.readouterr().err
    assert main(["pairing", "approve", "telegram", "ZZZZZZZZ"]) == 2  # a wrong one still is
    assert "wrong or expired" in capsys.readouterr().err


def test_a_restored_workspace_directory_has_a_real_time(tmp_path):
    workspace = ensure_workspace(tmp_path / "workspaces", "ana")
    archive = tmp_path / "b.tar.gz"
    backup(archive, [workspace])
    with tarfile.open(archive) as tar:
        top = tar.getmember("workspaces/ana")
    assert top.mtime > 86_400
    restore(archive, tmp_path / "elsewhere")
    assert (tmp_path / "elsewhere" / "ana").stat().st_mtime > 86_400
