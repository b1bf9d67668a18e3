"""kill -9 through the real process: lost and duplicated answers over many kills.

`clawgate run` against the loopback Telegram Bot API and a fake Anthropic API that takes
about 300 ms per answer; several people write while the gateway is killed with SIGKILL and
started again, a third of the kills aimed between a turn's transcript append and its outbox
write (tests/reliability/kill_harness.py explains how, and what is counted). The same harness
runs in the test suite with 20 kills (tests/reliability/test_crash_safety.py).

    python bench/crash_kill.py [--kills 30] [--messages 240] [--people 3] [--seed 1]
                               [--model-ms 300]

The defaults are the run of issue 32 (3 people, a 300 ms model, 30 kills over 240 messages).
Prints one line per 10 kills and the figures: lost and duplicated answers, and the send
window (from the fake platform accepting a reply to its outbox row being committed as sent,
seen from another connection: the time in which a kill makes the restart send it again),
p50 and p99 in ms. Takes about 3-10 minutes for 30 kills on 2 cores (a start of `clawgate
run` costs 1-4 s of imports, more when the machine is busy); print the load average beside
the figures, the window grows with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.llm_server import FakeAnthropicServer
from tests.reliability.kill_harness import KillPlan, run_kill_test


async def main(plan: KillPlan, keep: Path | None) -> int:
    loads = [os.getloadavg()[0]]

    def progress(line: str) -> None:
        loads.append(os.getloadavg()[0])
        print(f"{line} (load average {loads[-1]:.1f})", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        async with FakeAnthropicServer() as llm:
            report = await run_kill_test(root, plan, llm, progress=progress)
    loads.append(os.getloadavg()[0])
    print(report.summary())
    print(
        f"send window (platform accepted -> outbox row committed as sent): "
        f"p50 {report.window_ms(0.5):.1f} ms, p90 {report.window_ms(0.9):.1f} ms, "
        f"p99 {report.window_ms(0.99):.1f} ms, max {report.window_ms(1):.1f} ms over "
        f"{len(report.windows)} replies; {report.windows_cut} cut by a kill, "
        f"{report.windows_unseen} whose row was never seen pending"
    )
    kinds = "; ".join(sorted(set(report.watch_errors))[:3])
    print(
        f"the watch's longest gap between two reads: {1000 * report.watch_longest_gap:.1f} "
        f"ms; failed reads: {len(report.watch_errors)}" + (f" ({kinds})" if kinds else "")
    )
    print(
        f"load average (1 min) during the run: {min(loads):.1f}-{max(loads):.1f}, "
        f"mean {sum(loads) / len(loads):.1f}"
    )
    print(f"lost: {report.lost_count}")
    print(
        f"duplicates: {report.duplicates} of {plan.messages} messages "
        f"({100 * report.duplicates / plan.messages:.2f}%): "
        f"{report.window_duplicates} in the crash window (accepted by the platform, "
        f"not yet recorded in the outbox at the kill), {len(report.unexplained)} unexplained"
    )
    caught = [kill for kill in report.kills if kill.unrecorded]
    print(
        f"kills that caught a reply accepted but not yet recorded: {len(caught)} "
        f"({sum(k.aimed for k in caught)} aimed); replies caught: "
        f"{sum(len(k.unrecorded) for k in caught)}"
    )
    for line in report.unexplained:
        print(f"  unexplained: {line}")
    for chat, numbers in report.lost.items():
        print(f"  lost in chat {chat}: {numbers}")
    ok = (
        report.lost_count == 0
        and not report.unexplained
        and report.bad_requests == 0
        and not report.double_answers
        and not report.lines_lost
    )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--messages", type=int, default=0, help="default: 8 per kill")
    parser.add_argument("--people", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model-ms", type=float, default=300.0)
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="run in this directory and keep it (logs, workspaces)",
    )
    args = parser.parse_args()
    # The window is timed by a thread of this process (MarkWatch): a shorter switch interval
    # keeps it from waiting up to 5 ms for the fake servers' thread to let go of the GIL.
    sys.setswitchinterval(0.0005)
    plan = KillPlan(
        kills=args.kills,
        messages=args.messages or 8 * args.kills,
        people=tuple(4101 + i for i in range(args.people)),
        seed=args.seed,
        model_seconds=args.model_ms / 1000,
    )
    sys.exit(asyncio.run(main(plan, args.keep)))
