"""The terminal chat on a pty, as a person uses it.

Piped input is tested in tests/gateway/cli/test_terminal_chat.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeAnthropicServer

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def chat_env(tmp_path: Path, server: FakeAnthropicServer, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CLAWGATE_") and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "CLAWGATE_CONFIG": str(tmp_path / "none.toml"),
            "CLAWGATE_WORKSPACES_DIR": str(tmp_path / "workspaces"),
            "CLAWGATE_LLM__BASE_URL": server.base_url,
            "CLAWGATE_TIMEZONE": "UTC",
            "ANTHROPIC_API_KEY": "sk-terminal-test",
            **extra,
        }
    )
    return env


async def wait_for_text(path: Path, text: str, timeout: float = 10.0) -> None:
    """Until `path` exists and contains `text` (a bounded wait on a condition)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not (path.exists() and text in path.read_text(errors="replace")):
        if loop.time() > end:
            raise AssertionError(f"{text!r} never appeared in {path}")
        await asyncio.sleep(0.02)


def _controlling_terminal() -> None:
    """In the child, after setsid: make the pty its terminal, so Ctrl-C sends SIGINT."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """`clawgate chat` on a pseudo-terminal: keys in, the screen's bytes out (like tmux)."""

    def __init__(self, env: dict[str, str]) -> None:
        import pty
        import subprocess

        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "chat"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"},
            start_new_session=True,
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        os.set_blocking(self.master, False)
        self.raw = ""

    @property
    def screen(self) -> str:
        """What was written, without terminal control sequences (colours, cursor moves)."""
        return ANSI.sub("", self.raw)

    async def expect(self, text: str, timeout: float = 30.0) -> str:
        """Read until `text` has appeared; returns the whole screen so far."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while text not in self.screen:
            if loop.time() > end:
                raise AssertionError(f"{text!r} not shown; screen so far:\n{self.screen}")
            try:
                self.raw += os.read(self.master, 65536).decode(errors="replace")
            except (BlockingIOError, OSError):
                await asyncio.sleep(0.05)
        return self.screen

    async def ready(self, timeout: float = 30.0) -> None:
        """Wait for the prompt that follows the last answer (the chat takes input again)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while self.screen.rfind("you>") < self.screen.rfind("assistant>"):
            if loop.time() > end:
                raise AssertionError(f"no prompt after the answer:\n{self.screen}")
            with contextlib.suppress(BlockingIOError, OSError):
                self.raw += os.read(self.master, 65536).decode(errors="replace")
            await asyncio.sleep(0.05)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def close(self) -> int:
        await self.ready()
        self.type("\x04")  # Ctrl-D at the prompt
        # Up to 30 s: the stop waits for the last turn's git commit and closes every part;
        # that took over 15 s at a load average of 6-12 (1.2-2.8 s on a quieter machine).
        for _ in range(600):
            if self.process.poll() is not None:
                break
            with contextlib.suppress(BlockingIOError, OSError):
                self.raw += os.read(self.master, 65536).decode(errors="replace")
            await asyncio.sleep(0.05)
        else:
            self.process.kill()
        os.close(self.master)
        return self.process.wait()


async def test_interactive_chat_thinks_keeps_logs_out_remembers_and_continues(
    tmp_path, anthropic_server
):
    env = chat_env(tmp_path, anthropic_server)
    anthropic_server.reply_delay(2.0)  # a slow first answer
    anthropic_server.reply_error(400)  # the second ends in a provider error: a WARNING log
    chat = Pty(env)
    await chat.expect("you>")
    log_file = tmp_path / "workspaces" / ".gateway" / "chat.log"
    assert f"logs in {log_file}" in chat.screen
    start = len(chat.screen)
    chat.type("hello there\r")
    screen = await chat.expect("assistant> echo: hello there")
    answer = screen.index("assistant> echo: hello there")
    thinking = screen.find("thinking...", start)
    assert 0 < thinking < answer
    assert "you>" not in screen[thinking:answer]  # no prompt until answered
    await chat.expect("you>", timeout=10)
    start = len(chat.screen)
    chat.type("this one fails\r")
    await chat.expect("assistant> ")
    # The warning is logged before the answer is shown; the prompt comes after both.
    await wait_for_text(log_file, "WARNING")
    await chat.ready()
    assert "WARNING" not in chat.screen[start:]  # the log line went to the file
    assert await chat.close() == 0
    assert "WARNING" in log_file.read_text()

    # A second start: the conversation continues, and the input history is kept.
    chat = Pty(env)
    await chat.expect("Continuing your conversation from")
    await chat.expect("you>")
    start = len(chat.screen)
    chat.type("\x1b[A\x1b[A\r")  # up twice: "hello there", from the first run's history
    screen = await chat.expect("assistant> ")
    assert "you> hello there" in screen[start:]
    assert await chat.close() == 0
    assert (tmp_path / "workspaces" / ".gateway" / "chat-history").stat().st_mode & 0o077 == 0


async def test_ctrl_d_typed_while_thinking_leaves_after_the_answer(tmp_path, anthropic_server):
    # As in a shell: Ctrl-D typed ahead is the end of input once the prompt comes back (the
    # terminal driver must not swallow it as an end-of-line while no prompt reads keys).
    anthropic_server.reply_delay(2.0)
    chat = Pty(chat_env(tmp_path, anthropic_server))
    await chat.expect("you>")
    chat.type("hello there\r")
    await chat.expect("thinking...")
    chat.type("\x04")
    await chat.expect("assistant> echo: hello there")
    for _ in range(600):
        if chat.process.poll() is not None:
            break
        with contextlib.suppress(BlockingIOError, OSError):
            chat.raw += os.read(chat.master, 65536).decode(errors="replace")
        await asyncio.sleep(0.05)
    assert await chat.close() == 0


async def test_one_ctrl_c_at_an_empty_prompt_says_how_to_leave(tmp_path, anthropic_server):
    chat = Pty(chat_env(tmp_path, anthropic_server))
    await chat.expect("you>")
    chat.type("\x03")  # Ctrl-C: prompt_toolkit reads it as a key, not as SIGINT
    await chat.expect("Ctrl-C again or Ctrl-D to leave")
    await chat.expect("you>")
    assert chat.process.poll() is None  # a shell stays too
    assert await chat.close() == 0  # Ctrl-D


async def test_ctrl_c_while_thinking_stops_and_gives_the_terminal_back(tmp_path, anthropic_server):
    import termios

    anthropic_server.reply_delay(30.0)
    chat = Pty(chat_env(tmp_path, anthropic_server))
    await chat.expect("you>")
    chat.type("take your time\r")
    await chat.expect("thinking...")
    chat.type("\x03")  # SIGINT through the terminal driver
    for _ in range(600):  # a stop takes seconds on a loaded machine
        if chat.process.poll() is not None:
            break
        await asyncio.sleep(0.05)
    assert chat.process.poll() == 130
    assert termios.tcgetattr(chat.master)[3] & termios.ECHO  # typed keys are echoed again
    await chat.close()
