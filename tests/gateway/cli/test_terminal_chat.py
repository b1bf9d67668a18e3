"""The terminal chat as a person uses it: piped input in order, and a real terminal (a pty)
with a prompt only when ready, a thinking line, and logs kept out of the conversation."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from gateway.agent.sessions import transcript_path
from gateway.config.settings import load_settings
from gateway.ops.logs import setup_logging
from tests.gateway.cli.test_cli import _env, _run


async def test_piped_lines_are_answered_in_order(tmp_path, anthropic_server):
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
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
            assert left > 0, f"no {needle!r} in {self.text[self.pos :]!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    self.text += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:
                    break
        shown, self.pos = self.text[self.pos : found + len(needle)], found + len(needle)
        return shown


async def test_in_a_terminal_the_chat_thinks_and_keeps_logs_out(tmp_path, anthropic_server):
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
    )
    anthropic_server.reply_delay(1.5)
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


async def test_a_terminal_only_person_gets_the_web_panel(tmp_path, anthropic_server):
    """Before: with no Telegram or Discord, the person had no panel at all. The chat at a
    terminal serves it (`clawgate run` without a platform opens this same chat), says where
    above the prompt, and stops it with the chat; piped input (a script) gets none."""
    import urllib.request

    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
    )
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
        said = await asyncio.to_thread(screen.until, "`clawgate panel url`")
        url = said.split("panel on ")[1].split()[0].rstrip(":")
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), said
        page = await asyncio.to_thread(
            lambda: urllib.request.urlopen(url + "/login", timeout=10).read().decode()
        )
        assert "<h1>Log in</h1>" in page
        os.write(master, b"\x04")
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
    with pytest.raises(OSError):  # stopped with the chat
        await asyncio.to_thread(urllib.request.urlopen, url + "/login", None, 2)
    code, out, err = await _run(["chat"], env, stdin="hello\n")
    assert code == 0 and "echo: hello" in out and "panel" not in err + out


async def test_ctrl_c_at_the_prompt_works_as_in_a_shell(tmp_path, anthropic_server):
    """Before: Ctrl-C on a half-typed line quit the whole chat; a shell clears the line."""
    env = _env(
        tmp_path,
        ANTHROPIC_API_KEY="sk-x",
        TERM="xterm",
        PROMPT_TOOLKIT_NO_CPR="1",
        CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
    )
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
        banner = await asyncio.to_thread(screen.until, "you>")
        assert "Ctrl-C twice" in banner
        os.write(master, b"half a thou")
        await asyncio.to_thread(screen.until, "half a thou")
        os.write(master, b"\x03")  # the line is dropped; the chat goes on
        os.write(master, b"hello\r")
        turn = await asyncio.to_thread(screen.until, "assistant> echo: ")
        assert process.returncode is None
        await asyncio.to_thread(screen.until, "hello")
        assert "thou" not in turn.split("assistant>")[-1]
        await asyncio.to_thread(screen.until, "you>")
        os.write(master, b"\x03")  # on an empty line: how to leave
        await asyncio.to_thread(screen.until, "Ctrl-C again or Ctrl-D to leave")
        # The hint is printed outside the prompt (the terminal back in cooked mode, where a
        # Ctrl-C byte is the line discipline's, not the chat's): press again at the prompt.
        await asyncio.to_thread(screen.until, "you>")
        assert process.returncode is None
        os.write(master, b"\x03")  # a second one in a row leaves, cleanly
        assert await asyncio.wait_for(process.wait(), 60) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
    assert [
        r for r in anthropic_server.requests if "thou" in json.dumps(r["messages"])
    ] == []  # the dropped line was never sent


async def _read_until(stream: asyncio.StreamReader, needle: str, timeout: float = 30.0) -> str:
    seen = ""
    async with asyncio.timeout(timeout):
        while needle not in seen:
            chunk = await stream.read(4096)
            if not chunk:
                break
            seen += chunk.decode()
    assert needle in seen, seen
    return seen


async def test_a_reminder_set_in_the_chat_arrives_in_the_chat(tmp_path, anthropic_server):
    """Before: the chat confirmed a reminder that never came (no scheduler ran there)."""
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    anthropic_server.reply_tool_call(
        "schedule_create", {"when": "in 3 seconds", "text": "Drink water"}
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"remind me to drink water in 3 seconds\n")
        await process.stdin.drain()
        shown = await _read_until(process.stdout, "assistant> Drink water")
        assert shown.index("echo: remind me") < shown.index("assistant> Drink water")
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    # The tool told the model where the reminder would go, and the DM transcript has it.
    results = [
        block
        for message in anthropic_server.requests[-1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert "It will appear in this chat" in json.dumps(results)
    transcript = transcript_path(tmp_path / "workspaces" / "owner", "owner:dm").read_text()
    entries = [json.loads(line) for line in transcript.splitlines()]
    assert any(e.get("reminder") and e.get("text") == "Drink water" for e in entries)


@pytest.mark.timeout(300)  # two chat processes and a held answer: ~43 s at load 8
async def test_an_answer_cut_short_by_ctrl_c_comes_at_the_next_start(tmp_path, anthropic_server):
    """Before: the README promised it; after a restart the message was never answered."""
    env = _env(tmp_path, ANTHROPIC_API_KEY="sk-x", CLAWGATE_LLM__BASE_URL=anthropic_server.base_url)
    anthropic_server.reply_delay(60.0)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    try:
        process.stdin.write(b"what is the capital of Peru?\n")
        await process.stdin.drain()
        async with asyncio.timeout(30):
            while not anthropic_server.requests:  # the turn is with the model now
                await asyncio.sleep(0.05)
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 30) == 130
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    code, out, err = await _run(["chat"], env, stdin="")
    assert code == 0, err
    assert "assistant> echo: what is the capital of Peru?" in out
    # Once: a third start has nothing left to answer.
    code, out, _ = await _run(["chat"], env, stdin="")
    assert code == 0 and "capital of Peru" not in out
