"""Recall on long multi-session conversations, scored per kind of question (the
long-conversation proxy).

The data comes from bench/recall_conversations.py (seeded, deterministic): ten conversations
of 20-30 sessions and about 600 turns, one daily note per session with one `- Speaker: text`
line per turn, and 150 questions (multi-session, when, open-ended, single-line). Each
conversation is its own workspace, indexed with the default settings and the local model, and
each question goes through `RecallIndex.search(query, max_results=5)`: what
`clawgate memory search QUERY --workspace PATH --limit 5 --json` runs.

A question counts at k when one of its evidence lines lies inside one of the top k results
(path and line range) AND its text is in that result's snippet. For multi-session questions
any one evidence line counts (the held-out rule, "a line that holds the answer"); the column
"all@5" says how often every evidence line is in the top 5.

The workspaces are kept in --workdir (default: a directory under the system temp), so a
second run reuses the embedding cache and measures search changes in seconds; changes to what
is embedded (chunk size, chunk text) embed again.

    python bench/recall_long.py [--chunk-chars 600] [--embedder local|none] [--context]
                                [--line-model minilm|none] [--show-misses]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_conversations import KIND_COUNTS, build  # type: ignore[import-not-found]  # bench/

from memory.defaults import DEFAULT_CHUNK_CHARS
from memory.embedders import LocalEmbedder, build_line_model
from memory.index import RecallIndex

KINDS = list(KIND_COUNTS)


def write_conversation(root: Path, conversation: dict) -> list[str]:
    """One note per session (only `- Speaker: text` lines); returns each session's path."""
    (root / "memory").mkdir(parents=True, exist_ok=True)
    paths = []
    for session in conversation["sessions"]:
        path = f"memory/{session['date']}.md"
        body = "".join(f"- {speaker}: {text}\n" for speaker, text in session["lines"])
        target = root / path
        if not target.exists() or target.read_text(encoding="utf-8") != body:
            target.write_text(body, encoding="utf-8")
        paths.append(path)
    for stale in (root / "memory").glob("*.md"):  # a note of an earlier version of the data
        if f"memory/{stale.name}" not in paths:
            stale.unlink()
    return paths


def score(results: list, evidence: list[tuple[str, int, str]], k: int) -> tuple[bool, bool]:
    """(any evidence line in the top k, every evidence line in the top k)."""
    found = [
        any(
            r.path == path and r.start_line <= line <= r.end_line and text in r.snippet
            for r in results[:k]
        )
        for path, line, text in evidence
    ]
    return any(found), all(found)


async def run(
    chunk_chars: int,
    embedder_kind: str,
    workdir: Path,
    show_misses: bool,
    context: bool = False,
    line_model_kind: str = "minilm",
) -> None:
    data = build()
    embedder = LocalEmbedder() if embedder_kind == "local" else None
    line_model = build_line_model(line_model_kind) if embedder is not None else None
    rows: dict[str, list[tuple[bool, bool, bool]]] = defaultdict(list)
    index_seconds = search_seconds = 0.0
    chunks = embedded = 0
    for number, conversation in enumerate(data["conversations"]):
        root = workdir / f"conversation-{number:02d}"
        paths = write_conversation(root, conversation)
        last = date.fromisoformat(conversation["sessions"][-1]["date"])
        index = RecallIndex(
            root,
            embedder,
            chunk_chars=chunk_chars,
            context=context,
            today=lambda last=last: last + timedelta(days=14),
            line_model=line_model,
        )
        started = time.perf_counter()
        stats = await index.sync()
        index_seconds += time.perf_counter() - started
        embedded += stats.embedded
        chunks += (await index.status()).chunks
        for q in data["questions"]:
            if q["conversation"] != number:
                continue
            evidence = []
            for e in q["evidence"]:
                speaker, text = conversation["sessions"][e["session"]]["lines"][e["line"] - 1]
                evidence.append((paths[e["session"]], e["line"], f"- {speaker}: {text}"))
            started = time.perf_counter()
            response = await index.search(q["question"], max_results=5)
            search_seconds += time.perf_counter() - started
            top1, _ = score(response.results, evidence, 1)
            top5, all5 = score(response.results, evidence, 5)
            rows[q["kind"]].append((top1, top5, all5))
            if show_misses and not top5:
                print(
                    f"MISS [{q['kind']}] {q['question']}\n    want: "
                    + " | ".join(t for _, _, t in evidence)
                    + "\n    got:  "
                    + " | ".join(f"{r.path}:{r.start_line}-{r.end_line}" for r in response.results)
                )
        await index.close()
    n_questions = sum(len(v) for v in rows.values())
    print(
        f"\nchunk_chars={chunk_chars}, embedder={embedder_kind}, "
        f"line model={line_model_kind if line_model else 'none'}, context={context}: "
        f"{len(data['conversations'])} conversations, {chunks} chunks ({embedded} embedded "
        f"now, index {index_seconds:.1f} s), {n_questions} questions, "
        f"search {1000 * search_seconds / max(1, n_questions):.0f} ms a question"
    )
    print(f"{'kind':<8}{'n':>5}{'top-1':>8}{'top-5':>8}{'all@5':>8}")
    everything = [r for kind in KINDS for r in rows[kind]]
    for kind, items in [*((k, rows[k]) for k in KINDS), ("all", everything)]:
        n = len(items) or 1
        print(
            f"{kind:<8}{len(items):>5}{sum(r[0] for r in items) / n:>8.0%}"
            f"{sum(r[1] for r in items) / n:>8.0%}{sum(r[2] for r in items) / n:>8.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-chars", type=int, nargs="+", default=[DEFAULT_CHUNK_CHARS])
    parser.add_argument("--embedder", choices=["local", "none"], default="local")
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "clawgate-recall-long"
    )
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument(
        "--context",
        action="store_true",
        help="embed chunks with their date and speakers (memory.context)",
    )
    parser.add_argument(
        "--line-model",
        choices=["minilm", "none"],
        default="minilm",
        help="the second model for line vectors (memory.minilm)",
    )
    args = parser.parse_args()
    for size in args.chunk_chars:
        asyncio.run(
            run(size, args.embedder, args.workdir, args.show_misses, args.context, args.line_model)
        )


if __name__ == "__main__":
    main()
