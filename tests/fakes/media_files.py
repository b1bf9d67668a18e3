"""Real files for the media tests: a recorded voice note, photos, PDFs, made or shipped here.

`VOICE_NOTE` is a real recording: espeak-ng speaking "Remind me to buy green tea and call my
sister on Friday." (4 s), encoded as Telegram encodes voice notes (Ogg Opus, mono, 48 kHz,
16 kbit/s). It was made once with `make_voice_fixture` below (espeak-ng, then PyAV) and is
kept as a file so the tests need neither espeak-ng nor an encoder.
"""

from __future__ import annotations

import io
import subprocess
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VOICE_NOTE = FIXTURES / "voice-green-tea.ogg"
VOICE_TEXT = "Remind me to buy green tea and call my sister on Friday."


def jpeg(width: int, height: int, *, quality: int = 85, seed: int = 0) -> bytes:
    """A photo-like JPEG: smooth colour fields with a little grain (compresses like a photo)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (max(1, height // 8), max(1, width // 8), 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC)
    grain = rng.integers(-6, 6, (height, width, 3))
    pixels = (np.asarray(image).astype(np.int16) + grain).clip(0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=quality)
    return out.getvalue()


def png_with_alpha(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGBA", (width, height), (200, 30, 30, 128)).save(out, "PNG")
    return out.getvalue()


def pdf(pages: list[str]) -> bytes:
    """A valid PDF whose pages each carry one line of text (Helvetica), written by hand."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    font_id = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        content_id = _add(
            objects, _stream(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        )
        kids.append(
            _add(
                objects,
                (
                    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                    b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_id, font_id)
                ),
            )
        )
    objects[1] = _pages(kids)
    return _written(objects)


def nested_forms_pdf(pages: int, *, depth: int = 6, fanout: int = 8, strokes: int = 50) -> bytes:
    """The red team's PDF: `pages` text-less pages, each drawing a form that draws `strokes`
    lines and the next form `fanout` times, `depth` forms deep. Small (the forms are shared:
    300 pages are ~50 KB), and pypdf walks every operator of a form at every invocation (up
    to 5,000 a page), so a page's time grows with `strokes`: a fraction of a second at the
    default, minutes at a few thousand."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    box = b"/Type /XObject /Subtype /Form /BBox [0 0 10 10]"
    lines = b"0 0 m 1 1 l S " * strokes
    form = _add(objects, _stream(lines, box))
    for _ in range(depth - 1):
        form = _add(
            objects,
            _stream(
                lines + b"q /F Do Q " * fanout,
                box + b" /Resources << /XObject << /F %d 0 R >> >>" % form,
            ),
        )
    content = _add(objects, _stream(b"q /F Do Q " * fanout))
    kids = [
        _add(
            objects,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Contents %d 0 R /Resources << /XObject << /F %d 0 R >> >> >>" % (content, form),
        )
        for _ in range(pages)
    ]
    objects[1] = _pages(kids)
    return _written(objects)


def deep_page_tree_pdf(depth: int = 3000) -> bytes:
    """A PDF whose one page sits `depth` /Pages nodes deep (pypdf stops at 100 with its
    `LimitReachedError`)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(depth):
        number = len(objects) + 1
        parent = b" /Parent %d 0 R" % (number - 1) if level else b""
        objects.append(b"<< /Type /Pages /Kids [%d 0 R] /Count 1%s >>" % (number + 1, parent))
    objects.append(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] >>" % len(objects))
    return _written(objects)


def _add(objects: list[bytes], body: bytes) -> int:
    """Append an object; its number."""
    objects.append(body)
    return len(objects)


def _stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< %s /Length %d >>\nstream\n%s\nendstream" % (entries, len(data), data)


def _pages(kids: list[int]) -> bytes:
    return b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )


def _written(objects: list[bytes]) -> bytes:
    """A PDF file of `objects` (object n is objects[n - 1]; the catalog is 1)."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def opus(seconds: float, *, frequency: float = 220.0) -> bytes:
    """An Ogg Opus recording of a tone, `seconds` long (for sizes and timings, not words)."""
    import av
    import numpy as np

    rate = 48_000
    out = io.BytesIO()
    with av.open(out, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=rate)
        stream.bit_rate = 16_000
        stream.layout = "mono"
        samples = int(seconds * rate)
        t = np.arange(samples) / rate
        wave = (0.3 * np.sin(2 * np.pi * frequency * t) * 32767).astype(np.int16)
        for start in range(0, samples, 960):
            frame = av.AudioFrame.from_ndarray(
                wave[None, start : start + 960], format="s16", layout="mono"
            )
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def make_voice_fixture(text: str = VOICE_TEXT, target: Path = VOICE_NOTE) -> None:
    """Regenerate VOICE_NOTE (needs espeak-ng): speech to WAV, WAV to Ogg Opus."""
    import av

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), text], check=True)
        with av.open(str(wav)) as source, av.open(str(target), "w", format="ogg") as sink:
            stream = sink.add_stream("libopus", rate=48_000)
            stream.bit_rate = 16_000
            stream.layout = "mono"
            resampler = av.AudioResampler(format="s16", layout="mono", rate=48_000)
            for frame in source.decode(audio=0):
                for resampled in resampler.resample(frame):
                    for packet in stream.encode(resampled):
                        sink.mux(packet)
            for resampled in resampler.resample(None):
                for packet in stream.encode(resampled):
                    sink.mux(packet)
            for packet in stream.encode(None):
                sink.mux(packet)


if __name__ == "__main__":
    FIXTURES.mkdir(exist_ok=True)
    make_voice_fixture()
    print(VOICE_NOTE, VOICE_NOTE.stat().st_size, "bytes")
