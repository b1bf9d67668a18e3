"""The embedder interface: the protocol, its error, and row normalization.

Its own module so an implementation (memory/minilm.py) can depend on the interface without
importing memory/embedders.py, which builds the implementations (an import cycle otherwise).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class EmbedderError(Exception):
    """The embedder cannot produce vectors (not installed, endpoint down, bad answer)."""


class Embedder(Protocol):
    # `name` and `model` and `dim` together identify the vector space; a change rebuilds the
    # index and keys the embedding cache.
    name: str
    model: str
    dim: int

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    normalized: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return normalized
