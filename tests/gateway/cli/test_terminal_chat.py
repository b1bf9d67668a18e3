"""The terminal chat as a person uses it: piped input in order, and a real terminal (a pty)
with a prompt only when ready, a thinking line, and logs kept out of the conversation."""

from __future__ import annotations

import asyncio
import logging
import os
import pty
import select
import sys
import time
from pathlib import Path

from gateway.config.settings import load_settings
from gateway.ops.logs import setup_logging
from tests.gateway.cli.test_cli import _env, _run


async def test_piped_lines_are_answered_in_order(tmp_path, anthropic_server):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x",
               CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    anthropic_server.reply_delay(1.0)  # the first answer is slow: /status must still wait
    code, out, err = await _run(["chat"], env, stdin="first\n/status\nsecond\n")
    assert code == 0, err
    first = out.index("echo: first")
    status = out.index("Session: owner:dm")
    second = out.index("echo: second")
    assert first < status < second, out


def test_http_client_request_lines_are_held_at_warning(tmp_path):
    settings = load_settings(tmp_path / "absent.toml")
    setup_logging(settings)
    try:
        for name in ("httpx", "httpx2", "httpcore2"):
            assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        for name in ("httpx", "httpx2", "httpcore2"):
            logging.getLogger(name).setLevel(logging.NOTSET)


class _Screen:
    """What the terminal showed, read on demand; `until` consumes up to a needle's end."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""
        self.pos = 0

    def until(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (found := self.text.find(needle, self.pos)) < 0:
            left = deadline - time.monotonic()
            assert left > 0, f"no {needle!r} in {self.text[self.pos:]!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    self.text += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:
                    break
        shown, self.pos = self.text[self.pos:found + len(needle)], found + len(needle)
        return shown


async def test_in_a_terminal_the_chat_thinks_and_keeps_logs_out(tmp_path, anthropic_server):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
               CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    anthropic_server.reply_delay(1.5)
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "chat", env=env, stdin=slave, stdout=slave,
        stderr=slave, start_new_session=True)
    os.close(slave)
    screen = _Screen(master)
    try:
        banner = await asyncio.to_thread(screen.until, "you>")
        assert "logs in " in banner and "chat.log" in banner
        assert banner.index("logs in") < banner.index("you>")  # the prompt comes when ready
        os.write(master, b"hello there\r")
        turn = await asyncio.to_thread(screen.until, "echo: hello there")
        assert "thinking" in turn
        await asyncio.to_thread(screen.until, "you>")
        os.write(master, b"\x04")  # Ctrl-D at the prompt: the chat ends
        code = await asyncio.wait_for(process.wait(), 30)
        assert code == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
    shown = screen.text
    log = Path(shown.split("logs in ")[1].split(")")[0].strip())
    assert log.exists() and "turn finished" in log.read_text()
    assert " INFO " not in shown and "turn finished" not in shown


async def test_ctrl_c_at_the_prompt_stops_the_chat_like_anywhere_else(tmp_path):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "chat", env=env, stdin=slave, stdout=slave,
        stderr=slave, start_new_session=True)
    os.close(slave)
    screen = _Screen(master)
    try:
        await asyncio.to_thread(screen.until, "you>")
        os.write(master, b"\x03")
        code = await asyncio.wait_for(process.wait(), 10)
        assert code == 130
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
