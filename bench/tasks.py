"""Background tasks under load: what 20 running tasks cost the people chatting meanwhile, how
soon a finished task's report reaches the chat, and state-database writes per task step.

`clawgate run`'s parts and services (the task runner among them) in this process; in a child
process, a fake Telegram Bot API, a fake Anthropic API and the people writing, so the CPU the
fakes spend is not the gateway's. Everything talks over 127.0.0.1.

The model is scripted by who asks: an ordinary DM is answered at once (so a DM's latency is
the gateway's own work, and any slowdown from the tasks shows in full); a person who asks for
a job gets a `start_task` call, then "started"; a task's model calls are paced (each waits a
random 1-2 s, `--pace`): `list_files` tool calls for as long as the run needs the tasks busy,
then (at least `--steps` calls in) a final answer carrying a marker, whose sending time the
fake API records.

Phases: a warm-up (every chatter's workspace is created), the DM phase without tasks; then
`--tasks` people each start one task and, once all run, `--rounds` pairs of DM windows: one
with the tasks held at their model (running, each waiting for its next answer) and one with
them stepping, so the same machine noise falls on both; then the tasks alone for `--solo`
seconds; then they finish, the run waits for every report, and runs
the DM phase once more without tasks (the spread between the two phases without tasks is the
machine's noise, to read the difference against). Figures:
- DM latency p50/p95 (update queued at the fake Telegram -> answer received there), without
  tasks and with the tasks stepping, and per round held against stepping; the gateway
  process's CPU share in each window;
- report latency: the task's last model answer sent -> its report received by the fake
  Telegram (both clocks are the machine's monotonic clock, shared by the two processes);
- state-database writes (each write call the group committer commits) and commits
  (transactions) per task step, counted while only the tasks ran, with the steps made
  meanwhile from the tasks table; and those of the last steps and the reports.

    python bench/tasks.py [--tasks 20] [--people 20] [--messages 10] [--rounds 3] [--think 1.0]
        [--profile FILE]  (the event loop thread's CPU in the stepping windows; `python -m
        pstats FILE`)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHATTER = 10_000  # user ids of the people chatting
BOSS = 20_000  # user ids of the people who start a task each
MARK = "RESULT-"


# -- the child: the fakes and the people -------------------------------------------------------


def _text(content: Any) -> str:
    """A message's first text block (the gateway adds the time as a block after it)."""
    if isinstance(content, str):
        return content
    return next((b["text"] for b in content if isinstance(b, dict) and "text" in b), "")


async def serve(args: argparse.Namespace) -> None:
    """Print the fakes' addresses, then obey one command per stdin line, answering each with
    one JSON line on stdout."""
    from tests.fakes.llm_server import FakeAnthropicServer, Reply
    from tests.fakes.telegram_server import FakeTelegramServer

    rng = random.Random(35)
    finishing = asyncio.Event()  # set: each task's next model call is its final answer
    stepping = asyncio.Event()  # clear: the tasks' model calls are held (the tasks wait)
    stepping.set()
    last_step: dict[str, float] = {}  # marker -> when its final answer was sent
    finals: dict[int, str] = {}  # id(request body) -> marker, until the answer is sent

    class PacedModel(FakeAnthropicServer):
        async def _answer(self, request: Any, body: dict[str, Any]) -> Any:
            if _text(body["messages"][0]["content"]).startswith("Your task"):
                await stepping.wait()  # a paused window: the task waits for its model
            response = await super()._answer(request, body)
            marker = finals.pop(id(body), None)
            if marker is not None:
                last_step[marker] = time.monotonic()
            return response

    model = PacedModel()

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        first = _text(messages[0]["content"])
        if first.startswith("Your task"):
            job = first.split("job ", 1)[1].split()[0] if "job " in first else "?"
            done = sum(1 for m in messages if m["role"] == "assistant")
            pace = rng.uniform(*args.pace)
            if finishing.is_set() and done + 1 >= args.steps:
                finals[id(body)] = f"{MARK}{job}"
                return replace(model.make_text(f"Finished. {MARK}{job}"), delay=pace)
            call = ("list_files", {"path": "."}, f"step-{job}-{done}")
            return replace(model.make_tool_calls([call]), delay=pace)
        last = messages[-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return model.make_text("I've started on it.")
        said = _text(last)
        if said.startswith("please run job"):
            job = said.rsplit(" ", 1)[1]
            goal = f"Go through the notes for job {job} and summarise them."
            return model.make_tool_calls([("start_task", {"goal": goal}, f"start-{job}")])
        return model.make_text(f"echo: {said[:40]}")

    model.responder = respond
    async with model, FakeTelegramServer(max_poll=1.0) as tg:
        print(json.dumps({"tg": [tg.token, tg.base_url], "llm": model.base_url}), flush=True)

        async def replies(user: int, count: int) -> list[Any]:
            got = tg.by_chat.setdefault(str(user), [])
            async with tg._changed:
                await tg._changed.wait_for(lambda: len(got) >= count)
            return got

        async def chatter(user: int, messages: int, latencies: list[float]) -> None:
            have = len(tg.by_chat.get(str(user), []))
            for i in range(messages):
                queued = time.monotonic()
                await tg.send_text(user, f"message {i}: how is it going?")
                got = await replies(user, have + i + 1)
                latencies.append(got[have + i].at - queued)
                await asyncio.sleep(args.think * rng.uniform(0.5, 1.5))

        while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
            if line.startswith("dm"):
                count = int(line.split()[1])
                latencies: list[float] = []
                began = time.monotonic()
                await asyncio.gather(
                    *(chatter(CHATTER + n, count, latencies) for n in range(args.people))
                )
                out = {"latencies": latencies, "elapsed": time.monotonic() - began}
            elif line == "start":
                for n in range(args.tasks):
                    await tg.send_text(BOSS + n, f"please run job {n}")
                await asyncio.gather(*(replies(BOSS + n, 1) for n in range(args.tasks)))
                out = {"started": args.tasks}
            elif line in ("pause", "resume"):
                (stepping.clear if line == "pause" else stepping.set)()
                out = {line: True}
            elif line == "finish":
                finishing.set()
                out = {"finishing": True}
            elif line == "reports":
                await asyncio.gather(*(replies(BOSS + n, 2) for n in range(args.tasks)))
                delays = []
                for n in range(args.tasks):
                    report = tg.by_chat[str(BOSS + n)][1]
                    marker = f"{MARK}{n}"
                    if marker in report.text and marker in last_step:
                        delays.append(report.at - last_step[marker])
                out = {"report_latencies": delays, "calls": len(model.requests)}
            else:
                break
            print(json.dumps(out), flush=True)


# -- the parent: the gateway ---------------------------------------------------------------------


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p95 = ordered[max(0, int(len(ordered) * 0.95 + 0.5) - 1)]
    return statistics.median(ordered), p95, ordered[-1]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.agent.providers import build_provider
    from gateway.assembly.builder import GatewayApp, Plan, assemble_parts
    from gateway.config.settings import load_settings
    from retrypolicy import Backoff

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", *sys.argv[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout

    async def ask(command: str) -> Any:
        stdin.write(command + "\n")
        stdin.flush()
        return json.loads(await asyncio.to_thread(stdout.readline))

    async def dm_phase(messages: int) -> Any:
        """The people's DM phase, with the gateway's CPU share meanwhile (this process)."""
        before = os.times()
        out = await ask(f"dm {messages}")
        after = os.times()
        busy = (after.user - before.user) + (after.system - before.system)
        out["cpu_share"] = busy / max(1e-9, after.elapsed - before.elapsed)
        return out

    address = json.loads(await asyncio.to_thread(stdout.readline))
    users = [str(CHATTER + n) for n in range(args.people)]
    users += [str(BOSS + n) for n in range(args.tasks)]
    plan = Plan(heartbeats=False, health=False, panel=False, exclusive=False)
    result: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = load_settings(
                Path(tmp) / "none.toml",
                workspaces_dir=Path(tmp) / "ws",
                timezone="UTC",
                llm={
                    "provider": "anthropic",
                    "api_key": "x",
                    "base_url": address["llm"],
                    "max_attempts": 1,
                },
                telegram={
                    "token": address["tg"][0],
                    "base_url": address["tg"][1],
                    "poll_timeout_seconds": 1,
                    "allow_from": users,
                },
                limits={"messages_per_minute": 0},  # a load run, not a limits test
                memory={"embedder": "none", "watch": False},
                # Tasks run as long as the phases need them: no cap or round limit ends one.
                tasks={
                    "max_running": max(20, args.tasks),
                    "poll_seconds": 1.0,
                    "max_tool_rounds": 500,
                    "default_token_cap": 10_000_000,
                    "max_token_cap": 10_000_000,
                },
            )
            parts = assemble_parts(
                settings,
                plan,
                provider=build_provider(settings),
                options={"telegram": {"backoff": Backoff(0.05, 0.5)}},
            )
            async with GatewayApp(settings, plan, parts=parts) as app:
                state = app.gateway.state
                writer = state.writer
                await ask("dm 3")  # warm-up: every chatter's workspace is created
                alone = await dm_phase(args.messages)
                await ask("start")
                async with asyncio.timeout(60):
                    while sum(t.state == "running" for t in await state.tasks.active()) < (
                        args.tasks
                    ):
                        await asyncio.sleep(0.05)
                # Windows alternate: the tasks held at their model (running, waiting for it)
                # and the tasks stepping; the same machine noise falls on both.
                held: list[Any] = []
                busy: list[Any] = []
                profiler = cProfile.Profile(time.thread_time) if args.profile else None
                for _ in range(args.rounds):
                    await ask("pause")
                    held.append(await dm_phase(args.messages))
                    await ask("resume")
                    if profiler:
                        profiler.enable()
                    busy.append(await dm_phase(args.messages))
                    if profiler:
                        profiler.disable()
                if profiler:
                    profiler.dump_stats(str(args.profile))
                beside = {
                    "latencies": [x for w in busy for x in w["latencies"]],
                    "cpu_share": statistics.mean(w["cpu_share"] for w in busy),
                }
                active = await state.tasks.active()
                still = sum(t.state == "running" for t in active)

                async def counts() -> tuple[int, int, int]:
                    steps = sum(t.steps for t in await state.tasks.list_all(10_000))
                    return writer.writes, writer.commits, steps

                # The tasks alone for a while: the state database's writes per step.
                solo_from = await counts()
                await asyncio.sleep(args.solo)
                solo_to = await counts()
                await ask("finish")
                reports = await ask("reports")
                # The last report's bookkeeping (its note in the chat's session) may still be
                # on its way: wait until every task is noted, then count.
                async with asyncio.timeout(60):
                    while not all(t.noted for t in await state.tasks.list_all(10_000)):
                        await asyncio.sleep(0.05)
                ended = await counts()
                tasks = await state.tasks.list_all(10_000)
                after = await dm_phase(args.messages)  # no tasks again: the noise
                result = {
                    "held": held,
                    "busy": busy,
                    "alone": alone,
                    "beside": beside,
                    "after": after,
                    "running_after_dm": still,
                    "reports": reports["report_latencies"],
                    "states": sorted({t.state for t in tasks}),
                    "min_steps": min(t.steps for t in tasks),
                    "solo": [b - a for a, b in zip(solo_from, solo_to, strict=True)],
                    "ending": [b - a for a, b in zip(solo_to, ended, strict=True)],
                }
    finally:
        stdin.write("stop\n")
        stdin.flush()
        child.wait(10)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20, help="tasks running at once")
    parser.add_argument("--people", type=int, default=20, help="people chatting meanwhile")
    parser.add_argument("--messages", type=int, default=10, help="messages per person and window")
    parser.add_argument(
        "--steps",
        type=int,
        default=4,
        help="model calls per task at least (they run on "
        "until the second DM phase and the tasks-only window are over)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="held/stepping window pairs")
    parser.add_argument("--solo", type=float, default=6.0, help="s of the tasks alone")
    parser.add_argument("--pace", type=float, nargs=2, default=[1.0, 2.0], help="s per call")
    parser.add_argument("--think", type=float, default=1.0, help="s between a person's messages")
    parser.add_argument(
        "--profile", type=Path, help="cProfile of the event loop's thread in the stepping windows"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args))
        return
    logging.basicConfig(level=logging.WARNING)
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    row = asyncio.run(run(args))
    a50, a95, amax = _quantiles([x * 1000 for x in row["alone"]["latencies"]])
    b50, b95, bmax = _quantiles([x * 1000 for x in row["beside"]["latencies"]])
    print(
        f"DM answers, {args.people} people x {args.messages} messages, no tasks:      "
        f"p50 {a50:6.1f} ms, p95 {a95:6.1f} ms, max {amax:6.1f} ms; "
        f"gateway CPU {row['alone']['cpu_share']:.0%} of a core"
    )
    print(
        f"DM answers, same, {args.tasks} tasks running: "
        f"p50 {b50:6.1f} ms, p95 {b95:6.1f} ms, max {bmax:6.1f} ms; "
        f"gateway CPU {row['beside']['cpu_share']:.0%} of a core "
        f"(p50 {b50 / a50 - 1:+.0%}, p95 {b95 / a95 - 1:+.0%}; "
        f"{row['running_after_dm']} of {args.tasks} still running at the phase's end)"
    )
    for n, (h, b) in enumerate(zip(row["held"], row["busy"], strict=True)):
        h50, h95, _ = _quantiles([x * 1000 for x in h["latencies"]])
        s50, s95, _ = _quantiles([x * 1000 for x in b["latencies"]])
        print(
            f"  round {n + 1}: tasks held at their model p50 {h50:6.1f} ms, p95 {h95:6.1f} ms "
            f"(CPU {h['cpu_share']:.0%}); stepping p50 {s50:6.1f} ms, p95 {s95:6.1f} ms "
            f"(CPU {b['cpu_share']:.0%}): p50 {s50 / h50 - 1:+.0%}, p95 {s95 / h95 - 1:+.0%}"
        )
    c50, c95, cmax = _quantiles([x * 1000 for x in row["after"]["latencies"]])
    print(
        f"DM answers, same, after the tasks ended:  "
        f"p50 {c50:6.1f} ms, p95 {c95:6.1f} ms, max {cmax:6.1f} ms; "
        f"gateway CPU {row['after']['cpu_share']:.0%} of a core (the run's noise)"
    )
    if row["reports"]:
        r50, r95, rmax = _quantiles([x * 1000 for x in row["reports"]])
        print(
            f"last model step -> report at the fake Telegram, {len(row['reports'])} tasks: "
            f"p50 {r50:.0f} ms, p95 {r95:.0f} ms, max {rmax:.0f} ms"
        )
    writes, commits, steps = row["solo"]
    print(
        f"state database, {args.solo:.0f} s of only the {args.tasks} tasks running: {writes} "
        f"writes in {commits} commits for {steps} task steps: {writes / max(1, steps):.2f} "
        f"writes, {commits / max(1, steps):.2f} commits per step"
    )
    writes, commits, steps = row["ending"]
    print(
        f"state database, the tasks' last steps and reports: {writes} writes in {commits} "
        f"commits for {steps} steps and {args.tasks} reports (final states: "
        f"{', '.join(row['states'])}; each task made at least {row['min_steps']} steps)"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
