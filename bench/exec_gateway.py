"""Commands inside a running gateway: do 20 commands at once slow anyone's DM?

A gateway (the real pipeline, an instant model, a channel timing each reply) serves `--dms`
people who chat (one message after another, each answered without a tool), first alone
(baseline), then while 20 other people each have a command running through the `exec`
tool in their own sandbox (the model calls the tool; `[exec] mode = "off"`, so nobody is
asked). Two kinds of command:

- `sleep`: `sleep 3`, the gateway's own cost of 20 running sandboxes (watching, capture);
- `busy`: a 3 s CPU loop in each sandbox, 20 of them on this machine's cores: what is left
  for the gateway when every command wants a core.

Reports the DM reply latency p50/p95 in each phase and the p50 slowdown against the
baseline (target: at most 10%), and the memory a running command adds besides its own: the
gateway process's RSS while 20 `sleep` commands run, less before, and the sandboxes' own
processes outside the command (bubblewrap and its init), summed from /proc.

    python bench/exec_gateway.py [--dms 5] [--rounds 3] [--commands 20]

The machine is shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from channels.base import ChannelBase, InboundMessage, MessageHandler, OutboundMessage
from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolCall, ToolSpec, Usage
from gateway.assembly.platforms import build_gateway
from gateway.config.settings import load_settings
from gateway.features.exec.desk import ApprovalDesk

SLEEP = "sleep 3"
BUSY = 'python3 -c "import time\nt = time.time()\nwhile time.time() - t < 3: pass"'


class ScriptedProvider:
    """Instant answers; a message "run: CMD" makes it call exec with CMD, once."""

    name = "instant"
    model = "zero-latency"

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: object = None,
    ) -> Completion:
        last = messages[-1]
        usage = Usage(input_tokens=1000, output_tokens=10)
        text = last.text
        if last.role == "user" and "run: " in text:
            command = text.split("run: ", 1)[1].strip()
            return Completion(
                "", (ToolCall(f"c{time.monotonic_ns()}", "exec", {"command": command}),), usage
            )
        return Completion("ok", usage=usage)

    async def close(self) -> None:
        return None


class TimingChannel(ChannelBase):
    name = "telegram"
    durable = True

    def __init__(self) -> None:
        self.handler: MessageHandler | None = None
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.ids = itertools.count(1)

    async def start(self, handler: MessageHandler) -> None:
        self.handler = handler

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        future = self.waiting.pop(message.chat_id, None)
        if future is not None and not future.done():
            future.set_result(time.perf_counter())

    async def turn(self, person: str, text: str) -> float:
        assert self.handler is not None
        done = asyncio.get_running_loop().create_future()
        self.waiting[person] = done
        start = time.perf_counter()
        await self.handler(
            InboundMessage("telegram", person, person, text, message_id=str(next(self.ids)))
        )
        return (await done) - start


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _sandbox_overhead_kib() -> tuple[int, int]:
    """(processes, KiB of RSS) of this process's sandboxes outside their commands: each
    bubblewrap we started and its init inside (the other bwrap processes on a shared
    machine are not ours)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        parents[int(entry.name)] = int(fields.get("PPid", "0").strip() or 0)
        names[int(entry.name)] = fields.get("Name", "").strip()
    ours = {
        pid for pid, parent in parents.items() if parent == os.getpid() and names[pid] == "bwrap"
    }
    ours |= {pid for pid, parent in parents.items() if parent in ours and names[pid] == "bwrap"}
    return len(ours), sum(_rss_kib(pid) for pid in ours)


async def _chat(channel: TimingChannel, person: str, turns: int, offset: float) -> list[float]:
    await asyncio.sleep(offset)
    return [await channel.turn(person, f"message {n}") for n in range(turns)]


async def _dms(channel: TimingChannel, people: list[str], turns: int) -> list[float]:
    results = await asyncio.gather(
        *(_chat(channel, p, turns, i * 0.003) for i, p in enumerate(people))
    )
    return [x for r in results for x in r]


def _line(label: str, values: list[float], base: float | None = None) -> float:
    ms = sorted(v * 1000 for v in values)
    p50 = statistics.median(ms)
    p95 = ms[max(0, int(len(ms) * 0.95) - 1)]
    slower = f"  p50 {100 * (p50 / base - 1):+5.1f}% vs baseline" if base else ""
    print(f"{label:>34}: {len(ms):5d} replies  p50 {p50:6.2f} ms  p95 {p95:6.2f} ms{slower}")
    return p50


async def run(dms: int, rounds: int, commands: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        runners = [f"c{n}" for n in range(commands)]
        settings = load_settings(
            Path(root) / "none.toml",
            workspaces_dir=Path(root) / "ws",
            timezone="UTC",
            owner=f"telegram-{runners[0]}",
            limits={"messages_per_minute": 0},
            exec={
                "mode": "off",
                "people": [f"telegram-{r}" for r in runners[1:]],
                "wall_seconds": 30,
            },
        )
        channel = TimingChannel()
        gateway = build_gateway(
            settings,
            ScriptedProvider(),
            extra_channels=[channel],
            with_platforms=False,
            with_exec=True,
        )
        if gateway.presses is None:
            raise SystemExit("the sandbox does not run here (clawgate doctor says why)")
        await gateway.start()
        desk = gateway.presses
        if not isinstance(desk, ApprovalDesk) or not await desk.runner.gate.settled():
            raise SystemExit("the sandbox does not run here (clawgate doctor says why)")
        people = [f"d{n}" for n in range(dms)]
        for person in [*people, *runners]:
            await gateway.state.approve("telegram", person, "bench")
        for person in [*people, *runners]:  # first contact seeds the workspace
            await channel.turn(person, "hello")
        await _dms(channel, people, 20)  # warm-up

        # Rounds of a quiet window then a window with the commands running, so that other
        # work on a shared machine weighs on both alike.
        for kind, command in (("sleep", SLEEP), ("busy", BUSY)):
            quiet: list[float] = []
            during: list[float] = []
            memory = ""
            for _ in range(rounds):
                began = time.perf_counter()
                while time.perf_counter() - began < 2.5:
                    quiet += await _dms(channel, people, 5)
                rss_before = _rss_kib(os.getpid())
                started = time.perf_counter()
                running = [
                    asyncio.ensure_future(channel.turn(p, f"run: {command}")) for p in runners
                ]
                await asyncio.sleep(0.4)  # every sandbox up
                sandboxes, overhead = _sandbox_overhead_kib()
                rss_during = _rss_kib(os.getpid())
                while time.perf_counter() - started < 2.8:  # only while the commands run
                    during += await _dms(channel, people, 5)
                await asyncio.gather(*running)
                memory = (
                    f"gateway RSS {(rss_during - rss_before) / 1024:+.1f} MiB with "
                    f"{commands} commands running; {sandboxes} bubblewrap processes "
                    f"outside the commands, {overhead / 1024:.1f} MiB RSS together "
                    f"({overhead / 1024 / max(commands, 1):.2f} MiB per command)"
                )
            base = _line(f"no command running ({kind} rounds)", quiet)
            _line(f"{commands} x {kind} running", during, base)
            if kind == "sleep":
                print(f"{'memory':>34}: {memory}")
        await gateway.stop()
    load = os.getloadavg()
    print(
        f"{'load average':>34}: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dms", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commands", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.dms, args.rounds, args.commands))


if __name__ == "__main__":
    main()
