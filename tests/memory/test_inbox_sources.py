"""The text of documents a person sent in their DMs is a recall source; a group's is not."""

from __future__ import annotations

from memory.sources import is_memory_path, scan_sources


def test_document_text_in_the_private_inbox_is_indexed_and_a_groups_is_not(tmp_path):
    day = tmp_path / "inbox" / "2026-03-01"
    (day / ".seen").mkdir(parents=True)
    (day / "101500-report.pdf").write_bytes(b"%PDF-1.4")
    (day / "101500-report.pdf.md").write_text("the budget is 4,200 euros", encoding="utf-8")
    (day / ".seen" / "hidden.md").write_text("not a source", encoding="utf-8")
    group_day = tmp_path / "groups" / "telegram-_100" / "inbox" / "2026-03-01"
    group_day.mkdir(parents=True)
    (group_day / "notes.txt.md").write_text("a group's file", encoding="utf-8")
    rels = [source.rel for source in scan_sources(tmp_path, sessions=False)]
    assert rels == ["inbox/2026-03-01/101500-report.pdf.md"]
    assert is_memory_path("inbox/2026-03-01/101500-report.pdf.md")
    assert not is_memory_path("inbox/2026-03-01/101500-report.pdf")
    assert not is_memory_path("groups/telegram-_100/inbox/2026-03-01/notes.txt.md")
