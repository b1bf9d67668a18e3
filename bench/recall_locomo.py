"""Recall on real long conversations (LoCoMo), judged the way the held-out half is judged.

The data is `../shared/data/locomo-dev.json` beside the repository (five of LoCoMo's ten
conversations: Maharana et al., ACL 2024; CC BY-NC 4.0), read at run time and never copied
into the project. Each conversation becomes one workspace: every session is the daily note
`memory/<session date>.md` with a `## Conversation at <date time>` heading and one
`- Speaker: text` line per turn (a shared photo adds ` [shares a photo: caption]`). The
workspace is indexed with the default `[memory]` settings, built by the same function as the
command line's (`gateway.config.memory.build_recall_index`), and every question of categories
1-4 is asked through `RecallIndex.search(question, max_results=5)`: what
`clawgate memory search QUESTION --workspace WS --limit 5 --json` runs (`--cli N` checks that
N questions give the same JSON through the real command).

Figures, per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop) and overall:
- snip@5: an evidence turn's line lies inside one of the top 5 results' line ranges AND the
  first 50 characters of that turn's text are in that result's snippet (what the model reads);
- hit@5: the line lies inside one of the top 5 results' line ranges;
- hit@1: the same for the first result.
A question with several evidence turns counts when any of them does.

These conversations are the development half: figures measured on them after tuning are
tuning figures. `--split` prints the figures of two fixed groups of conversations (3 and 2)
separately, to see whether a change helps both. `--per-conversation` prints each
conversation's overall figures and their mean: for a change without a parameter that mean is
its leave-one-conversation-out figure (choose a parameter on four conversations, score the
fifth, average the five: the way that predicts the held-out half; docs/recall.md, round 4).

Workspaces live in --workdir (default under the system temp) and keep their embedding cache,
so a second run embeds nothing and takes about a minute.

    python bench/recall_locomo.py [--data PATH] [--only conv-26 ...] [--split] [--per-conversation]
                                  [--show-misses CATEGORY ...] [--cli N] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.config.memory import MemorySettings, build_recall_index  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LIMIT = 5
SNIPPET_PREFIX = 50  # characters of the turn's text that must be in the snippet
# Groups for --split: a 3-vs-2 division fixed in advance (sample ids sorted, every other).
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Turn:
    path: str  # memory/<date>.md
    line: int  # 1-based line of its `- Speaker: text` line
    text: str  # the turn's text as written (whitespace runs collapsed)


def session_date(stamp: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> that moment."""
    return datetime.strptime(
        " ".join(stamp.split()).upper().replace(" ON ", " "), "%I:%M %p %d %B, %Y"
    )


def turn_line(turn: dict[str, Any]) -> tuple[str, str]:
    """(the note's line for a turn, the turn's text as written in it)."""
    text = " ".join(str(turn.get("text", "")).split())
    line = f"- {turn['speaker']}: {text}"
    caption = " ".join(str(turn.get("blip_caption") or "").split())
    if caption:
        line += f" [shares a photo: {caption}]"
    return line, text


def write_workspace(root: Path, conversation: dict[str, Any]) -> dict[str, Turn]:
    """The conversation's daily notes under `root`; each turn by dia_id (D3:7)."""
    sessions = sorted(
        (int(key.split("_")[1]), value)
        for key, value in conversation.items()
        if re.fullmatch(r"session_\d+", key) and value
    )
    notes: dict[str, list[str]] = {}
    turns: dict[str, Turn] = {}
    for number, session in sessions:
        stamp = conversation[f"session_{number}_date_time"]
        path = f"memory/{session_date(stamp).date().isoformat()}.md"
        lines = notes.setdefault(path, [])
        if lines:
            lines.append("")
        lines.extend([f"## Conversation at {' '.join(stamp.split())}", ""])
        for turn in session:
            line, text = turn_line(turn)
            lines.append(line)
            turns[turn["dia_id"]] = Turn(path, len(lines), text)
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for path, lines in notes.items():
        body = "\n".join(lines) + "\n"
        target = root / path
        if not target.exists() or target.read_text(encoding="utf-8") != body:
            target.write_text(body, encoding="utf-8")
    for stale in (root / "memory").glob("*.md"):
        if f"memory/{stale.name}" not in notes:
            stale.unlink()
    return turns


def evidence_turns(qa: dict[str, Any], turns: dict[str, Turn]) -> list[Turn]:
    """The question's evidence turns (LoCoMo has a few malformed ids: 'D8:6; D9:17')."""
    found = []
    for item in qa.get("evidence", []):
        for session, turn in _EVIDENCE.findall(str(item)):
            hit = turns.get(f"D{session}:{turn}")
            if hit is not None and hit not in found:
                found.append(hit)
    return found


def judge(results: list[dict[str, Any]], evidence: list[Turn]) -> tuple[bool, bool, bool]:
    """(snip@5, hit@5, hit@1) for one question's results (as `--json` prints them)."""

    def inside(result: dict[str, Any], turn: Turn) -> bool:
        return (
            result["path"] == turn.path and result["start_line"] <= turn.line <= result["end_line"]
        )

    top = results[:LIMIT]
    snip = any(
        inside(r, t) and t.text[:SNIPPET_PREFIX] in r["snippet"] for r in top for t in evidence
    )
    hit5 = any(inside(r, t) for r in top for t in evidence)
    hit1 = bool(top) and any(inside(top[0], t) for t in evidence)
    return snip, hit5, hit1


def table(rows: dict[int, list[tuple[bool, bool, bool]]], title: str) -> str:
    out = [title, f"{'category':<16}{'n':>5}{'snip@5':>9}{'hit@5':>8}{'hit@1':>8}"]
    everything = [r for c in CATEGORIES for r in rows.get(c, [])]
    for name, items in [
        *((f"{c} {CATEGORIES[c]}", rows.get(c, [])) for c in CATEGORIES),
        ("all", everything),
    ]:
        n = len(items) or 1
        out.append(
            f"{name:<16}{len(items):>5}"
            + "".join(
                f"{sum(r[i] for r in items) / n:>{w}.3f}" for i, w in ((0, 9), (1, 8), (2, 8))
            )
        )
    return "\n".join(out)


def cli_results(workspace: Path, question: str) -> list[dict[str, Any]]:
    """The real command's answer (its own process, default settings, no config file)."""
    command = shutil.which("clawgate", path=str(Path(sys.executable).parent))
    done = subprocess.run(
        [
            *([command] if command else [sys.executable, "-m", "gateway"]),
            "memory",
            "search",
            question,
            "--workspace",
            str(workspace),
            "--limit",
            str(LIMIT),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "CLAWGATE_CONFIG": str(workspace / "no-config.toml"),
            "HOME": str(workspace),
        },
    )
    return json.loads(done.stdout)


async def run(args: argparse.Namespace) -> None:
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    samples = [s for s in data if not args.only or s["sample_id"] in args.only]
    settings = MemorySettings(**dict(item.split("=", 1) for item in args.set))
    rows: dict[int, list[tuple[bool, bool, bool]]] = defaultdict(list)
    by_sample: dict[str, dict[int, list[tuple[bool, bool, bool]]]] = {}
    search_ms: list[float] = []
    shown: list[int] = []  # characters of each result's snippet
    skipped = chunks = embedded = 0
    index_seconds = 0.0
    cli_checked = cli_same = 0
    for sample in samples:
        root = Path(args.workdir) / sample["sample_id"]
        turns = write_workspace(root, sample["conversation"])
        index = build_recall_index(settings, root, lambda m: print(m, file=sys.stderr))
        started = time.perf_counter()
        stats = await index.sync()
        index_seconds += time.perf_counter() - started
        embedded += stats.embedded
        chunks += (await index.status()).chunks
        mine: dict[int, list[tuple[bool, bool, bool]]] = defaultdict(list)
        asked: list[tuple[str, list[dict[str, Any]]]] = []
        for qa in sample["qa"]:
            category = qa.get("category")
            if category not in CATEGORIES:
                continue
            evidence = evidence_turns(qa, turns)
            if not evidence:
                skipped += 1
                continue
            question = str(qa["question"])
            started = time.perf_counter()
            response = await index.search(question, max_results=LIMIT)
            search_ms.append(1000 * (time.perf_counter() - started))
            results = [r.as_dict() for r in response.results]
            shown.extend(len(r["snippet"]) for r in results)
            asked.append((question, results))
            outcome = judge(results, evidence)
            rows[category].append(outcome)
            mine[category].append(outcome)
            if category in args.show_misses and not outcome[0]:
                print(
                    f"MISS {sample['sample_id']} [{CATEGORIES[category]}] {question}"
                    f"  (answer: {qa.get('answer')})"
                )
                for turn in evidence:
                    print(f"    want {turn.path}:{turn.line} {turn.text[:100]}")
                for r in results:
                    print(
                        f"    got  {r['path']}:{r['start_line']}-{r['end_line']} "
                        f"line {r.get('line')} {r['score']:.3f}"
                    )
        await index.close()
        by_sample[sample["sample_id"]] = mine
        for question, results in asked[: max(0, args.cli - cli_checked)]:
            cli_checked += 1
            cli_same += cli_results(root, question) == json.loads(json.dumps(results))
    n = sum(len(v) for v in rows.values())
    search_ms.sort()
    print(
        f"{len(samples)} conversations, {chunks} chunks ({embedded} embedded now, index "
        f"{index_seconds:.0f} s), {n} questions ({skipped} without a usable evidence id "
        f"left out); search p50 {search_ms[len(search_ms) // 2]:.0f} ms, "
        f"p95 {search_ms[int(0.95 * len(search_ms))]:.0f} ms; a result's snippet "
        f"{sum(shown) / max(1, len(shown)):.0f} characters on average"
    )
    print(table(rows, "all conversations (development data: tuning figures)"))
    if args.split:
        ids = sorted(by_sample)
        for name, group in (("group A", ids[0::2]), ("group B", ids[1::2])):
            merged: dict[int, list[tuple[bool, bool, bool]]] = defaultdict(list)
            for sid in group:
                for c, items in by_sample[sid].items():
                    merged[c].extend(items)
            print(table(merged, f"{name}: {', '.join(group)}"))
    if args.per_conversation:
        print(per_conversation(by_sample))
    if args.cli:
        print(f"real CLI: {cli_same} of {cli_checked} questions gave the same JSON")


def per_conversation(by_sample: dict[str, dict[int, list[tuple[bool, bool, bool]]]]) -> str:
    """Each conversation's overall snip@5 / hit@5 / hit@1 and the mean of those figures
    (each conversation weighs the same, as a held-out conversation does)."""
    out = [f"{'conversation':<16}{'n':>5}{'snip@5':>9}{'hit@5':>8}{'hit@1':>8}"]
    means = [0.0, 0.0, 0.0]
    for sid in sorted(by_sample):
        items = [r for rows in by_sample[sid].values() for r in rows]
        figures = [sum(r[i] for r in items) / max(1, len(items)) for i in range(3)]
        means = [m + f / len(by_sample) for m, f in zip(means, figures, strict=True)]
        out.append(
            f"{sid:<16}{len(items):>5}{figures[0]:>9.3f}{figures[1]:>8.3f}{figures[2]:>8.3f}"
        )
    out.append(f"{'mean of these':<21}{means[0]:>9.3f}{means[1]:>8.3f}{means[2]:>8.3f}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "clawgate-recall-locomo"
    )
    parser.add_argument("--only", nargs="*", default=[], help="sample ids (conv-26 ...)")
    parser.add_argument(
        "--split",
        action="store_true",
        help="also print two fixed groups of conversations (3 and 2)",
    )
    parser.add_argument(
        "--per-conversation",
        action="store_true",
        help="also print each conversation's figures and their mean (leave-one-out for a "
        "change without a parameter)",
    )
    parser.add_argument(
        "--show-misses",
        nargs="*",
        type=int,
        default=[],
        help="print the snip@5 misses of these categories",
    )
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="a [memory] setting other than its default (line_model=none)",
    )
    parser.add_argument(
        "--cli", type=int, default=0, help="check the first N questions through the real command"
    )
    args = parser.parse_args()
    if not Path(args.data).exists():
        sys.exit(f"no data at {args.data} (see ../shared/data/README.md)")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
