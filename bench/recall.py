"""Recall benchmark: does the right line come back for a question? Prints hit@1 and hit@5.

A synthetic year of a person's memory built from bench/data/recall_facts.json: dated daily
notes (English and Chinese) with each fact on one line among everyday filler, and a third of
the facts told in DM conversations (sessions/*.jsonl) instead. Questions are paraphrases that
share few words with the fact, plus exact identifiers (CVE numbers, host:port, ticket ids).
A hit: a result whose path is the fact's file and whose line range contains the fact's line.

Modes: BM25 only (word + trigram legs, RRF), vector only, hybrid (the shipped search), and the
OpenClaw-style baseline (AND query, 0.7 x cosine + 0.3 x r/(1+r), 4x candidates, min 0.35).

    python bench/recall.py [--chunk-chars 600 [250 400 ...]] [--embedder local|none]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory import search as S
from memory.defaults import DEFAULT_CHUNK_CHARS
from memory.embedders import LocalEmbedder, build_line_model
from memory.index import RecallIndex
from memory.layout import dm_session_key
from memory.text import word_query

DATA = Path(__file__).parent / "data" / "recall_facts.json"
TODAY = date(2026, 12, 31)


def build_workspace(root: Path) -> list[dict]:
    """Write the workspace; return the questions with where their answer sits."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    rng = random.Random(7)
    (root / "memory").mkdir(parents=True)
    (root / "sessions").mkdir()
    (root / "MEMORY.md").write_text("# Memory\n- Prefers short answers.\n- Lives in Lisbon.\n")
    questions = []
    day = date(2026, 1, 5)
    for number, (lang, kind, fact, question) in enumerate(data["facts"]):
        day += timedelta(days=6)
        filler = rng.sample(data["filler"], 6)
        if number % 3 == 2:  # told in a conversation
            path = f"sessions/owner_dm-{number:08x}.jsonl"
            entries = [{"type": "session", "key": dm_session_key("owner")}]
            for line in filler[:3]:
                entries += [{"type": "user", "text": line}, {"type": "assistant", "text": "Ok."}]
            entries.append({"type": "user", "text": fact})
            answer_line = len(entries)
            entries.append({"type": "assistant", "text": "Got it, I'll remember that."})
            entries += [{"type": "user", "text": filler[4]}, {"type": "assistant", "text": "Sure."}]
            (root / path).write_text(
                "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8"
            )
        else:
            path = f"memory/{day.isoformat()}.md"
            lines = [f"- {x}" for x in filler]
            position = rng.randrange(len(lines) + 1)
            lines.insert(position, f"- {fact}")
            (root / path).write_text(
                f"# {day.isoformat()}\n\n" + "\n".join(lines) + "\n", encoding="utf-8"
            )
            answer_line = 3 + position
        questions.append(
            {"q": question, "lang": lang, "kind": kind, "path": path, "line": answer_line}
        )
    return questions


def openclaw_fusion(legs: dict[str, list[tuple[int, float]]]) -> dict[int, float]:
    """The baseline: 0.7 x cosine + 0.3 x r/(1+r) of BM25 (word leg only)."""
    scores: dict[int, float] = {}
    for chunk_id, cosine in legs.get("vector", []):
        scores[chunk_id] = 0.7 * max(cosine, 0.0)
    for chunk_id, relevance in legs.get("words", []):
        r = max(relevance, 0.0)
        scores[chunk_id] = scores.get(chunk_id, 0.0) + 0.3 * (r / (1.0 + r))
    return scores


async def baseline_legs(db, query: str, qvec, pool: int) -> dict[str, list[tuple[int, float]]]:
    """The baseline's legs: every content word ANDed (BM25) and the vector KNN."""
    legs = {
        "words": await S.fts_leg(db, "chunks_fts", word_query(query).replace(" OR ", " AND "), pool)
    }
    if qvec is not None:
        legs["vector"] = await S.vector_leg(db, qvec, pool)
    return legs


def _hit(results: list[tuple[str, int, int]], q: dict, k: int) -> bool:
    return any(p == q["path"] and s <= q["line"] <= e for p, s, e in results[:k])


async def _rows(db, ids):
    rows = await S.fetch_chunks(db, ids)
    return [(rows[i][1], rows[i][3], rows[i][4]) for i in ids if i in rows]


async def evaluate(index: RecallIndex, questions: list[dict]) -> dict[str, dict[str, list]]:
    modes = ("bm25", "vector", "hybrid", "baseline")
    hits: dict[str, dict[str, list]] = {m: {} for m in modes}
    db = index.store.db
    for q in questions:
        group = f"{q['lang']}-{'identifier' if q['kind'] == 'i' else 'question'}"
        qvec = await index.search_job.query_vector(q["q"]) if index.embedder else None
        legs = await S.gather_legs(db, q["q"], qvec, 40)
        out = {}
        keyword = {k: v for k, v in legs.items() if k != "vector"}
        fused = S.rrf_fusion(keyword)
        out["bm25"] = await _rows(db, sorted(fused, key=lambda i: -fused[i])[:5])
        out["vector"] = await _rows(db, [i for i, _ in legs.get("vector", [])[:5]])
        response = await index.search(q["q"], max_results=5)
        out["hybrid"] = [(r.path, r.start_line, r.end_line) for r in response.results]
        base = openclaw_fusion(await baseline_legs(db, q["q"], qvec, 20))
        ranked = [i for i in sorted(base, key=lambda i: -base[i]) if base[i] >= 0.35][:5]
        out["baseline"] = await _rows(db, ranked)
        for mode in modes:
            hits[mode].setdefault(group, []).append((_hit(out[mode], q, 1), _hit(out[mode], q, 5)))
    return hits


def report(hits: dict[str, dict[str, list]]) -> None:
    groups = sorted({g for m in hits.values() for g in m})
    print(f"{'mode':<10}" + "".join(f"{g:>22}" for g in [*groups, "all"]))
    for mode, by_group in hits.items():
        cells = []
        for group in [*groups, "all"]:
            rows = (
                [r for g, rs in by_group.items() for r in rs]
                if group == "all"
                else (by_group.get(group, []))
            )
            n = len(rows) or 1
            h1 = sum(r[0] for r in rows) / n
            h5 = sum(r[1] for r in rows) / n
            cells.append(f"{h1:6.0%} / {h5:4.0%} (n={len(rows):>2})")
        print(f"{mode:<10}" + "".join(f"{c:>22}" for c in cells))
    print("cells: hit@1 / hit@5")


async def run(chunk_chars: int, embedder_kind: str, line_model_kind: str = "minilm") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        questions = build_workspace(root)
        embedder = LocalEmbedder() if embedder_kind == "local" else None
        line_model = build_line_model(line_model_kind) if embedder else None
        index = RecallIndex(
            root, embedder, chunk_chars=chunk_chars, today=lambda: TODAY, line_model=line_model
        )
        started = time.perf_counter()
        stats = await index.sync()
        took = time.perf_counter() - started
        print(
            f"\nchunk_chars={chunk_chars}: {stats.chunks_added} chunks from "
            f"{stats.files_indexed} files indexed in {took:.1f} s "
            f"({stats.chunks_added / took:.1f} chunks/s, {stats.embedded} embedded); "
            f"{len(questions)} questions"
        )
        report(await evaluate(index, questions))
        await index.close()


def bench_main(run_one: Callable[[int, str, str], Awaitable[None]], description: str) -> None:
    """The command line both recall benchmarks share: chunk sizes to try, embedder, line
    model."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--chunk-chars", type=int, nargs="+", default=[DEFAULT_CHUNK_CHARS])
    parser.add_argument("--embedder", choices=["local", "none"], default="local")
    parser.add_argument(
        "--line-model",
        choices=["minilm", "none"],
        default="minilm",
        help="the second model for line vectors (memory.minilm)",
    )
    args = parser.parse_args()
    for size in args.chunk_chars:
        asyncio.run(run_one(size, args.embedder, args.line_model))


def main() -> None:
    bench_main(run, __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
