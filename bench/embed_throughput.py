"""Indexing throughput against the local model's own limit, for 150- and 600-character chunks.

1. The model alone: `LocalEmbedder.embed_documents` on ready-made texts in batches of 32, as
   tokens per second and chunks per second (tokens counted by the model's own tokenizer).
2. The pipeline: a fresh `RecallIndex.sync()` of daily notes that chunk to about the same
   texts (scan, read, chunk, keyword index, embed chunks and their lines, store), in chunks
   per second, and what fraction of the model's rate (per token, chunk and line tokens
   counted) that is. The line model (memory.minilm, on by default) embeds every line a second
   time, on its own much cheaper model: its time counts against the pipeline, so with it the
   fraction is below 100% by what the line model costs.
3. An unchanged re-index: seconds, and how many texts were embedded (must be 0).

The texts are lines of the long-conversation benchmark (bench/recall_conversations.py), so
they read like real notes. The machine is 2 shared cores: run it twice, read the spread.

    python bench/embed_throughput.py [--chunks 150:300 600:100] [--line-model minilm|none]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_conversations import build  # type: ignore[import-not-found]  # bench/

from memory.embedders import Embedder, LocalEmbedder, build_line_model
from memory.index import RecallIndex
from memory.lines import content_lines, split_numbers


def corpus_lines() -> list[str]:
    data = build()
    return [
        f"- {speaker}: {text}"
        for conv in data["conversations"]
        for session in conv["sessions"]
        for speaker, text in session["lines"]
    ]


def texts_of(lines: list[str], size: int, count: int) -> list[list[str]]:
    """`count` groups of consecutive lines, each just under `size` characters."""
    groups, current, length = [], [], 0
    for line in lines:
        if len(line) > size:
            continue
        if length + len(line) + 1 > size and current:
            groups.append(current)
            current, length = [], 0
            if len(groups) == count:
                break
        current.append(line)
        length += len(line) + 1
    return groups


def model_rate(embedder: LocalEmbedder, texts: list[str]) -> tuple[float, float]:
    """(chunks/s, tokens/s) of the model alone, batches of 32."""
    model = embedder._model
    tokens = sum(model.token_count(t) for t in texts)
    embedder.embed_documents(texts[:4])  # warm
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        embedder.embed_documents(texts[start : start + 32])
    took = time.perf_counter() - started
    return len(texts) / took, tokens / took


async def pipeline_rate(
    embedder: LocalEmbedder, groups: list[list[str]], size: int, line_model: Embedder | None = None
) -> tuple[float, int, float, int, float]:
    """(chunks/s, chunks, seconds of an unchanged re-index, texts embedded by it, tokens/s)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / "memory").mkdir(parents=True)
        day = date(2026, 1, 1)
        for start in range(0, len(groups), 5):  # five chunks a note
            body = "\n\n## part\n".join("\n".join(g) for g in groups[start : start + 5])
            (root / "memory" / f"{day.isoformat()}.md").write_text(body + "\n")
            day += timedelta(days=1)
        index = RecallIndex(root, embedder, chunk_chars=size, line_model=line_model)
        started = time.perf_counter()
        stats = await index.sync()
        took = time.perf_counter() - started
        assert index.store.db is not None
        rows = await index.store.db.execute_fetchall("SELECT path, text, lines FROM chunks")
        # What was embedded: with a date/speaker prefix where the index adds one, and each
        # distinct line with content once (memory.lines).
        prefixed = index.cache.embedding_text
        tokens = sum(embedder._model.token_count(prefixed(r[0], r[1])) for r in rows)
        line_texts = {line for r in rows for _, line in content_lines(r[1], split_numbers(r[2]))}
        tokens += sum(embedder._model.token_count(t) for t in line_texts)
        started = time.perf_counter()
        again = await index.sync()
        unchanged = time.perf_counter() - started
        await index.close()
        return (
            stats.embedded / took,
            stats.embedded,
            unchanged,
            again.embedded + again.lines_embedded,
            tokens / took,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chunks",
        nargs="+",
        default=["150:300", "600:100"],
        help="SIZE:COUNT pairs: chunk size in characters and how many",
    )
    parser.add_argument("--line-model", choices=["minilm", "none"], default="minilm")
    args = parser.parse_args()
    embedder = LocalEmbedder()
    line_model = build_line_model(args.line_model)
    lines = corpus_lines()
    for pair in args.chunks:
        size, count = (int(x) for x in pair.split(":"))
        groups = texts_of(lines, size, count)
        texts = ["\n".join(g) for g in groups]
        chunks_s, tokens_s = model_rate(embedder, texts)
        p_chunks_s, embedded, unchanged, again, p_tokens_s = asyncio.run(
            pipeline_rate(embedder, groups, size, line_model)
        )
        print(
            f"{size} chars, line model {args.line_model}: model {chunks_s:.1f} chunks/s "
            f"({tokens_s:.0f} tokens/s, "
            f"{1000 / tokens_s:.2f} ms/token); pipeline {p_chunks_s:.1f} chunks/s "
            f"({p_tokens_s:.0f} tokens/s, {p_tokens_s / tokens_s:.0%} of the model) over "
            f"{embedded} chunks; unchanged re-index {unchanged:.2f} s, {again} embedded"
        )


if __name__ == "__main__":
    main()
