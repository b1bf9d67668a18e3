"""Recall on multi-session conversations: is the evidence line inside a top-5 result?

The shape of the held-out benchmark the issue describes: long chats between two friends over
many sessions (bench/data/recall_dialogues.json, written for this project), questions asked
the way a person half-remembers them, each answered by exactly one dialogue line. Each
conversation is its own workspace, one daily note per session (`memory/<date>.md`: a date
heading, then one `Name: text` line per utterance). Reports hit@1 / hit@5 of the evidence line
for BM25 only, vector only, hybrid (the shipped search, as `clawgate memory search` runs it)
and the OpenClaw-style baseline, split into "when" questions and the rest.

    python bench/recall_dialogues.py [--chunk-chars 600 [250 400 ...]] [--embedder local|none]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recall import bench_main, evaluate, report  # type: ignore[import-not-found]  # bench/

from memory.embedders import LocalEmbedder, build_line_model
from memory.index import RecallIndex

DATA = Path(__file__).parent / "data" / "recall_dialogues.json"
TODAY = date(2026, 12, 31)
HEADER_LINES = 2  # "# <date>" and a blank line before the first utterance


def write_conversation(root: Path, conversation: dict) -> list[tuple[str, int]]:
    """One note per session; returns (path, 1-based line) of every utterance by index."""
    (root / "memory").mkdir(parents=True)
    where: list[tuple[str, int]] = []
    for session in conversation["sessions"]:
        path = f"memory/{session['date']}.md"
        lines = [f"{speaker}: {text}" for speaker, text in session["lines"]]
        (root / path).write_text(
            f"# {session['date']}\n\n" + "\n".join(lines) + "\n", encoding="utf-8"
        )
        where.append((path, HEADER_LINES + 1))
    return where


def questions_for(data: dict, number: int, starts: list[tuple[str, int]]) -> list[dict]:
    out = []
    for q in data["questions"]:
        if q["conversation"] != number:
            continue
        path, first = starts[q["session"]]
        kind = "when" if q["question"].lower().startswith("when") else "other"
        out.append(
            {"q": q["question"], "lang": kind, "kind": "q", "path": path, "line": first + q["line"]}
        )
    return out


async def run(chunk_chars: int, embedder_kind: str, line_model_kind: str = "minilm") -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    embedder = LocalEmbedder() if embedder_kind == "local" else None
    line_model = build_line_model(line_model_kind) if embedder else None
    merged: dict[str, dict[str, list]] = {}
    chunks, started = 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for number, conversation in enumerate(data["conversations"]):
            root = Path(tmp) / f"ws{number}"
            starts = write_conversation(root, conversation)
            index = RecallIndex(
                root, embedder, chunk_chars=chunk_chars, today=lambda: TODAY, line_model=line_model
            )
            chunks += (await index.sync()).chunks_added
            hits = await evaluate(index, questions_for(data, number, starts))
            await index.close()
            for mode, groups in hits.items():
                for group, rows in groups.items():
                    merged.setdefault(mode, {}).setdefault(group, []).extend(rows)
    print(
        f"\nchunk_chars={chunk_chars}: {len(data['conversations'])} conversations, {chunks} "
        f"chunks, {len(data['questions'])} questions, {time.perf_counter() - started:.1f} s"
    )
    report(merged)


def main() -> None:
    bench_main(run, __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
