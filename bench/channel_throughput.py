"""End-to-end Telegram throughput and the gateway's CPU per message.

The real python-telegram-bot client polls a loopback Bot API fake; the gateway records each
update durably (SQLite, WAL, synchronous=FULL), checks access, routes, runs a turn with a
zero-latency provider and sends the reply through the Bot API. The fake Bot API and the people
writing to it run in a child process, so the CPU time counted is the gateway's alone (its
process's user + system time over the run, divided by the messages answered). Latency is
measured from the moment an update is queued on the fake server to the moment the reply
reaches it. Each person waits for the answer before writing again (a person in a DM), so 20
people means up to 20 turns in flight.

    python bench/channel_throughput.py [--messages 30] [--people 1 20 50] [--profile FILE] [--exec]

`--exec`: the gateway also has the exec tool and its approvals, as `clawgate run` has where the
sandbox runs (every person here is not the owner, so each turn's tools leave it out: the
per-person offer's cost); the run starts once the sandbox's probe has answered.

`--profile FILE` writes a cProfile of the gateway's event loop thread for the last run, in
CPU time (read it with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# -- the child: the fake Bot API and the people -----------------------------------------------


async def serve(people: int, messages: int) -> None:
    """Print the server's address, wait for "go" on stdin, run the people, print results."""
    from tests.fakes.telegram_server import FakeTelegramServer

    async with FakeTelegramServer(max_poll=1.0) as tg:
        print(json.dumps({"token": tg.token, "base_url": tg.base_url}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        latencies: list[float] = []

        async def person(user: int) -> None:
            for i in range(messages):
                queued = time.monotonic()
                await tg.send_text(user, f"message {i}")
                replies = tg.by_chat.setdefault(str(user), [])
                async with tg._changed:
                    await tg._changed.wait_for(lambda: len(replies) > i)  # noqa: B023
                latencies.append(replies[i].at - queued)

        started = time.monotonic()
        await asyncio.gather(*(person(10_000 + n) for n in range(people)))
        elapsed = time.monotonic() - started
        print(json.dumps({"latencies": latencies, "elapsed": elapsed}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # until the gateway has stopped


# -- the parent: the gateway -------------------------------------------------------------------


async def run(
    people: int, messages: int, profile: Path | None, with_exec: bool = False
) -> dict[str, float]:
    from bench.turn_overhead import InstantProvider
    from gateway.assembly.platforms import build_gateway
    from gateway.config.settings import load_settings
    from retrypolicy import Backoff

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(people), str(messages)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdin is not None and child.stdout is not None
    address = json.loads(await asyncio.to_thread(child.stdout.readline))
    with tempfile.TemporaryDirectory() as tmp:
        users = [str(10_000 + n) for n in range(people)]
        settings = load_settings(
            Path(tmp) / "none.toml",
            workspaces_dir=Path(tmp) / "ws",
            timezone="UTC",
            llm={"provider": "anthropic", "api_key": "x"},
            telegram={
                "token": address["token"],
                "base_url": address["base_url"],
                "poll_timeout_seconds": 1,
                "allow_from": users,
            },
            limits={"messages_per_minute": 0},  # a throughput run, not a limits test
        )
        gateway = build_gateway(
            settings,
            InstantProvider(),  # type: ignore[arg-type]
            options={"telegram": {"backoff": Backoff(0.05, 0.5)}},
            with_exec=with_exec,
        )
        await gateway.start()
        if gateway.presses is not None:
            await gateway.presses.settled()  # the probe runs beside the first poll
        # CPU time of the event loop's thread, so the profile holds on a busy machine too.
        profiler = cProfile.Profile(time.thread_time) if profile else None
        cpu = os.times()
        if profiler:
            profiler.enable()
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(await asyncio.to_thread(child.stdout.readline))
        if profiler:
            profiler.disable()
            profiler.dump_stats(str(profile))
        after = os.times()
        await gateway.stop()
    child.stdin.write("done\n")
    child.stdin.flush()
    child.wait(10)
    latencies = sorted(result["latencies"])
    count = len(latencies)
    cpu_seconds = (after.user - cpu.user) + (after.system - cpu.system)
    return {
        "people": people,
        "messages": count,
        "per_second": count / result["elapsed"],
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[max(0, int(count * 0.95) - 1)] * 1000,
        "cpu_ms": cpu_seconds / count * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=30, help="messages per person")
    parser.add_argument("--people", type=int, nargs="+", default=[1, 20, 50])
    parser.add_argument("--profile", type=Path, help="cProfile output of the last run")
    parser.add_argument("--exec", action="store_true", help="with the exec tool wired in")
    parser.add_argument("--serve", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(*args.serve))
        return
    logging.basicConfig(level=logging.WARNING)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for n, people in enumerate(args.people):
        last = n == len(args.people) - 1
        row = asyncio.run(run(people, args.messages, args.profile if last else None, args.exec))
        print(
            f"{row['people']:>3} people x {args.messages} messages: "
            f"{row['per_second']:6.1f} msg/s, p50 {row['p50_ms']:6.1f} ms, "
            f"p95 {row['p95_ms']:6.1f} ms, gateway CPU {row['cpu_ms']:5.2f} ms/message"
        )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
