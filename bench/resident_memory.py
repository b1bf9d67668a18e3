"""Resident memory of `clawgate run`, and what it is made of.

1. The whole: a real `clawgate run` process (Telegram through the loopback Bot API fake, the
   fake LLM server, recall on with the bundled local embedder) measured from /proc after
   start, after a few DM turns, and after a turn that searches memory (the embedder model
   and the line model are loaded then).
2. The parts: fresh interpreters importing one more group of modules each time; the
   increments say where the start-up resident memory comes from.

    python bench/resident_memory.py [--turns 5]

Figures depend on the machine (allocator, wheels); on a busy machine they move little.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.llm_server import FakeAnthropicServer
from tests.fakes.telegram_server import FakeTelegramServer
from tests.reliability.process import gateway_env, rss_mib, start_gateway

USER = 4242
# Cumulative import stages: each line adds the modules named on top of the ones before.
STAGES: list[tuple[str, str]] = [
    ("python", "import sys"),
    ("pydantic + settings", "import gateway.config.settings"),
    ("aiosqlite, sqlite-vec, state", "import gateway.stores.state, sqlite_vec"),
    ("python-telegram-bot + httpx", "import channels.telegram"),
    ("discord.py + aiohttp", "import channels.discord_channel"),
    ("anthropic SDK", "import anthropic"),
    ("openai SDK", "import openai"),
    ("mcp SDK (tool servers)", "import mcp, mcp.client.stdio"),
    ("web panel (aiohttp app, markdown-it)", "import gateway.panel.server"),
    ("gateway message path", "import gateway.pipeline.gateway, gateway.assembly.platforms"),
    ("numpy + recall index", "import numpy, memory.service"),
    # Kept in a variable: a discarded embedder frees its model at once.
    (
        "local embedder model loaded",
        "from memory.embedders import LocalEmbedder; "
        "embedder = LocalEmbedder(); embedder.embed_query('hello')",
    ),
    (
        "line model loaded (memory.minilm)",
        "from memory.minilm import MiniLMEmbedder; "
        "line_model = MiniLMEmbedder(); "
        "line_model.embed_query('hello')",
    ),
]


def stage_rss(code: str) -> float:
    probe = (
        f"{code}\nfrom pathlib import Path\n"
        "print([l for l in Path('/proc/self/status').read_text().splitlines()"
        " if l.startswith('VmRSS')][0].split()[1])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    if done.returncode != 0:
        return float("nan")
    return int(done.stdout.strip().splitlines()[-1]) / 1024


def parts() -> None:
    print("import stage (cumulative)            RSS MiB   added")
    code, before = "", 0.0
    for name, stage in STAGES:
        code += stage + "\n"
        now = stage_rss(code)
        print(f"  {name:<34} {now:7.1f} {now - before:+7.1f}")
        before = now


async def whole(turns: int) -> None:
    async with FakeTelegramServer() as tg, FakeAnthropicServer() as llm:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            env = gateway_env(root, tg, llm.base_url, [USER])
            process = await start_gateway(env, root / "gateway.log")
            try:
                await tg.send_text(USER, "hello")
                await tg.wait_sent(1, timeout=120)
                print(f"clawgate run after start and one turn: {rss_mib(process.pid):6.1f} MiB")
                for n in range(turns):
                    await tg.send_text(USER, f"message {n}")
                await tg.wait_sent(1 + turns, timeout=120)
                print(f"  after {turns} more turns:                {rss_mib(process.pid):6.1f} MiB")
                llm.reply_tool_call("memory_search", {"query": "hello"})
                await tg.send_text(USER, "what did I say?")
                await tg.wait_sent(2 + turns, timeout=300)
                print(f"  after a memory search (models loaded):   {rss_mib(process.pid):6.1f} MiB")
            finally:
                process.terminate()
                await process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(whole(args.turns))
    parts()


if __name__ == "__main__":
    main()
