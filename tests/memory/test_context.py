"""Contextual chunk text: the note's date and the speakers, for the embedding only."""

from memory.context import chunk_context, embedding_text


def test_daily_note_chunk_gets_date_and_speakers_in_order():
    text = "- Maya: I got the job!\n- Jonah: No way.\n- Maya: Starting Monday."
    assert chunk_context("memory/2026-03-14.md", text) == "2026-03-14. Maya, Jonah:"
    assert embedding_text("memory/2026-03-14.md", text).endswith("\n" + text)


def test_undated_prose_is_embedded_as_it_is():
    text = "The staging database listens on 10.0.3.17:8443. Note: rotate keys."
    assert chunk_context("MEMORY.md", text) == ""
    assert embedding_text("MEMORY.md", text) == text
