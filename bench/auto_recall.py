"""Auto-recall: what the block costs in prompt tokens and what it buys.

Two measurements (gateway/pipeline/auto_recall.py builds the block):

`scripted`: the real gateway (Gateway -> turn runner -> OpenAI SDK) against the loopback fake
model (tests/fakes/llm_server.py), with the local embedder. A workspace holds old daily notes
(months before "today") with one fact each among everyday filler; each question is asked in
the owner's DM. The scripted model answers when the fact's answer is in its request (the
block) and calls `memory_search` otherwise, then answers from the result. Counted: questions
answered without a `memory_search` call (auto-recall on and off), and the prompt tokens the
block added to each request (chars / 4 of the block as sent). Plus small talk that should get
no block. The questions were written together with the mechanism, so these are tuning
figures.

`locomo`: the LoCoMo development conversations (`../shared/data/locomo-dev.json`, read at run
time, never copied; laid out as bench/recall_locomo.py lays them out, indexed with the default
settings). Each question of categories 1-4 is searched as the block's search does; a question
counts as answerable from the block when an evidence turn's first 50 characters are in the
block's text. The same questions asked in another conversation's workspace measure what the
block costs when memory holds nothing relevant (every such block is noise). Thresholds are
swept with the rest of the gate (gateway/pipeline/recall_gate.py) as it is; groups A and B
(conversations sorted, every other one) are reported apart, so a threshold chosen on A is
checked on B. It also prints how many messages of the small-talk set
(tests/fixtures/small_talk.txt) would be searched (none may be) and what the gate and the
block's rendering cost per turn. Every LoCoMo figure is a tuning figure (the dev half).

    python bench/auto_recall.py scripted
    python bench/auto_recall.py locomo [--hits 3] [--tokens 400] [--thresholds 0.80 0.81 ...]
                                   [--workdir DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))  # after the packages: bench/scheduler.py is not `scheduler`

from gateway.config.memory import MemorySettings, build_memory_service  # noqa: E402
from gateway.pipeline.auto_recall import (  # noqa: E402
    HEADING,
    AutoRecall,
    RecallOptions,
    render,
)
from gateway.pipeline.recall_gate import Message  # noqa: E402

SMALL_TALK_FILE = ROOT / "tests" / "fixtures" / "small_talk.txt"

# --- LoCoMo ----------------------------------------------------------------------------------


async def locomo(args: argparse.Namespace) -> None:
    from recall_locomo import CATEGORIES, DATA, evidence_turns, write_workspace

    data = json.loads(Path(args.data or DATA).read_text(encoding="utf-8"))
    defaults = MemorySettings()
    hits = args.hits or defaults.auto_recall_max_hits
    tokens = args.tokens or defaults.auto_recall_max_tokens
    settings = MemorySettings(watch=False)
    service = build_memory_service(settings)
    assert service is not None
    recall = AutoRecall(service, RecallOptions(0.0, hits, tokens))
    ids = sorted(s["sample_id"] for s in data)
    group = {sid: "A" if ids.index(sid) % 2 == 0 else "B" for sid in ids}
    roots: dict[str, Path] = {}
    questions: list[tuple[str, str, list[Any]]] = []  # (sample, question, evidence)
    for sample in data:
        root = Path(args.workdir) / sample["sample_id"]
        turns = write_workspace(root, sample["conversation"])
        roots[sample["sample_id"]] = root
        await service.sync(root)
        for qa in sample["qa"]:
            evidence = evidence_turns(qa, turns)
            if qa.get("category") in CATEGORIES and evidence:
                questions.append((sample["sample_id"], str(qa["question"]), evidence))
    if args.limit:
        questions = questions[:: max(1, len(questions) // args.limit)]
    # (group, message, evidence, results); a message the gate finds nothing in is not searched
    own: list[tuple[str, Message, list[Any], list[Any]]] = []
    cross: list[tuple[str, Message, list[Any]]] = []
    started = time.perf_counter()
    for sid, question, evidence in questions:
        other = ids[(ids.index(sid) + 1) % len(ids)]
        message = Message(question)
        searched = message.worth_searching
        own.append(
            (
                group[sid],
                message,
                evidence,
                await recall.candidates(roots[sid], question) if searched else [],
            )
        )
        cross.append(
            (
                group[sid],
                message,
                await recall.candidates(roots[other], question) if searched else [],
            )
        )
    seconds = time.perf_counter() - started
    await service.close()
    _gate_cost(own, RecallOptions(args.thresholds[0], hits, tokens))
    small_talk()
    print(
        f"{len(questions)} questions over {len(ids)} conversations (A: "
        f"{', '.join(i for i in ids if group[i] == 'A')}; B: the rest), max {hits} hits, "
        f"{tokens} tokens; {1000 * seconds / (2 * len(questions)):.0f} ms per search"
    )
    print(
        "answerable: an evidence turn is in the block; tokens: median over all turns "
        "(0 when no block) / over turns with a block; cross: the question in another "
        "conversation's workspace (all noise)"
    )
    head = (
        f"{'min_sim':>9} {'grp':>3} {'answerable':>10} {'block':>6} {'tok all':>8} "
        f"{'tok blk':>8} {'cross blk':>9} {'cross tok':>9}"
    )
    print(head)
    for threshold in args.thresholds:
        opts = RecallOptions(threshold, hits, tokens)
        for name in ("A", "B", "all"):
            rows = [(m, e, r) for g, m, e, r in own if name in ("all", g)]
            noise = [(m, r) for g, m, r in cross if name in ("all", g)]
            blocks = [render(r, opts, {}, m) for m, _, r in rows]
            answered = sum(_answers(b.text, e) for b, (_, e, _) in zip(blocks, rows, strict=True))
            sizes = [b.tokens for b in blocks]
            with_block = [t for t in sizes if t]
            noisy = [render(r, opts, {}, m).tokens for m, r in noise]
            print(
                f"{threshold:>9.2f} {name:>3} {answered / len(rows):>10.3f} "
                f"{len(with_block) / len(rows):>6.2f} {statistics.median(sizes):>8.0f} "
                f"{statistics.median(with_block) if with_block else 0:>8.0f} "
                f"{sum(1 for t in noisy if t) / len(noisy):>9.3f} "
                f"{statistics.median(noisy):>9.0f}"
            )


def _gate_cost(own: list[tuple[str, Message, list[Any], list[Any]]], opts: RecallOptions) -> None:
    """What the gate adds to a turn: reading the message and checking its hits (the render
    with the gate less the same render without its checks is within noise; this times the
    whole of it, search excluded)."""
    costs: list[float] = []
    for _, message, _, results in own:
        started = time.perf_counter()
        fresh = Message(message.text)
        if fresh.worth_searching:
            render(results, opts, {}, fresh)
        costs.append(time.perf_counter() - started)
    costs.sort()
    print(
        f"the gate and the block's rendering per turn (search excluded): p50 "
        f"{1e6 * costs[len(costs) // 2]:.0f} us, p95 {1e6 * costs[int(len(costs) * 0.95)]:.0f}"
        f" us"
    )


def small_talk() -> None:
    """The small-talk set (tests/fixtures/small_talk.txt): how many would be searched."""
    lines = [
        line
        for line in SMALL_TALK_FILE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    searched = [line for line in lines if Message(line).worth_searching]
    print(
        f"small talk: {len(searched)}/{len(lines)} messages searched (a block is possible "
        f"only for those){': ' if searched else ''}{'; '.join(searched)}"
    )


def _answers(block: str, evidence: list[Any]) -> bool:
    flat = " ".join(block.split())
    return any(" ".join(turn.text[:50].split()) in flat for turn in evidence)


# --- scripted, through the gateway ------------------------------------------------------------

TODAY = date(2025, 6, 20)
# (days before today, the note's line, a question in other words, the answer's key words)
FACTS: list[tuple[int, str, str, str]] = [
    (
        140,
        "Alice's locker code at the climbing gym is 4471.",
        "what was my locker code at the climbing gym?",
        "4471",
    ),
    (
        120,
        "The plumber who fixed the boiler was Marek Nowak, phone 0176 5550192.",
        "who was the plumber that repaired our boiler?",
        "Marek Nowak",
    ),
    (95, "Alice's passport expires on 2027-03-14.", "when does my passport run out?", "2027-03-14"),
    (
        200,
        "Alice's sister Jana is allergic to hazelnuts.",
        "is my sister allergic to anything?",
        "hazelnuts",
    ),
    (
        60,
        "Wifi password at the cabin in Lofoten: fjord-otter-88.",
        "what's the wifi password at the cabin?",
        "fjord-otter-88",
    ),
    (
        175,
        "Alice's bike is a green Brompton, frame number BR-20931.",
        "what's the frame number of my bike?",
        "BR-20931",
    ),
    (
        80,
        "Dr. Lindqvist is Alice's dentist; the practice is on Storgatan 12.",
        "where is my dentist's practice?",
        "Storgatan 12",
    ),
    (
        150,
        "The landlord agreed to lower the rent to 1,240 EUR from September.",
        "what did the landlord agree the rent would be?",
        "1,240",
    ),
    (
        45,
        "Alice's book club reads 'The Overstory' next; meeting at Tomas's place.",
        "which book is the book club reading next?",
        "Overstory",
    ),
    (
        230,
        "Alice's car insurance policy number is KX-88-1204 with Fennia.",
        "what's my car insurance policy number?",
        "KX-88-1204",
    ),
    (
        110,
        "Alice prefers window seats and never wants a red-eye flight.",
        "what kind of flights and seats do I like?",
        "window seat",
    ),
    (70, "The spare key is with the neighbour Ruth in flat 3B.", "who has our spare key?", "Ruth"),
    (
        190,
        "Alice's running shoe size is EU 39.5 (Hoka Clifton).",
        "what size are my running shoes?",
        "39.5",
    ),
    (
        130,
        "Tax adviser: Henrik Salo, charges 95 EUR an hour.",
        "how much does the tax adviser charge?",
        "95 EUR",
    ),
    (
        55,
        "Mum's birthday dinner is booked at Savoy for 12 people.",
        "where is mum's birthday dinner booked?",
        "Savoy",
    ),
    (
        160,
        "The router admin login is admin / velvet-comet-3.",
        "what's the router's admin password?",
        "velvet-comet-3",
    ),
]
SMALL_TALK = [
    "thanks!",
    "good morning",
    "ok sounds good",
    "haha nice",
    "remind me to call the bank at 5",
    "what's 15% of 80?",
]
FILLER = [
    "Went for a walk by the river after lunch.",
    "Groceries: oats, apples, coffee, rice.",
    "Watched a documentary about octopuses in the evening.",
    "Cleaned the kitchen windows.",
    "Long call with work about the quarterly report.",
    "It rained all day; stayed in and read.",
    "Tried a new pasta recipe with lemon and capers.",
    "Fixed the squeaky hinge on the door.",
    "Paid the electricity bill.",
    "Planned the week: gym Tuesday and Thursday.",
]


def _plant(workspace: Path) -> None:
    """Filler notes every third day, and each fact in the note of its own day."""
    notes = workspace / "memory"
    notes.mkdir(parents=True, exist_ok=True)
    days: dict[date, list[str]] = {}
    for offset in range(1, 240, 3):
        days[TODAY - timedelta(days=offset)] = [
            f"- {FILLER[(offset + i) % len(FILLER)]}" for i in range(3)
        ]
    for offset, fact, _, _ in FACTS:
        days.setdefault(TODAY - timedelta(days=offset), []).insert(1, f"- {fact}")
    for day, lines in days.items():
        (notes / f"{day.isoformat()}.md").write_text(
            "\n".join([f"# {day.isoformat()}", "", *lines]) + "\n", encoding="utf-8"
        )


async def scripted(args: argparse.Namespace) -> None:
    from gateway.agent.providers import build_provider
    from gateway.clock import FixedClock
    from gateway.config.settings import load_settings
    from gateway.pipeline.gateway import Gateway
    from tests.conftest import AllowAll
    from tests.fakes.channel import RecordingChannel
    from tests.fakes.llm_server import FakeOpenAIServer

    owner = "fakechat-owner"
    figures: dict[bool, dict[str, Any]] = {}
    for enabled in (False, True):
        root = Path(tempfile.mkdtemp(prefix="clawgate-auto-recall-"))
        async with FakeOpenAIServer() as server:
            settings = load_settings(
                root / "none.toml",
                workspaces_dir=root / "workspaces",
                owner=owner,
                timezone="UTC",
                versioning={"enabled": False},
                llm={
                    "provider": "openai",
                    "base_url": server.base_url,
                    "api_key": "sk-bench-0000000",
                    "max_attempts": 1,
                },
                memory={"auto_recall": enabled, "watch": False},
            )
            from gateway.workspace.seed import ensure_workspace

            workspace = ensure_workspace(settings.workspaces_dir, owner)
            _plant(workspace)
            service = build_memory_service(settings.memory, today=lambda: TODAY)
            assert service is not None
            await service.sync(workspace)
            channel = RecordingChannel()
            clock = FixedClock(datetime(TODAY.year, TODAY.month, TODAY.day, 9, tzinfo=UTC))
            gateway = Gateway.build(
                settings,
                build_provider(settings),
                channels=[channel],
                clock=clock,
                access=AllowAll(),
                memory=service,
            )
            await gateway.start()
            state = Script(server)
            server.responder = state.respond
            try:
                for _, _, question, answer in FACTS:
                    state.begin(question, answer)
                    await channel.inject("owner", question)
                    await channel.wait_for(len(channel.sent) + 1, timeout=60)
                    state.end()
                for text in SMALL_TALK:
                    state.begin(text, "")
                    await channel.inject("owner", text)
                    await channel.wait_for(len(channel.sent) + 1, timeout=60)
                    state.end()
            finally:
                await gateway.stop()
            figures[enabled] = state.summary()
    off, on = figures[False], figures[True]
    n = len(FACTS)
    print(
        f"{n} questions about facts in daily notes 45-230 days old (each among filler, "
        f"{len(range(1, 240, 3)) + n} notes), {len(SMALL_TALK)} small-talk messages; "
        "the real gateway, the local embedder, the scripted fake model"
    )
    print(
        f"auto-recall off: answered without memory_search {off['direct']}/{n}; "
        f"memory_search calls {off['searches']}; right answers {off['right']}/{n}"
    )
    print(
        f"auto-recall on:  answered without memory_search {on['direct']}/{n}; "
        f"memory_search calls {on['searches']}; right answers {on['right']}/{n}"
    )
    print(
        f"tokens added per model request (block chars / 4), questions: median "
        f"{on['median_q']:.0f}, max {on['max_q']}; small talk: median {on['median_s']:.0f}, "
        f"blocks given {on['small_blocks']}/{len(SMALL_TALK)}"
    )


class Script:
    """The scripted model: answer from the request when the answer is in it, else search."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.question = self.answer = ""
        self.searched = False
        self.direct = self.searches = self.right = self.small_blocks = 0
        self.added_q: list[int] = []
        self.added_s: list[int] = []

    def begin(self, question: str, answer: str) -> None:
        self.question, self.answer, self.searched = question, answer, False

    def end(self) -> None:
        pass

    def respond(self, body: dict[str, Any]) -> Any:
        messages = body["messages"]
        last = messages[-1]
        content = last.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        block = text[text.index(HEADING) :] if HEADING in text else ""
        tokens = -(-len(block) // 4) if block else 0
        (self.added_q if self.answer else self.added_s).append(tokens)
        if not self.answer:
            self.small_blocks += bool(block)
            return self.server.make_text("Sure.")
        if self.answer in block and last.get("role") == "user":
            self.direct += 1
            self.right += 1
            return self.server.make_text(f"From my notes: {self.answer}.")
        if last.get("role") == "tool":
            self.right += self.answer in text
            return self.server.make_text(
                f"Found it: {self.answer}." if self.answer in text else "I couldn't find that."
            )
        self.searches += 1
        return self.server.make_tool_calls([("memory_search", {"query": self.question}, None)])

    def summary(self) -> dict[str, Any]:
        return {
            "direct": self.direct,
            "searches": self.searches,
            "right": self.right,
            "median_q": statistics.median(self.added_q),
            "max_q": max(self.added_q),
            "median_s": statistics.median(self.added_s),
            "small_blocks": self.small_blocks,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("scripted")
    loc = sub.add_parser("locomo")
    loc.add_argument("--data", type=Path, default=None)
    loc.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "clawgate-recall-locomo"
    )
    loc.add_argument("--hits", type=int, default=0)
    loc.add_argument("--tokens", type=int, default=0)
    loc.add_argument("--limit", type=int, default=0, help="ask about this many questions")
    loc.add_argument("--thresholds", type=float, nargs="*", default=[0.80, 0.81, 0.82, 0.83])
    args = parser.parse_args()
    asyncio.run(locomo(args) if args.mode == "locomo" else scripted(args))


if __name__ == "__main__":
    main()
