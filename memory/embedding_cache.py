"""The models of a recall index and the embedding cache of what they computed.

The cache is `embeddings.sqlite`, attached to the index's connection as `cache`
(memory.index_store): chunk vectors in `cache.embeddings`, line vectors (memory.lines) in
`cache.line_embeddings`, each keyed by the model's space (embedder, model, dimension) and the
hash of the text embedded, so a rebuild or a changed file never re-embeds a text seen before.
Every method that takes a connection runs with the index lock held.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import aiosqlite
import numpy as np

from memory.context import embedding_text
from memory.embedders import Embedder
from memory.lines import content_lines, pack_vectors, unpack_vectors

__all__ = ["EmbeddingCache", "joined", "line_items", "space_key"]

_IN_BATCH = 500  # hashes looked up in one query


def space_key(embedder: Embedder | None) -> str:
    if embedder is None:
        return "none"
    return f"{embedder.name}:{embedder.model}:{embedder.dim}"


class EmbeddingCache:
    """The embedder (None: keyword-only), the optional second model for line vectors (it
    needs the embedder: its vectors sit after the embedder's in each line row), and their
    cached vectors. With `context`, a chunk is embedded with its note's date and speakers in
    front (memory.context), which gives it other cache keys."""

    def __init__(
        self,
        embedder: Embedder | None,
        line_model: Embedder | None = None,
        *,
        context: bool = False,
    ) -> None:
        self.embedder = embedder
        self.line_model = line_model if embedder is not None else None
        self.context = context

    @property
    def line_models(self) -> list[Embedder]:
        """The models whose vectors make up a line's row, in their order in it."""
        if self.embedder is None:
            return []
        return [self.embedder, *([self.line_model] if self.line_model else [])]

    @property
    def line_dim(self) -> int:
        """Columns of a stored line row: every line model's dimensions."""
        return sum(model.dim for model in self.line_models)

    def embedding_text(self, rel: str, text: str) -> str:
        """What the embedder is given for the chunk `text` of the file `rel`."""
        return embedding_text(rel, text) if self.context else text

    def chunk_key(self, rel: str, text: str) -> str:
        """The chunk's `hash` column: what its vector is computed from, the cache key."""
        return hashlib.sha256(self.embedding_text(rel, text).encode("utf-8")).hexdigest()

    async def chunk_vectors(self, db: aiosqlite.Connection, hashes: list[str]) -> dict[str, bytes]:
        """The embedder's cached vectors (as stored) of these chunk keys."""
        space = space_key(self.embedder)
        found: dict[str, bytes] = {}
        for start in range(0, len(hashes), _IN_BATCH):
            part = hashes[start : start + _IN_BATCH]
            marks = ",".join("?" * len(part))
            rows = await db.execute_fetchall(
                f"SELECT hash, vector FROM cache.embeddings WHERE space = ? AND hash IN ({marks})",
                (space, *part),
            )
            found.update((row[0], row[1]) for row in rows)
        return found

    async def line_parts(
        self, db: aiosqlite.Connection, hashes: list[str]
    ) -> list[dict[str, np.ndarray]]:
        """For each line model, the line vectors by text hash that the cache holds."""
        parts: list[dict[str, np.ndarray]] = []
        unique = list(dict.fromkeys(hashes))
        for model in self.line_models:
            space, dim = space_key(model), model.dim
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(unique), _IN_BATCH):
                part = unique[start : start + _IN_BATCH]
                rows = await db.execute_fetchall(
                    "SELECT hash, vector FROM cache.line_embeddings WHERE space = ? AND hash "
                    f"IN ({','.join('?' * len(part))})",
                    (space, *part),
                )
                found.update((row[0], unpack_vectors(row[1], 1, dim)[0]) for row in rows)
            parts.append(found)
        return parts

    async def line_rows(self, db: aiosqlite.Connection, hashes: list[str]) -> dict[str, np.ndarray]:
        """Whole line rows by text hash: the lines every line model's cache holds."""
        if self.embedder is None or not hashes:
            return {}
        return joined(await self.line_parts(db, hashes))

    async def keep(
        self,
        db: aiosqlite.Connection,
        chunks: list[tuple[str, bytes]],
        lines: list[dict[str, np.ndarray]],
    ) -> None:
        """Cache what was just computed: the embedder's chunk vectors (key, stored bytes) and,
        for each line model in `line_models` order, its line vectors by hash."""
        await db.executemany(
            "INSERT OR REPLACE INTO cache.embeddings(space, hash, vector) VALUES (?, ?, ?)",
            [(space_key(self.embedder), h, vector) for h, vector in chunks],
        )
        await db.executemany(
            "INSERT OR REPLACE INTO cache.line_embeddings(space, hash, vector) VALUES (?, ?, ?)",
            [
                (space_key(model), h, pack_vectors(vector[None]))
                for model, part in zip(self.line_models, lines, strict=True)
                for h, vector in part.items()
            ],
        )


def line_items(text: str, numbers: Sequence[int]) -> list[tuple[int, str, str]]:
    """(line number, cache key, text) of a chunk's lines that get a vector (memory.lines)."""
    return [
        (number, hashlib.sha256(line.encode("utf-8")).hexdigest(), line)
        for number, line in content_lines(text, list(numbers))
    ]


def joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Whole line rows: each hash every part holds, its vectors side by side."""
    if not parts:
        return {}
    return {
        h: np.concatenate([part[h] for part in parts]) if len(parts) > 1 else vector
        for h, vector in parts[0].items()
        if all(h in part for part in parts[1:])
    }
