"""Search latency at 10k and 100k chunks, indexing throughput, and unchanged re-index time.

Builds a workspace of daily notes (10 chunks a file, so 1,000 files for 10k chunks), indexes
it with a fast hashing embedder (384 dimensions, the local model's size; the real model would
take hours for 100k chunks and KNN cost does not depend on what the vectors mean), then times
`RecallIndex.search` with the REAL local model embedding each query (a fresh query each time,
no query cache), as the memory_search tool runs it: query embedding (and the line model's,
memory.minilm), vector + BM25 + trigram + line legs, fusion, MMR. The watcher runs (with an
interval longer than the bench), so no file scan per search, as in the gateway.

    python bench/recall_latency.py [--sizes 10000 100000] [--line-model minilm|none]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.embedders import LocalEmbedder, build_line_model
from memory.index import RecallIndex

# The common words; the Zipf tail is generated.
_COMMON = (
    "deploy database migration coffee sister birthday invoice server backup cello "
    "flight hotel budget roadmap garden kitchen plumber contract insurance laptop camera "
    "bread runner piano school doctor meeting ticket release certificate gateway"
)
WORDS = _COMMON.split()


class HashEmbedder:
    name, model, dim = "hash", "bench", 384

    def embed_documents(self, texts):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed_documents([text])[0]


class HashLineModel(HashEmbedder):
    name = "hash-lines"  # its own cache space, as the real line model has


class RealQueries:
    """A hashing model's documents and space (so the index built with it stays valid), with
    the queries embedded by a real model, loaded at the first query."""

    def __init__(self, documents: HashEmbedder, queries: Callable[[], Any]) -> None:
        self.name, self.model, self.dim = documents.name, documents.model, documents.dim
        self._documents = documents
        self._load = queries
        self.real: Any = None

    def embed_documents(self, texts):
        return self._documents.embed_documents(texts)

    def embed_query(self, text):
        if self.real is None:
            self.real = self._load()
        return self.real.embed_query(text)


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    """Real words plus made-up ones, drawn Zipf-like: a few common, most rare, as in notes."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    made_up = ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)]
    return WORDS + made_up


def write_workspace(root: Path, chunks: int) -> None:
    rng = random.Random(1)
    vocabulary = _vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    (root / "memory").mkdir(parents=True)
    for f in range(chunks // 10):
        paragraphs = []
        for c in range(10):
            words = " ".join(rng.choices(vocabulary, weights, k=25))
            paragraphs.append(f"## note {c}\n- {words} id-{f}-{c}\n- {words[:80]}")
        (root / "memory" / f"{f // 400:03d}-{f:06d}.md").write_text("\n\n".join(paragraphs))


async def run(size: int, queries: int, line_model_kind: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        write_workspace(root, size)
        embedder = RealQueries(HashEmbedder(), LocalEmbedder)  # same dimension
        lines = (
            RealQueries(HashLineModel(), lambda: build_line_model(line_model_kind))
            if line_model_kind != "none"
            else None
        )
        index = RecallIndex(root, embedder, chunk_chars=400, line_model=lines)
        started = time.perf_counter()
        stats = await index.sync()
        took = time.perf_counter() - started
        print(
            f"\n{stats.chunks_added} chunks, {stats.files_indexed} files: fresh index in "
            f"{took:.1f} s = {stats.chunks_added / took:.0f} chunks/s (pipeline, hashing "
            "embedder)"
        )
        started = time.perf_counter()
        again = await index.sync()
        print(
            f"unchanged re-index of {again.files_seen} files: "
            f"{time.perf_counter() - started:.3f} s, {again.embedded} embeddings"
        )
        # As in the gateway: the watcher decides when to sync (nothing changes from here).
        index.start_watching(interval=24 * 3600)
        rng = random.Random(2)
        await index.search("warm up the model")
        times = []
        for i in range(queries):
            query = (
                f"what did we decide about the {rng.choice(WORDS)} and the {rng.choice(WORDS)} {i}"
                if i % 3
                else f"id-{rng.randrange(size // 10)}-3"
            )
            t = time.perf_counter()
            await index.search(query, max_results=6)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        p95 = times[int(0.95 * len(times)) - 1]
        print(
            f"memory_search at {size} chunks over {queries} queries: "
            f"p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms, max {times[-1]:.1f} ms"
        )
        for name, model in (
            ("query embedding", embedder.real),
            ("line model's query embedding", lines and lines.real),
        ):
            if model is None:
                continue
            embed = []
            for i in range(30):
                t = time.perf_counter()
                model.embed_query(f"how did we fix the outage number {i}")
                embed.append((time.perf_counter() - t) * 1000)
            print(f"  of which {name} alone: p50 {statistics.median(embed):.1f} ms")
        await index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--line-model", choices=["minilm", "none"], default="minilm")
    args = parser.parse_args()
    for size in args.sizes:
        asyncio.run(run(size, args.queries, args.line_model))


if __name__ == "__main__":
    main()
