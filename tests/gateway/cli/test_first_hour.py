"""A person's first hour at the command line: typos warned, any case accepted, all
errors shown, a per-user workspaces directory, owner linking in one step, no silent restart
loop in a container, a health check that knows its own gateway.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from channels.base import InboundMessage
from gateway.cli.main import main
from gateway.config.settings import ConfigError, load_settings
from gateway.pipeline.pairing import Pairing
from gateway.stores.state import StateDB
from tests.gateway.cli.test_cli import _env, _run


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("CLAWGATE_CONFIG", str(tmp_path / "none.toml"))
    return tmp_path / "workspaces"


def test_unknown_variables_are_warned_with_the_closest_name(root, monkeypatch, capsys):
    monkeypatch.setenv("CLAWGATE_LLM_PROVIDER", "openai")
    monkeypatch.setenv("CLAWGATE_TIMEZOME", "Europe/Paris")
    monkeypatch.setenv("CLAWGATE_HEARTBEAT__WORKSPACES__ANA__EVERY", "1h")  # a real one
    assert main(["users", "list"]) == 0
    err = capsys.readouterr().err
    assert "CLAWGATE_LLM_PROVIDER is not a setting" in err
    assert "did you mean CLAWGATE_LLM__PROVIDER?" in err
    assert "did you mean CLAWGATE_TIMEZONE?" in err
    assert "WORKSPACES__ANA" not in err


def test_choices_accept_any_case_and_redact_takes_a_plain_list(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__PROVIDER", "OpenAI")
    monkeypatch.setenv("CLAWGATE_LOG_LEVEL", "debug")
    monkeypatch.setenv("CLAWGATE_TELEGRAM__DM_POLICY", "Allowlist")
    monkeypatch.setenv("CLAWGATE_LOG_REDACT", "secret")
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.llm.provider == "openai" and settings.log_level == "DEBUG"
    assert settings.telegram.dm_policy == "allowlist" and settings.log_redact == ["secret"]


def test_every_error_is_shown_and_a_missing_file_is_not_blamed(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWGATE_LLM__PROVIDER", "gemini")
    monkeypatch.setenv("CLAWGATE_LOG_FORMAT", "xml")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "clawgate.toml")
    message = str(caught.value)
    assert "CLAWGATE_LLM__PROVIDER" in message and "CLAWGATE_LOG_FORMAT" in message
    assert "more)" not in message and "clawgate.toml" not in message
    assert len(message.splitlines()) == 3  # a count, then one line each
    (tmp_path / "clawgate.toml").write_text("timezone = 'UTC'\n")
    with pytest.raises(ConfigError) as caught:  # the file is fine: the environment is named
        load_settings(tmp_path / "clawgate.toml")
    assert "clawgate.toml" not in str(caught.value)


def test_the_default_workspaces_directory_is_per_user(tmp_path, monkeypatch):
    settings = load_settings(tmp_path / "absent.toml")
    assert settings.workspaces_dir == tmp_path / "xdg-data" / "clawgate" / "workspaces"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_settings(tmp_path / "absent.toml").workspaces_dir == settings.workspaces_dir


def test_a_workspaces_directory_that_cannot_exist_is_one_line(root, monkeypatch, capsys):
    monkeypatch.setenv("CLAWGATE_WORKSPACES_DIR", "/proc/nope")
    for command in (["pairing", "list"], ["chat"], ["run"], ["status"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "CLAWGATE_WORKSPACES_DIR" in lines[0], err
    assert not Path("/proc/nope").exists()


def test_approve_with_owner_links_the_account_to_the_owner(root, capsys):
    async def ask() -> str:
        async with StateDB.for_root(root) as state:
            reply = await Pairing(state).request(InboundMessage("telegram", "77", "77", "hi"))
        return re.search(r"code is (\w+)", reply).group(1)  # type: ignore[union-attr]

    code = asyncio.run(ask())
    assert main(["pairing", "approve", "telegram", code, "--owner"]) == 0
    assert "linked telegram:77 to you (owner)" in capsys.readouterr().out
    assert main(["users", "list", "--json"]) == 0
    links = json.loads(capsys.readouterr().out)["links"]
    assert links == [{"person": "owner", "channel": "telegram", "user_id": "77"}]


async def test_run_without_a_channel_or_terminal_input_exits_2(tmp_path):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2, err.decode()
    assert "CLAWGATE_TELEGRAM__TOKEN" in err.decode().splitlines()[-1]


class _Impostor(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_healthcheck_prints_and_rejects_another_program_on_the_port(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _Impostor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = _env(tmp_path, CLAWGATE_HEALTH__PORT=str(server.server_address[1]))
        code, out, err = await _run(["healthcheck"], env)
        assert code == 1 and "not this gateway" in err
        code, out, err = await _run(
            ["healthcheck", "--url", f"http://127.0.0.1:{server.server_address[1]}/healthz"], env
        )
        assert code == 0 and "healthy" in out
    finally:
        server.shutdown()
    with socket.socket() as probe:  # nothing listens on this port any more
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    code, _, err = await _run(["healthcheck"], _env(tmp_path, CLAWGATE_HEALTH__PORT=str(free)))
    assert code == 1 and "nothing answers" in err


async def test_run_says_when_no_platform_account_is_the_owner_yet(tmp_path, anthropic_server):
    from tests.fakes.telegram_server import FakeTelegramServer
    from tests.reliability.process import gateway_env, start_gateway

    hint = "No Telegram/Discord account is yours (owner) yet"
    async with FakeTelegramServer(max_poll=0.3) as tg:
        env = gateway_env(tmp_path, tg, anthropic_server.base_url, [1])
        for round_, expected in ((1, True), (2, False)):
            log = tmp_path / f"run{round_}.log"
            process = await start_gateway(env, log)
            try:
                for _ in range(600):
                    if "clawgate is running" in log.read_text():
                        break
                    await asyncio.sleep(0.05)
            finally:
                # The hint is printed (or not) before the run waits for a signal: once the
                # process has exited after SIGTERM, its log is complete.
                process.terminate()
                await asyncio.wait_for(process.wait(), 30)
            assert "clawgate is running" in log.read_text()
            assert (hint in log.read_text()) is expected, log.read_text()
            if expected:
                code, _, err = await _run(["users", "link", "owner", "telegram:1"], env)
                assert code == 0, err
