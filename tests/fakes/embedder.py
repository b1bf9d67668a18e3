"""A deterministic embedder for tests: hashed bag of words (and CJK bigrams), normalized.

Texts that share words get close vectors, so semantic-ish tests behave predictably, and it is
instant. `fail=True` makes it raise like an endpoint that is down.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from memory.embedders import EmbedderError
from memory.text import cjk_bigrams

_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")


class FakeEmbedder:
    name = "fake"

    def __init__(self, model: str = "bag-v1", dim: int = 64, *, fail: bool = False) -> None:
        self.model = model
        self.dim = dim
        self.fail = fail
        self.documents_embedded = 0
        self.queries_embedded = 0

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        tokens = [t.lower() for t in _WORD.findall(text)]
        for run in _CJK.findall(text):
            tokens.extend(cjk_bigrams(run))
        for token in tokens:
            digest = hashlib.blake2b(f"{self.model}:{token}".encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % self.dim] += 1.0
        vector[0] += 0.01  # never all-zero
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("fake endpoint is down")
        self.documents_embedded += len(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        if self.fail:
            raise EmbedderError("fake endpoint is down")
        self.queries_embedded += 1
        return self._vector(text)
