"""The recall index with a fake embedder: sync, freshness, rebuilds, recovery, search."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from datetime import date
from pathlib import Path

import pytest

from memory.embedders import EmbedderError
from memory.index import RecallIndex
from memory.search import SNIPPET_CHARS
from memory.service import MemoryOptions, MemoryService
from tests.fakes.embedder import FakeEmbedder

TODAY = date(2026, 11, 29)


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "sessions").mkdir()
    (ws / "MEMORY.md").write_text(
        "# Memory\n- Alice prefers oat milk in her coffee.\n"
        "- The staging database listens on 10.0.3.17:8443.\n"
    )
    (ws / "USER.md").write_text("# User\n- Name: Alice. Lives in Lisbon.\n")
    (ws / "memory" / "2026-01-10.md").write_text(
        "# 2026-01-10\n- The deploy broke because a migration locked the users table.\n"
        "- We rolled back and added a lock timeout.\n"
        "- Patched CVE-2026-25253 on the gateway host.\n"
    )
    (ws / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n- 我们把数据库迁移到了新的服务器。\n- 咖啡机坏了，下周修。\n"
        "- Something about security patches in general.\n"
    )
    _transcript(
        ws / "sessions" / "owner_dm-1a2b3c4d.jsonl",
        "owner:dm",
        ["my sister Marta moved to Valparaiso", "Noted: Marta lives in Valparaiso."],
    )
    _transcript(
        ws / "sessions" / "telegram_group_9-5e6f7a8b.jsonl",
        "telegram:group:9",
        ["the group password is zebrafish"],
    )
    return ws


def _transcript(path: Path, key: str, texts: list[str]) -> None:
    lines = [{"type": "session", "key": key}]
    for i, text in enumerate(texts):
        lines.append({"type": "user" if i % 2 == 0 else "assistant", "text": text})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def _index(ws: Path, embedder: FakeEmbedder | None = None, **kw) -> RecallIndex:
    return RecallIndex(ws, embedder, today=lambda: TODAY, **kw)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return _workspace(tmp_path)


async def _paths(index: RecallIndex, query: str, k: int = 3) -> list[str]:
    return [r.path for r in (await index.search(query, max_results=k)).results]


async def test_sync_indexes_sources_and_skips_group_transcripts(ws):
    index = _index(ws, FakeEmbedder())
    stats = await index.sync()
    assert stats.rebuilt and stats.files_indexed == 6 and stats.embedded == stats.chunks_added
    status = await index.status()
    assert status.files == 5 and status.mode == "hybrid" and not status.dirty
    assert status.vectors == status.chunks
    everything = await index.search("zebrafish password", max_results=50)
    assert all("zebrafish" not in r.snippet for r in everything.results)  # group: not memory
    assert (await _paths(index, "where does Marta live"))[0].startswith("sessions/owner_dm")
    await index.close()


async def test_unchanged_resync_embeds_nothing_and_results_have_fields(ws):
    embedder = FakeEmbedder()
    index = _index(ws, embedder)
    await index.sync()
    before = embedder.documents_embedded
    stats = await index.sync()
    assert stats.files_indexed == 0 and stats.embedded == 0
    assert embedder.documents_embedded == before
    os.utime(ws / "MEMORY.md")  # touched, same content
    stats = await index.sync()
    assert stats.embedded == 0 and stats.chunks_added == 0
    result = (await index.search("oat milk coffee")).results[0]
    assert (result.path, result.start_line, result.end_line) == ("MEMORY.md", 1, 3)
    assert result.source == "memory" and 0 < result.score <= 1 and "oat milk" in result.snippet
    await index.close()


async def test_hand_edit_then_search_finds_new_text(ws):
    index = _index(ws, FakeEmbedder())
    assert (await index.search("oat milk")).results  # the first search of an empty index syncs
    with open(ws / "memory" / "2026-01-10.md", "a") as handle:
        handle.write("- Bought a kumquat tree for the balcony.\n")
    results = (await index.search("kumquat")).results
    assert results and results[0].path == "memory/2026-01-10.md"
    assert results[0].end_line == 5
    await index.close()


async def test_deleted_file_disappears(ws):
    index = _index(ws, FakeEmbedder())
    assert "memory/2026-01-10.md" in await _paths(index, "CVE-2026-25253")
    (ws / "memory" / "2026-01-10.md").unlink()
    assert "memory/2026-01-10.md" not in await _paths(index, "CVE-2026-25253", 50)
    assert (await index.status()).files == 4
    await index.close()


async def test_embedder_change_rebuilds_and_cache_avoids_reembedding(ws):
    first = FakeEmbedder("bag-v1")
    index = _index(ws, first)
    await index.sync()
    await index.close()
    second = FakeEmbedder("bag-v2", dim=32)
    index = _index(ws, second)
    stats = await index.sync()
    assert stats.rebuilt and stats.embedded > 0
    status = await index.status()
    assert status.model == "bag-v2" and status.dimension == 32 and status.vectors == status.chunks
    await index.close()
    back = FakeEmbedder("bag-v1")
    index = _index(ws, back)
    stats = await index.sync()
    assert stats.rebuilt and stats.embedded == 0 and stats.cached > 0  # cache by space + hash
    await index.close()


async def test_chunking_change_rebuilds(ws):
    index = _index(ws, FakeEmbedder())
    await index.sync()
    await index.close()
    index = _index(ws, FakeEmbedder(), chunk_chars=120)
    assert (await index.sync()).rebuilt
    await index.close()


async def test_corrupt_index_is_rebuilt(ws):
    index = _index(ws, FakeEmbedder())
    await index.sync()
    await index.close()
    path = ws / ".recall" / "index.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    index = _index(ws, FakeEmbedder())
    assert await _paths(index, "oat milk") == ["MEMORY.md", *(await _paths(index, "oat milk"))[1:]]
    assert (await index.status()).chunks > 0
    await index.close()


async def test_index_deleted_while_open_is_rebuilt_on_next_open(ws):
    index = _index(ws, FakeEmbedder())
    await index.sync()
    await index.close()
    for name in os.listdir(ws / ".recall"):
        os.unlink(ws / ".recall" / name)
    index = _index(ws, FakeEmbedder())
    assert "MEMORY.md" in await _paths(index, "10.0.3.17:8443")
    await index.close()


async def test_keyword_only_mode_returns_results_and_says_so(ws):
    index = _index(ws, None)
    response = await index.search("rolled back migration")
    assert response.results and response.results[0].path == "memory/2026-01-10.md"
    assert response.mode == "keyword-only" and "keyword-only" in response.note
    status = await index.status()
    assert status.mode == "keyword-only" and status.embedder == "none" and status.vectors == 0
    await index.close()


async def test_embedder_down_falls_back_then_backfills(ws):
    broken = FakeEmbedder(fail=True)
    index = _index(ws, broken)
    response = await index.search("oat milk")
    assert response.results and response.results[0].path == "MEMORY.md"
    assert response.mode == "keyword-only" and "unavailable" in response.note
    assert "lack vectors" in (await index.status()).note
    broken.fail = False
    await index.sync()
    status = await index.status()
    assert status.vectors == status.chunks and status.mode == "hybrid"
    await index.close()


@pytest.mark.parametrize("query", ["咖啡", "咖啡机", "数据库", "迁移到新的服务器"])
async def test_cjk_queries_of_two_and_more_characters(ws, query):
    index = _index(ws, FakeEmbedder())
    assert (await _paths(index, query, 1)) == ["memory/2026-11-20.md"]
    await index.close()
    keyword = _index(ws, None)
    assert (await _paths(keyword, query, 1)) == ["memory/2026-11-20.md"]
    await keyword.close()


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("CVE-2026-25253", "memory/2026-01-10.md"),
        ("10.0.3.17:8443", "MEMORY.md"),
        ("what was CVE-2026-25253 about", "memory/2026-01-10.md"),
    ],
)
async def test_identifier_queries(ws, query, path):
    (ws / "memory" / "noise.md").write_text(
        "- CVE-2025-11111 was not relevant to us.\n\n# other\n- host 10.0.3.18:8080 retired.\n"
    )
    index = _index(ws, FakeEmbedder())
    assert (await _paths(index, query, 1)) == [path]
    await index.close()


async def test_old_exact_match_beats_recent_vague_one(ws):
    (ws / "memory" / "2026-11-28.md").write_text("- Talked about security and patching.\n")
    index = _index(ws, FakeEmbedder())
    assert (await _paths(index, "patched CVE-2026-25253", 1)) == ["memory/2026-01-10.md"]
    await index.close()


async def test_near_duplicates_are_diversified(ws):
    for day in ("2026-02-01", "2026-02-02"):
        (ws / "memory" / f"{day}.md").write_text("- The boiler service is booked with Vulcan.\n")
    (ws / "memory" / "2026-02-03.md").write_text("- Vulcan boiler invoice paid.\n")
    index = _index(ws, FakeEmbedder())
    paths = await _paths(index, "boiler Vulcan", 3)
    assert "memory/2026-02-03.md" in paths[:2]
    await index.close()


async def test_archived_dm_transcripts_are_indexed(ws):
    _transcript(
        ws / "sessions" / "owner_dm-1a2b3c4d.20260101T000000000000Z.jsonl",
        "owner:dm",
        ["remember the locker code is 4471", "Saved."],
    )
    index = _index(ws, FakeEmbedder())
    results = (await index.search("locker code", max_results=1)).results
    assert results[0].path.endswith("20260101T000000000000Z.jsonl")
    assert results[0].source == "sessions" and results[0].start_line == 2
    await index.close()


async def test_watcher_marks_dirty_and_syncs(ws):
    index = _index(ws, FakeEmbedder())
    await index.sync()
    index.start_watching(interval=0.05, debounce=0.05)
    await asyncio.sleep(0.15)
    (ws / "memory" / "later.md").write_text("- The piano tuner comes on Friday.\n")
    for _ in range(100):
        await asyncio.sleep(0.05)
        if not (status := await index.status()).dirty and status.files == 6:
            break
    assert (await index.status()).files == 6
    assert await _paths(index, "piano tuner", 1) == ["memory/later.md"]
    await index.close()


async def test_snippet_is_capped(ws):
    (ws / "memory" / "long.md").write_text("word " * 2000 + "needle-xyz here\n")
    index = _index(ws, FakeEmbedder(), chunk_chars=4000)
    result = (await index.search("needle-xyz", max_results=1)).results[0]
    assert len(result.snippet) <= SNIPPET_CHARS and "needle-xyz" in result.snippet
    await index.close()


class BlockedEmbedder(FakeEmbedder):
    """Embeds queries at once but documents only once `release` is set: a model busy with a
    large note. A search that waited for the documents would hang until then."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()

    def embed_documents(self, texts):
        self.started.set()
        if not self.release.wait(30):
            raise EmbedderError("test embedder was never released")
        return super().embed_documents(texts)


async def test_search_answers_at_once_while_vectors_are_pending(ws):
    """The gateway's search never waits for embeddings (fails when it does)."""
    embedder = BlockedEmbedder()
    service = MemoryService(lambda: embedder, MemoryOptions(watch=False), today=lambda: TODAY)
    try:
        response = await asyncio.wait_for(service.search(ws, "oat milk"), 5)
        assert response.results[0].path == "MEMORY.md"
        assert response.pending > 0 and "no vector yet" in response.note
        # New text is searchable by its words at once, while the model is still busy.
        (ws / "memory" / "2026-11-28.md").write_text("- Planted a kumquat tree.\n")
        response = await asyncio.wait_for(service.search(ws, "kumquat"), 5)
        assert response.results[0].path == "memory/2026-11-28.md"
        assert await asyncio.to_thread(embedder.started.wait, 5)
        embedder.release.set()
        index = await service.index_for(ws)
        for _ in range(100):  # the background task finishes the vectors on its own
            await index.wait_for_vectors()
            if (status := await index.status()).vectors == status.chunks:
                break
            await service.search(ws, "kumquat")
        status = await index.status()
        assert status.vectors == status.chunks and status.mode == "hybrid"
        response = await service.search(ws, "kumquat")
        assert response.pending == 0 and "no vector" not in response.note
    finally:
        embedder.release.set()
        await service.close()


async def test_vectors_of_changed_chunks_are_not_stored(ws):
    """A chunk edited while its vector was being computed gets the new text's vector."""
    embedder = BlockedEmbedder()
    index = _index(ws, embedder, embed_in_background=True)
    await index.search("oat milk")
    assert await asyncio.to_thread(embedder.started.wait, 5)
    (ws / "MEMORY.md").write_text("# Memory\n- Alice now takes her coffee black.\n")
    await index.sync(embed=False)  # the old chunk goes while its vector is computed
    embedder.release.set()
    await index.wait_for_vectors()
    await index.sync()
    status = await index.status()
    assert status.vectors == status.chunks
    rows = await index.store.db.execute_fetchall(
        "SELECT count(*) FROM chunks_vec WHERE rowid NOT IN (SELECT id FROM chunks)"
    )
    assert rows[0][0] == 0
    await index.close()


async def test_embedding_progress_counts_every_chunk_with_an_estimate(ws):
    seen = []
    index = _index(ws, FakeEmbedder())
    stats = await index.sync(vector_progress=seen.append)
    assert seen and seen[-1].done == seen[-1].total == stats.embedded > 0
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[-1].eta_seconds == 0 and seen[0].per_second > 0
    assert stats.pending == 0
    await index.close()


async def test_equal_chunks_are_embedded_once(ws):
    for name in ("2026-02-01.md", "2026-02-02.md", "2026-02-03.md"):
        (ws / "memory" / name).write_text("- Watered the fern and fed the cat.\n")
    embedder = FakeEmbedder()
    index = _index(ws, embedder)
    stats = await index.sync()
    status = await index.status()
    assert status.vectors == status.chunks
    assert stats.embedded == status.chunks - 2
    # Lines too: the three notes' one line is embedded once.
    assert embedder.documents_embedded == stats.embedded + stats.lines_embedded
    lines = await index.store.db.execute_fetchall(
        "SELECT count(*) FROM cache.line_embeddings WHERE hash IN (SELECT hash FROM "
        "cache.line_embeddings)"
    )
    assert stats.lines_embedded == lines[0][0]
    await index.close()
