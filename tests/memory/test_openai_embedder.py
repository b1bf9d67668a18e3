"""The `openai` embedder through the real openai SDK against a loopback embeddings endpoint."""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from memory.embedders import EmbedderError, OpenAIEmbedder, build_embedder
from memory.index import RecallIndex
from tests.fakes.embedder import FakeEmbedder
from tests.fakes.embeddings_server import FakeEmbeddingsServer

TODAY = date(2026, 11, 29)


def _embedder(server: FakeEmbeddingsServer, **kw) -> OpenAIEmbedder:
    kw.setdefault("max_retries", 0)
    return OpenAIEmbedder(
        "nomic-embed-text", 96, api_key="sk-test", base_url=server.base_url, timeout=5.0, **kw
    )


async def test_vectors_come_back_in_input_order_with_the_configured_dimension():
    async with FakeEmbeddingsServer() as server:
        embedder = _embedder(server, batch_size=2)
        texts = ["oat milk in coffee", "staging database port", "cello lessons", "plumber"]
        vectors = await asyncio.to_thread(embedder.embed_documents, texts)
        query = await asyncio.to_thread(embedder.embed_query, "cello lessons")
    assert vectors.shape == (4, 96) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Same vectors the endpoint computed, each in its input's row although the answer came
    # reversed, over two batches of two.
    expected = FakeEmbedder(model="nomic-embed-text", dim=96).embed_documents(texts)
    assert np.allclose(vectors, expected, atol=1e-5)
    assert np.allclose(query, vectors[2], atol=1e-5)
    assert [len(r["input"]) for r in server.requests] == [2, 2, 1]
    assert all(r["dimensions"] == 96 and r["model"] == "nomic-embed-text" for r in server.requests)
    assert server.authorizations[0] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("fail_with", "embeddings endpoint failed"),
        ("garbage", "embeddings endpoint"),
        ("wrong_dim", "103 dimensions, expected 96"),
    ],
)
async def test_endpoint_faults_become_one_clear_error(fault: str, message: str):
    async with FakeEmbeddingsServer() as server:
        setattr(server, fault, 503 if fault == "fail_with" else True)
        embedder = _embedder(server)
        with pytest.raises(EmbedderError, match=message):
            await asyncio.to_thread(embedder.embed_documents, ["anything"])


async def test_index_searches_through_the_endpoint_and_survives_it_going_down(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- The staging database listens on port 8443.\n")
    (ws / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n- Booked cello lessons.\n")
    async with FakeEmbeddingsServer() as server:
        built = build_embedder(
            "openai", model="nomic-embed-text", dim=96, api_key="sk-test", base_url=server.base_url
        )
        assert built is not None and built.dim == 96
        # The same endpoint and model without retries, so the failure below is not waited on.
        embedder = _embedder(server)
        index = RecallIndex(ws, embedder, today=lambda: TODAY)
        try:
            await index.sync()  # embeds everything (a search alone would not wait for it)
            response = await index.search("cello lessons")
            assert response.mode == "hybrid"
            assert response.results[0].path == "memory/2026-11-20.md"
            embedded = server.texts_embedded
            await index.sync()  # nothing changed: nothing re-embedded
            assert server.texts_embedded == embedded
            server.fail_with = 500
            down = await index.search("staging database port")
            assert down.mode == "keyword-only" and "unavailable" in down.note
            assert down.results[0].path == "MEMORY.md"
        finally:
            await index.close()
