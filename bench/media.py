"""What taking a voice note, a photo or a document costs clawgate itself.

Each kind goes the whole way: an update on the loopback Telegram Bot API, the real
python-telegram-bot client, getFile and a streamed download, the inbox, the media step
(transcription, resizing, text extraction), the turn with an instantly answering model, and
the reply sent back. The transcription backend answers instantly too, so that what is left
is clawgate's own time; the same message without the file is timed alongside, and the
difference is the latency a file adds.

Also: peak resident memory above idle while a 20 MB file is taken (the peak is reset through
/proc/self/clear_refs before each file; Linux only), and the prompt tokens an image adds
after resizing, per provider. `--local` also times the bundled local speech model on a
one-minute recording (the backend's own time, for reference).

    python bench/media.py [--runs 7] [--local]

Data: generated here (tests/fakes/media_files.py): a 60 s Ogg Opus tone (a voice note's size
and format), a 4032x3024 photo-like JPEG (3-4 MB), a 20-page text PDF; the 20 MB files are a
tone, a JPEG and a PDF made that large.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.turn_overhead import InstantProvider
from gateway.agent.media.audio import Heard
from gateway.agent.media.images import fitted_size, image_tokens
from gateway.assembly.platforms import build_gateway
from gateway.config.settings import load_settings
from retrypolicy import Backoff
from tests.fakes.media_files import VOICE_NOTE, jpeg, opus, pdf
from tests.fakes.telegram_server import FakeTelegramServer

MIB = 1024 * 1024


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (the PDF worker)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class InstantTranscriber:
    """A backend that takes no time: what remains is clawgate's."""

    name = "instant"

    async def transcribe(self, audio: Path) -> Heard:
        return Heard("a minute of words", 60.0)

    async def close(self) -> None:
        return None


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


class Rig:
    def __init__(self, tg: FakeTelegramServer, root: Path) -> None:
        self.tg = tg
        settings = load_settings(
            root / "none.toml",
            workspaces_dir=root / "ws",
            timezone="UTC",
            telegram={
                "token": tg.token,
                "base_url": tg.base_url,
                "poll_timeout_seconds": 1,
                "allow_from": ["42"],
            },
            llm={"provider": "anthropic", "api_key": "sk-bench-0123456789"},
            versioning={"enabled": False},
            memory={"enabled": False},
            media={"max_download_mb": 25},
        )
        self.gateway = build_gateway(
            settings,
            InstantProvider(),  # type: ignore[arg-type]
            options={"telegram": {"backoff": Backoff(0.05, 0.2)}},
        )
        assert self.gateway.media is not None
        self.gateway.media.transcriber = InstantTranscriber()
        self.gateway.media.provider = "anthropic"
        self.gateway.media.vision = True

    async def send(self, **message: Any) -> float:
        """Seconds from the update being available to the reply being sent."""
        return (await self.timed(**message))[0]

    async def timed(self, **message: Any) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this whole process and the children it waited for:
        a PDF is read in one) for one message's round trip.

        The CPU figure holds on a busy machine, where the wall time also counts waiting for a
        core; it includes the loopback Bot API's own share (small: it serves bytes)."""
        before = len(self.tg.sent)
        started, cpu = time.perf_counter(), _cpu()
        await self.tg.add_update(self.tg.message(42, **message))
        await self.tg.wait_sent(before + 1, timeout=120)
        return time.perf_counter() - started, _cpu() - cpu


def _file(tg: FakeTelegramServer, data: bytes, **extra: Any) -> dict[str, Any]:
    return {**tg.add_file(data), **extra}


async def latency(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegramServer(max_poll=0.2) as tg:
            rig = Rig(tg, Path(tmp))
            await rig.gateway.start()
            try:
                voice, photo, document = (
                    opus(60.0),
                    jpeg(4032, 3024),
                    pdf([f"Page {n}: " + "words of a report " * 40 for n in range(1, 21)]),
                )
                kinds: dict[str, Any] = {
                    "text": lambda: {"text": "hello"},
                    "voice 60 s": lambda: {"voice": _file(tg, voice, duration=60)},
                    "photo 12 MP": lambda: {
                        "photo": [_file(tg, photo, width=4032, height=3024)],
                        "caption": "hi",
                    },
                    "PDF 20 pages": lambda: {
                        "document": _file(
                            tg, document, file_name="report.pdf", mime_type="application/pdf"
                        )
                    },
                }
                for make in kinds.values():  # warm-up: imports, first decode, caches
                    await rig.send(**make())
                times: dict[str, list[float]] = {name: [] for name in kinds}
                cpus: dict[str, list[float]] = {name: [] for name in kinds}
                for _ in range(runs):
                    for name, make in kinds.items():
                        wall, cpu = await rig.timed(**make())
                        times[name].append(wall)
                        cpus[name].append(cpu)
            finally:
                await rig.gateway.stop(drain_timeout=5)
    base, base_cpu = statistics.median(times["text"]), statistics.median(cpus["text"])
    load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"end to end through PTB and the loopback Bot API, median of {runs} "
        f"(instant model, instant transcription; load average {load} on "
        f"{os.cpu_count()} cores):"
    )
    print(f"  {'text message':<14} wall {base * 1000:7.1f} ms   cpu {base_cpu * 1000:6.1f} ms")
    for name in list(times)[1:]:
        wall, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        print(
            f"  {name:<14} wall {wall * 1000:7.1f} ms   cpu {cpu * 1000:6.1f} ms   added by "
            f"the file: wall {(wall - base) * 1000:6.1f} ms, cpu "
            f"{(cpu - base_cpu) * 1000:6.1f} ms"
        )
    print(
        f"  sizes: voice {len(voice) / 1000:.0f} KB, photo {len(photo) / 1e6:.1f} MB, "
        f"PDF {len(document) / 1000:.0f} KB"
    )


async def peak_memory() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegramServer(max_poll=0.2) as tg:
            rig = Rig(tg, Path(tmp))
            await rig.gateway.start()
            try:
                big_voice = opus(60.0)
                big_voice += bytes(20 * 1_000_000 - len(big_voice))  # a tone, then padding
                pages = 20 * 1_000_000 // 60_000
                big_pdf = pdf([f"Page {n} " + "x" * 59_000 for n in range(pages)])
                files = {
                    "voice note, 20 MB": {"voice": _file(tg, big_voice, duration=60)},
                    "text file, 20 MB": {
                        "document": _file(
                            tg,
                            b"line of text\n" * (20 * 1_000_000 // 13),
                            file_name="log.txt",
                            mime_type="text/plain",
                        )
                    },
                    "PDF, 20 MB": {
                        "document": _file(
                            tg, big_pdf, file_name="big.pdf", mime_type="application/pdf"
                        )
                    },
                    "photo, 18 MB JPEG": {
                        "photo": [_file(tg, jpeg(6000, 4500, quality=97), width=6000, height=4500)]
                    },
                }
                await rig.send(text="warm up")
                for message in (
                    {"voice": _file(tg, opus(1.0), duration=1)},
                    {"photo": [_file(tg, jpeg(640, 480), width=640, height=480)]},
                    {"document": _file(tg, pdf(["warm"]), file_name="w.pdf")},
                ):
                    await rig.send(**message)
                print(
                    "peak resident memory above idle while taking one file "
                    "(VmHWM after a reset, minus VmRSS before):"
                )
                for name, message in files.items():
                    idle = _status("VmRSS")
                    _reset_peak()
                    seconds = await rig.send(**message)
                    peak = _status("VmHWM")
                    reply = tg.texts()[-1]
                    outcome = "taken" if reply.startswith("ok") else f"refused: {reply[:60]}"
                    print(f"  {name:<20} +{peak - idle:6.1f} MiB   ({seconds:.2f} s, {outcome})")
            finally:
                await rig.gateway.stop(drain_timeout=5)


def image_costs() -> None:
    print(
        "prompt tokens an image adds after resizing (published formulas; request bytes "
        "are the resized JPEG, base64):"
    )
    shapes = {
        "12 MP photo 4:3": (4032, 3024),
        "portrait 3:4": (3024, 4032),
        "16:9 screenshot": (2560, 1440),
        "square": (3000, 3000),
        "phone screenshot": (1179, 2556),
    }
    from io import BytesIO

    from PIL import Image

    for name, (w, h) in shapes.items():
        row = [f"  {name:<18} {w}x{h}"]
        for provider in ("anthropic", "openai"):
            fw, fh = fitted_size(w, h, provider)
            out = BytesIO()
            Image.new("RGB", (fw, fh), (120, 130, 140)).save(out, "JPEG", quality=85)
            row.append(f"{provider} {fw}x{fh} = {image_tokens(fw, fh, provider):5d} tokens")
        print("   ".join(row))
    raw = jpeg(4032, 3024)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "photo.jpg"
        source.write_bytes(raw)
        from gateway.agent.media.images import prepare_image

        started = time.perf_counter()
        prepared = prepare_image(source, Path(tmp) / "seen", "anthropic", 80_000_000)
        took = time.perf_counter() - started
        sent = prepared.path.stat().st_size * 4 / 3
    print(
        f"  a 12 MP photo of {len(raw) / 1e6:.1f} MB goes out as {sent / 1e6:.2f} MB of "
        f"base64 instead of {len(raw) * 4 / 3 / 1e6:.1f} MB; resizing took "
        f"{took * 1000:.0f} ms"
    )


async def local_model() -> None:
    import av
    import numpy as np

    from gateway.agent.media.audio import LocalWhisper

    with av.open(str(VOICE_NOTE)) as source:
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in source.decode(audio=0)])
    minute = np.tile(samples, int(np.ceil(60 * 48_000 / len(samples))))[: 60 * 48_000]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "minute.ogg"
        with av.open(str(path), "w", format="ogg") as sink:
            stream = sink.add_stream("libopus", rate=48_000)
            stream.layout = "mono"
            pcm = (minute * 32767).astype(np.int16) if minute.dtype != np.int16 else minute
            for start in range(0, len(pcm), 960):
                frame = av.AudioFrame.from_ndarray(
                    pcm[None, start : start + 960], format="s16", layout="mono"
                )
                frame.sample_rate = 48_000
                for packet in stream.encode(frame):
                    sink.mux(packet)
            for packet in stream.encode(None):
                sink.mux(packet)
        backend = LocalWhisper()
        started = time.perf_counter()
        await backend.transcribe(VOICE_NOTE)  # loads the model
        load = time.perf_counter() - started
        heard = await backend.transcribe(path)
    print(
        f"local backend (tiny.en, int8, 2 cores): model load + first 4 s note {load:.1f} s; "
        f"a 60 s voice note {heard.seconds:.1f} s ({heard.seconds / 60:.2f}x real time)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--local", action="store_true", help="also time the local model")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(latency(args.runs))
    asyncio.run(peak_memory())
    image_costs()
    if args.local:
        asyncio.run(local_model())


if __name__ == "__main__":
    main()
