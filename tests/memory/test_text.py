"""Chunking along Markdown lines, transcript lines, and FTS query construction."""

from __future__ import annotations

import itertools
import json

from memory.chunking import chunk_lines, markdown_lines, transcript_lines
from memory.sources import daily_note_date, is_dm_transcript, is_memory_path
from memory.text import index_text, trigram_query, word_query


def test_chunks_keep_line_ranges_and_overlap():
    text = "\n".join(f"- fact number {i} about something worth keeping" for i in range(1, 41))
    chunks = chunk_lines(markdown_lines(text), 300, overlap_lines=1)
    assert chunks[0].start_line == 1
    assert chunks[-1].end_line == 40
    for before, after in itertools.pairwise(chunks):
        assert after.start_line == before.end_line  # one line of overlap
        assert len(before.text) <= 300
    # Every line is in some chunk, with its own text.
    lines = text.splitlines()
    for number in (1, 17, 40):
        assert any(
            c.start_line <= number <= c.end_line and lines[number - 1] in c.text for c in chunks
        )


def test_heading_starts_a_new_chunk_and_long_line_is_split():
    text = "# One\n" + "alpha beta gamma. " * 10 + "\n# Two\nsecond section\n" + "x " * 400
    chunks = chunk_lines(markdown_lines(text), 200, overlap_lines=0)
    assert any(c.text.startswith("# Two") for c in chunks)
    long_pieces = [c for c in chunks if c.start_line == c.end_line == 5]
    assert len(long_pieces) >= 3 and all(len(c.text) <= 200 for c in long_pieces)


def test_transcript_lines_are_dialogue_only_with_file_line_numbers():
    entries = [
        {"type": "session", "key": "owner:dm"},
        {"type": "user", "text": "my sister lives in Lyon"},
        {"type": "tool_result", "text": "secret tool output"},
        {"type": "assistant", "text": "Noted."},
        {"type": "delivery", "ok": True},
    ]
    text = "\n".join(json.dumps(e) for e in entries) + "\n{torn"
    lines = transcript_lines(text)
    assert [(line.number, line.text) for line in lines] == [
        (2, "User: my sister lives in Lyon"),
        (4, "Assistant: Noted."),
    ]
    assert is_dm_transcript(text)
    assert not is_dm_transcript('{"type":"session","key":"telegram:group:1"}\n')


def test_word_query_ors_terms_and_keeps_identifiers_whole():
    query = word_query("How did we fix the outage on prod-db-2?")
    assert " OR " in query and " AND " not in query
    assert '"prod db 2"' in query and '"outage"' in query and '"how"' not in query
    assert '"cve 2026 25253"' in word_query("CVE-2026-25253")
    assert trigram_query("is 10.0.3.17:8443 up") == '"10.0.3.17:8443"'


def test_cjk_is_indexed_and_queried_as_bigrams():
    assert index_text("我们迁移数据库") == " 我们 们迁 迁移 移数 数据 据库 "
    assert word_query("咖啡") == '"咖啡"'
    assert '"数据"' in word_query("数据库迁移") and '"数据库"' in trigram_query("数据库迁移")
    assert trigram_query("咖啡") == ""


def test_sources_and_dates():
    assert is_memory_path("MEMORY.md") and is_memory_path("memory/a/b.md")
    assert is_memory_path("sessions/x-1.jsonl")
    assert not is_memory_path("notes/x.md") and not is_memory_path("memory/.hidden.md")
    assert str(daily_note_date("memory/2026-03-14.md")) == "2026-03-14"
    assert daily_note_date("MEMORY.md") is None
